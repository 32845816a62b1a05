package ramp

import (
	"testing"
	"time"
)

// TestRampProof: what ends a ramp. Five answers none slower than 1.2
// times the peers' average, or eight or more whose mean is at most 1.5
// times it; not before the peers' average is known, never for answers
// several times slower, and not for a run of fast answers after slow ones
// (the mean is of every answer, as a cold process whose cache serves some
// calls gives).
func TestRampProof(t *testing.T) {
	ms := float64(time.Millisecond)
	answers := func(peers float64, took ...time.Duration) int {
		var p Proof
		for i, d := range took {
			if p.Add(int64(d), peers) {
				return i + 1
			}
		}
		return 0
	}
	for _, tc := range []struct {
		name  string
		peers float64
		took  []time.Duration
		want  int // the answer that proves it, 0: none
	}{
		{"as fast", 2 * ms, []time.Duration{2e6, 2e6, 2e6, 2e6, 2e6, 2e6}, 5},
		{"one answer a little slow", 2 * ms, []time.Duration{2e6, 3e6, 2e6, 2e6, 2e6, 2e6, 2e6, 2e6, 2e6}, 8},
		{"slow, then a run of fast", 2 * ms, []time.Duration{20e6, 20e6, 20e6, 2e6, 2e6, 2e6, 2e6, 2e6, 2e6, 2e6, 2e6, 2e6, 2e6, 2e6, 2e6, 2e6}, 0},
		{"a quarter slower", 2 * ms, []time.Duration{25e5, 25e5, 25e5, 25e5, 25e5, 25e5, 25e5, 25e5}, 8},
		{"twice as slow", 2 * ms, []time.Duration{4e6, 4e6, 4e6, 4e6, 4e6, 4e6, 4e6, 4e6, 4e6, 4e6}, 0},
		{"peers not known", 0, []time.Duration{2e6, 2e6, 2e6, 2e6, 2e6, 2e6, 2e6, 2e6, 2e6}, 0},
		// Relief: peers at least reliefRatio times slower than its slowest
		// answer end the ramp on any number of answers.
		{"peers twice as slow, one answer", 4 * ms, []time.Duration{2e6}, 1},
		{"peers 1.9 times as slow", 3.8 * ms, []time.Duration{2e6, 2e6, 2e6, 2e6, 2e6}, 5},
		{"a cold one, peers overloaded", 300 * ms, []time.Duration{20e6}, 1},
		{"one slow answer keeps it from relief", 4 * ms, []time.Duration{3e6, 2e6, 2e6, 2e6}, 0},
	} {
		if got := answers(tc.peers, tc.took...); got != tc.want {
			t.Errorf("%s: proved by answer %d, want %d (0: never)", tc.name, got, tc.want)
		}
	}
}

// TestRampProofRelieves: a picker's later check for relief sees the
// peers' lower bound grow past reliefRatio times the endpoint's slowest
// answer; it needs an answer, and a spoiled ramp is never relieved.
func TestRampProofRelieves(t *testing.T) {
	ms := float64(time.Millisecond)
	var p Proof
	if p.relieves(100 * ms) {
		t.Error("relieved with no answer")
	}
	if p.Add(int64(2*ms), 3*ms) {
		t.Fatal("one answer 2 ms against peers at 3 ms proved it")
	}
	if p.relieves(3.9 * ms) {
		t.Error("relieved with peers under twice its slowest answer")
	}
	if !p.relieves(4 * ms) {
		t.Error("not relieved with peers twice its slowest answer")
	}
	p.spoiled.Store(true)
	if p.relieves(100 * ms) {
		t.Error("a spoiled ramp relieved")
	}
	// Two calls out, one answered: the other may be slow.
	var q Proof
	q.started.Store(2)
	if q.Add(int64(2*ms), 100*ms) || q.relieves(100*ms) {
		t.Error("relieved with one of its two timed calls still out")
	}
	q.settled.Add(1) // the other's outcome: a failure before it reached the server
	if !q.relieves(100 * ms) {
		t.Error("not relieved once both calls had their outcome")
	}
}

