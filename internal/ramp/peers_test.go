package ramp

import (
	"testing"
	"time"
)

// TestPeerAverage: the peers' average that a ramping endpoint's answers
// are judged against. A call is timed for it at most once in proofGap;
// before any answer the wait of its first timed call (peerBound) is a
// lower bound on it, unless that call failed; its first answers give
// their minimum, so that a stream among them does not make it read slow,
// and after them an answer over capRatio times it is left out, unless
// peerRedo in a row are, which starts it over; it starts over when no
// answer has moved it for peersStale, and leaves out answers to calls
// timed before that.
func TestPeerAverage(t *testing.T) {
	var a Peers
	ms := int64(time.Millisecond)
	if got := a.AtLeast(5 * ms); got != 0 {
		t.Errorf("atLeast before any timed call = %v, want 0", got)
	}
	if !a.Claim(10*ms) || a.Claim(10*ms+proofGap/2) || !a.Claim(10*ms+proofGap) {
		t.Error("claim: want the first call timed, one within proofGap not, one a proofGap later timed")
	}
	if got := a.AtLeast(15 * ms); got != float64(5*ms) {
		t.Errorf("atLeast 5 ms after the first timed call, before its answer = %v, want %v", got, 5*ms)
	}
	a.Failed(10 * ms)
	if got := a.AtLeast(15 * ms); got != 0 {
		t.Errorf("atLeast after the first timed call failed = %v, want 0 until another is timed", got)
	}
	a.Claim(20 * ms)
	if got := a.AtLeast(25 * ms); got != float64(5*ms) {
		t.Errorf("atLeast 5 ms after the next timed call = %v, want %v", got, 5*ms)
	}
	now := int64(time.Hour) * 2
	a.Add(int64(time.Minute), now) // a stream, first
	for _, took := range []int64{2 * ms, 3 * ms, 2 * ms} {
		a.Add(took, now)
	}
	if got := a.AtLeast(now); got != float64(2*ms) {
		t.Errorf("after a stream and three answers of 2-3 ms the average is %v, want their least, %v", got, 2*ms)
	}
	a.Add(int64(time.Hour), now) // a stream, later: left out
	a.Add(4*ms, now)
	if got, want := a.AtLeast(now), float64(2*ms)+float64(2*ms)/16; got != want {
		t.Errorf("average after a stream and a 4 ms answer = %v, want %v", got, want)
	}
	// The fleet ten times slower at once: the answers are left out, and
	// after them the average starts over.
	for range peerRedo {
		a.Add(30*ms, now)
	}
	now += 100 * ms // calls timed after it started over
	for range PeerWarmup {
		a.Add(30*ms, now)
	}
	if got := a.AtLeast(now); got != float64(30*ms) {
		t.Errorf("after %d answers ten times the average, then %d more, the average is %v, want %v", peerRedo, PeerWarmup, got, 30*ms)
	}
	a.RestartIfStale(now + peersStale/2)
	if a.AtLeast(now) == 0 {
		t.Error("restartIfStale cleared an average moved within peersStale")
	}
	later := now + 2*peersStale
	a.RestartIfStale(later)
	if got := a.AtLeast(later); got != 0 {
		t.Errorf("after restartIfStale past peersStale, atLeast = %v, want 0", got)
	}
	a.Add(int64(time.Minute), later+ms) // timed before the restart
	if got := a.AtLeast(later + ms); got != 0 {
		t.Errorf("an answer to a call timed before the restart moved the average to %v, want it left out", got)
	}
}

// TestPeerAverageWantsCalls: the peers' average asks for timed calls
// until peerBound are, and again once it starts over, when the next call
// is timed at once, whatever proofGap says.
func TestPeerAverageWantsCalls(t *testing.T) {
	var a Peers
	ms := int64(time.Millisecond)
	for k := range int64(peerBound) {
		if !a.WantsCalls() {
			t.Fatalf("no longer asks for calls after %d were timed", k)
		}
		a.Claim(5*ms + k*proofGap)
	}
	if a.WantsCalls() {
		t.Errorf("still asks for calls after %d were timed", peerBound)
	}
	last := 5*ms + (peerBound-1)*proofGap
	a.restart(last + proofGap/2)
	if !a.WantsCalls() || !a.Claim(last+proofGap/2) {
		t.Error("an average that started over does not ask for calls, or refuses one within proofGap of the last")
	}
}