// TestRampProofProvesWarm: the proofs a pick judges again. With the
// peers' average known, the quick and mean proofs as an answer's; with
// only their wait, relief alone, which waits for every timed call. Never
// for a spoiled ramp, nor with answers counted and no slowest (a ramp
// begun since).
func TestRampProofProvesWarm(t *testing.T) {
	ms := float64(time.Millisecond)
	var p Proof
	for range QuickAnswers {
		if p.Add(int64(12*ms), 9*ms) {
			t.Fatal("five answers of 12 ms proved against peers at 9 ms")
		}
	}
	if p.ProvesWarm(9.9*ms, true) {
		t.Error("proved warm with its slowest answer over 1.2 times the peers' 9.9 ms")
	}
	if !p.ProvesWarm(10*ms, true) {
		t.Error("five answers of 12 ms not proved warm against peers at 10 ms")
	}
	if p.ProvesWarm(23*ms, false) {
		t.Error("proved on the peers' wait alone by the quick proof; only relief (24 ms) may")
	}
	if !p.ProvesWarm(24*ms, false) {
		t.Error("not relieved on the peers' wait of twice its slowest answer")
	}
	var q Proof
	for range ProofAnswers {
		q.Add(int64(3*ms), 1*ms)
	}
	q.Add(int64(12*ms), 1*ms) // mean 4 ms, slowest 12
	if q.ProvesWarm(2.6*ms, true) {
		t.Error("a mean of 4 ms proved warm against peers at 2.6 ms")
	}
	if !q.ProvesWarm(2.7*ms, true) {
		t.Error("a mean of 4 ms not proved warm against peers at 2.7 ms (1.5 times: 4.05)")
	}
	var out Proof
	out.started.Store(2)
	out.Add(int64(2*ms), 1*ms)
	if out.ProvesWarm(4*ms, false) {
		t.Error("relieved with one of its two timed calls out")
	}
	out.settled.Add(1)
	if !out.ProvesWarm(4*ms, false) {
		t.Error("not relieved once both calls had their outcome")
	}
	p.spoiled.Store(true)
	if p.ProvesWarm(100*ms, true) {
		t.Error("a spoiled ramp proved warm")
	}
	var begun Proof
	begun.answers.Store(QuickAnswers)
	if begun.ProvesWarm(100*ms, true) {
		t.Error("proved warm with answers counted and no slowest")
	}
}

// TestRampProofOpening: the opening's calls are all timed, whatever
// proofGap says, and the calls after them one a proofGap; a new ramp
// opens again, a spoiled one times none.
func TestRampProofOpening(t *testing.T) {
	var p Proof
	now := int64(time.Second)
	p.Reset(now)
	for k := range QuickAnswers {
		if !p.Opening() || !p.Claim(now) {
			t.Fatalf("opening call %d at the same instant not timed", k+1)
		}
	}
	if p.Opening() || p.Claim(now) || p.Claim(now+proofGap/2) {
		t.Error("calls after the opening timed within proofGap of the last")
	}
	if !p.Claim(now + proofGap) {
		t.Error("a call a proofGap after the opening's not timed")
	}
	p.Reset(now + proofGap)
	if !p.Opening() || !p.Claim(now+proofGap) {
		t.Error("a new ramp does not open again")
	}
	p.spoiled.Store(true)
	if p.Opening() || p.Claim(now+10*proofGap) {
		t.Error("a spoiled ramp still opens or times calls")
	}
}

// TestProofSettle: a call settled with no answer counts for relief, and
// one that spoils the ramp ends its opening and its timing.
func TestProofSettle(t *testing.T) {
	ms := float64(time.Millisecond)
	var p Proof
	p.Reset(1)
	p.Count(Own)
	p.Count(Own)
	p.Add(int64(2*ms), 3*ms)
	if p.ProvesWarm(100*ms, false) {
		t.Error("relieved with a timed call out")
	}
	p.Settle(false)
	if !p.ProvesWarm(100*ms, false) || p.Answers() != 1 {
		t.Errorf("not relieved once the other call settled unanswered, or answers %d, want 1", p.Answers())
	}
	p.Settle(true)
	if p.ProvesWarm(100*ms, false) || p.Opening() || p.Claim(int64(time.Hour)) {
		t.Error("a spoiled ramp still proves, opens or times calls")
	}
}
