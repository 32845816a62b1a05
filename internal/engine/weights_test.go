package engine

import (
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/pickwise/pickwise/internal/evidence"
	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestRampFactor(t *testing.T) {
	for _, tc := range []struct {
		aggression, minPct float64
		elapsed            time.Duration
		want               float64
	}{
		{1, 10, 0, 0.1},
		{1, 10, time.Second, 0.1},
		{1, 10, 5 * time.Second, 0.5},
		{1, 10, 10 * time.Second, 1},
		{1, 10, time.Hour, 1},
		{2, 10, 2500 * time.Millisecond, 0.5}, // 0.25^(1/2)
		{0.5, 1, 5 * time.Second, 0.25},       // 0.5^2
		{1, 0.001, 0, 1e-4},                   // Envoy's 1ms floor: 1ms/10s
	} {
		r := newRamp(&SlowStartConfig{Enabled: true, Window: Duration(10 * time.Second), Aggression: tc.aggression, MinWeightPercent: tc.minPct})
		if got := r.factor(int64(tc.elapsed)); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("aggression %v min %v%% at %v: factor %v, want %v", tc.aggression, tc.minPct, tc.elapsed, got, tc.want)
		}
	}
	if newRamp(nil) != nil {
		t.Error("newRamp(nil) is not nil")
	}
	if newRamp(&SlowStartConfig{Window: Duration(10 * time.Second), Aggression: 1, MinWeightPercent: 10}) != nil {
		t.Error("newRamp of a config with Enabled false is not nil")
	}
}

// TestRampSharesHoldShare: a ramping endpoint that would take every pick
// it is drawn into takes its ramped share of the picker's picks, counted
// from its draws (n/min(d, n) picks a draw); one that the loads kept
// under its share keeps no more than rampBurst picks of credit when its
// share grows; and at the end of its ramp nothing holds it.
func TestRampSharesHoldShare(t *testing.T) {
	const draws = 10000
	s := newRampShares(9, 9, 2, false) // nine endpoints of weight 1: a pick draws each with probability 2/9
	c := &rampCount{}
	took := 0
	for range draws {
		if !s.drawnFull(c, 1, 0.1, true, false, 0) {
			c.took.Add(1)
			took++
		}
	}
	picks := draws * 9.0 / 2
	if want := 0.1 / 8.1 * picks; math.Abs(float64(took)-want) > 2 {
		t.Errorf("took %d picks of %.0f at factor 0.1, want %.1f (0.1/8.1 of them)", took, picks, want)
	}

	// Kept under its share by the loads: drawn and never taking a pick.
	c.reset()
	for range draws {
		s.drawnFull(c, 1, 0.1, true, false, 0)
	}
	// The factor has grown to 0.5: the credit its share now gives it
	// against every pick so far is forgotten but for rampBurst picks.
	burst := 0
	for !s.drawnFull(c, 1, 0.5, true, false, 0) {
		c.took.Add(1)
		burst++
	}
	// rampBurst, the pick its share gives it anyway, and what that share
	// (0.5/8.5 of 4.5 picks a draw) earns over the burst's own draws.
	if burst < rampBurst || burst > rampBurst+2 {
		t.Errorf("after its share grew, took %d picks in a row, want %d to %d", burst, rampBurst, rampBurst+2)
	}

	c.took.Add(100) // far over any share it earned
	if s.drawnFull(c, 1, 1, true, false, 0) {
		t.Error("full at the end of its ramp")
	}
}

func TestDisabledPenaltyIsNil(t *testing.T) {
	if newPenalty(FailurePenaltyConfig{Enabled: false}) != nil {
		t.Error("a disabled penalty is not nil")
	}
}

func TestOutcomeCounts(t *testing.T) {
	e := newEndpoint("a", &doneShared{}, false)
	p := newPenalty(DefaultFailurePenalty())
	for i := 1; i <= 22; i++ {
		e.recordOutcome(true, p)
		// Every outcome was a failure: the ratio is exactly 1.
		if r := e.FailureRatio(); math.Abs(r-1) > 1e-6 {
			t.Fatalf("after %d failures the ratio is %v, want 1", i, r)
		}
	}
	for i := 0; i < 100 && e.FailureRatio() > 0; i++ {
		e.recordOutcome(false, p)
	}
	if e.FailureRatio() != 0 {
		t.Errorf("ratio %v after 100 successes, want the failures snapped to 0", e.FailureRatio())
	}
	before := e.outcomeBits.Load()
	e.recordOutcome(false, p)
	if e.outcomeBits.Load() != before {
		t.Error("a success on a healthy endpoint with full counts wrote them")
	}
	if o := e.decayOutcomes(0.5); o.Total != evidence.Unpack(before).Total {
		t.Error("decay changed a healthy endpoint's counts")
	}
}

func TestFailureCodes(t *testing.T) {
	server := []codes.Code{codes.Unavailable, codes.Internal, codes.Unknown, codes.DeadlineExceeded, codes.ResourceExhausted}
	client := []codes.Code{codes.OK, codes.Canceled, codes.InvalidArgument, codes.NotFound, codes.AlreadyExists,
		codes.PermissionDenied, codes.FailedPrecondition, codes.Aborted, codes.OutOfRange, codes.Unimplemented, codes.Unauthenticated}
	def := newPenalty(DefaultFailurePenalty())
	if def.codes != defaultFailureCodes {
		t.Errorf("the default config's codes are %b, want defaultFailureCodes %b", def.codes, defaultFailureCodes)
	}
	// With the penalty off (nil), the default codes still classify.
	for _, p := range []*penalty{def, nil} {
		for _, c := range server {
			if !p.counts(status.Error(c, "x")) {
				t.Errorf("%v is not counted as a server failure", c)
			}
		}
		for _, c := range client {
			if p.counts(status.Error(c, "x")) {
				t.Errorf("%v is counted as a server failure", c)
			}
		}
		if p.counts(nil) {
			t.Error("nil is a server failure")
		}
		// A non-status error is Unknown to grpc: the transport failed somehow.
		if !p.counts(errors.New("transport closed")) {
			t.Error("a plain error is not a server failure")
		}
		if !p.counts(fmt.Errorf("wrapped: %w", status.Error(codes.Unavailable, "x"))) {
			t.Error("a wrapped Unavailable is not a server failure")
		}
	}

	cfg := DefaultFailurePenalty()
	cfg.Codes = []string{"PERMISSION_DENIED", "UNIMPLEMENTED", "PERMISSION_DENIED"}
	p := newPenalty(cfg)
	for c := codes.Code(0); c < 20; c++ {
		want := c == codes.PermissionDenied || c == codes.Unimplemented
		if got := p.counts(status.Error(c, "x")); got != want {
			t.Errorf("codes %v: %v counts = %v, want %v", cfg.Codes, c, got, want)
		}
	}
	if p.counts(errors.New("transport closed")) {
		t.Error("a plain error (Unknown) counts though UNKNOWN is not listed")
	}
	// With the penalty off (nil) the default codes classify what is left
	// to classify.
	var off *penalty
	if !off.counts(status.Error(codes.Unavailable, "x")) || off.counts(status.Error(codes.PermissionDenied, "x")) {
		t.Error("with the penalty off, the default codes do not decide")
	}
}

func TestDurationJSON(t *testing.T) {
	var d Duration
	for in, want := range map[string]time.Duration{`"30s"`: 30 * time.Second, `"0.250s"`: 250 * time.Millisecond, `"1m30s"`: 90 * time.Second} {
		if err := d.UnmarshalJSON([]byte(in)); err != nil || time.Duration(d) != want {
			t.Errorf("UnmarshalJSON(%s) = %v, %v; want %v", in, d, err, want)
		}
	}
	for _, in := range []string{`30`, `"30"`, `"soon"`, `{}`} {
		if err := d.UnmarshalJSON([]byte(in)); err == nil {
			t.Errorf("UnmarshalJSON(%s) accepted", in)
		}
	}
	// An explicit null keeps the value (the default), as encoding/json
	// does for built-in types.
	d = Duration(7 * time.Second)
	if err := d.UnmarshalJSON([]byte(`null`)); err != nil || time.Duration(d) != 7*time.Second {
		t.Errorf("UnmarshalJSON(null) = %v, %v; want the value kept, 7s", d, err)
	}
	b, err := Duration(1500 * time.Millisecond).MarshalJSON()
	if err != nil || string(b) != `"1.5s"` {
		t.Errorf("MarshalJSON = %s, %v", b, err)
	}
}

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
	var a peerAverage
	ms := int64(time.Millisecond)
	if got := a.atLeast(5 * ms); got != 0 {
		t.Errorf("atLeast before any timed call = %v, want 0", got)
	}
	if !a.claim(10*ms) || a.claim(10*ms+proofGap/2) || !a.claim(10*ms+proofGap) {
		t.Error("claim: want the first call timed, one within proofGap not, one a proofGap later timed")
	}
	if got := a.atLeast(15 * ms); got != float64(5*ms) {
		t.Errorf("atLeast 5 ms after the first timed call, before its answer = %v, want %v", got, 5*ms)
	}
	a.failed(10 * ms)
	if got := a.atLeast(15 * ms); got != 0 {
		t.Errorf("atLeast after the first timed call failed = %v, want 0 until another is timed", got)
	}
	a.claim(20 * ms)
	if got := a.atLeast(25 * ms); got != float64(5*ms) {
		t.Errorf("atLeast 5 ms after the next timed call = %v, want %v", got, 5*ms)
	}
	now := int64(time.Hour) * 2
	a.add(int64(time.Minute), now) // a stream, first
	for _, took := range []int64{2 * ms, 3 * ms, 2 * ms} {
		a.add(took, now)
	}
	if got := a.atLeast(now); got != float64(2*ms) {
		t.Errorf("after a stream and three answers of 2-3 ms the average is %v, want their least, %v", got, 2*ms)
	}
	a.add(int64(time.Hour), now) // a stream, later: left out
	a.add(4*ms, now)
	if got, want := a.atLeast(now), float64(2*ms)+float64(2*ms)/16; got != want {
		t.Errorf("average after a stream and a 4 ms answer = %v, want %v", got, want)
	}
	// The fleet ten times slower at once: the answers are left out, and
	// after them the average starts over.
	for range peerRedo {
		a.add(30*ms, now)
	}
	now += 100 * ms // calls timed after it started over
	for range peerWarmup {
		a.add(30*ms, now)
	}
	if got := a.atLeast(now); got != float64(30*ms) {
		t.Errorf("after %d answers ten times the average, then %d more, the average is %v, want %v", peerRedo, peerWarmup, got, 30*ms)
	}
	a.restartIfStale(now + peersStale/2)
	if a.atLeast(now) == 0 {
		t.Error("restartIfStale cleared an average moved within peersStale")
	}
	later := now + 2*peersStale
	a.restartIfStale(later)
	if got := a.atLeast(later); got != 0 {
		t.Errorf("after restartIfStale past peersStale, atLeast = %v, want 0", got)
	}
	a.add(int64(time.Minute), later+ms) // timed before the restart
	if got := a.atLeast(later + ms); got != 0 {
		t.Errorf("an answer to a call timed before the restart moved the average to %v, want it left out", got)
	}
}

// TestRampProof: what ends a ramp. Five answers none slower than 1.2
// times the peers' average, or eight or more whose mean is at most 1.5
// times it; not before the peers' average is known, never for answers
// several times slower, and not for a run of fast answers after slow ones
// (the mean is of every answer, as a cold process whose cache serves some
// calls gives).
func TestRampProof(t *testing.T) {
	ms := float64(time.Millisecond)
	answers := func(peers float64, took ...time.Duration) int {
		var p rampProof
		for i, d := range took {
			if p.add(int64(d), peers) {
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
	var p rampProof
	if p.relieves(100 * ms) {
		t.Error("relieved with no answer")
	}
	if p.add(int64(2*ms), 3*ms) {
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
	var q rampProof
	q.started.Store(2)
	if q.add(int64(2*ms), 100*ms) || q.relieves(100*ms) {
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
	var p rampProof
	for range quickAnswers {
		if p.add(int64(12*ms), 9*ms) {
			t.Fatal("five answers of 12 ms proved against peers at 9 ms")
		}
	}
	if p.provesWarm(9.9*ms, true) {
		t.Error("proved warm with its slowest answer over 1.2 times the peers' 9.9 ms")
	}
	if !p.provesWarm(10*ms, true) {
		t.Error("five answers of 12 ms not proved warm against peers at 10 ms")
	}
	if p.provesWarm(23*ms, false) {
		t.Error("proved on the peers' wait alone by the quick proof; only relief (24 ms) may")
	}
	if !p.provesWarm(24*ms, false) {
		t.Error("not relieved on the peers' wait of twice its slowest answer")
	}
	var q rampProof
	for range proofAnswers {
		q.add(int64(3*ms), 1*ms)
	}
	q.add(int64(12*ms), 1*ms) // mean 4 ms, slowest 12
	if q.provesWarm(2.6*ms, true) {
		t.Error("a mean of 4 ms proved warm against peers at 2.6 ms")
	}
	if !q.provesWarm(2.7*ms, true) {
		t.Error("a mean of 4 ms not proved warm against peers at 2.7 ms (1.5 times: 4.05)")
	}
	var out rampProof
	out.started.Store(2)
	out.add(int64(2*ms), 1*ms)
	if out.provesWarm(4*ms, false) {
		t.Error("relieved with one of its two timed calls out")
	}
	out.settled.Add(1)
	if !out.provesWarm(4*ms, false) {
		t.Error("not relieved once both calls had their outcome")
	}
	p.spoiled.Store(true)
	if p.provesWarm(100*ms, true) {
		t.Error("a spoiled ramp proved warm")
	}
	var begun rampProof
	begun.answers.Store(quickAnswers)
	if begun.provesWarm(100*ms, true) {
		t.Error("proved warm with answers counted and no slowest")
	}
}

// TestJudgeAtPick: answers that fell short when they came are proved by a
// later pick, against the peers' average as it moved, or against their
// wait by relief once every timed call has its outcome; and the pick
// leaves the republish to the next Done.
func TestJudgeAtPick(t *testing.T) {
	ms := int64(time.Millisecond)
	ok := balancer.DoneInfo{BytesSent: true, BytesReceived: true}
	t.Run("average", func(t *testing.T) {
		d, e := rampingAt(time.Second.Nanoseconds()) // peers' average 2 ms
		now := time.Second.Nanoseconds()
		for range peerWarmup {
			d.peers.add(2*ms, now)
		}
		for range quickAnswers {
			e.rampProof.count(proofOwn)
			if d.answer(e, proofOwn, ok, 25*ms/10, now+10*ms) {
				t.Fatal("five answers of 2.5 ms proved against peers at 2 ms")
			}
		}
		if d.judge(e, now+20*ms) {
			t.Fatal("judged warm with the peers' average unmoved")
		}
		d.peers.add(4*ms, now+20*ms) // the average moves to 2.125 ms
		if !d.judge(e, now+21*ms) {
			t.Error("not judged warm once the peers' average was 2.125 ms (2.5 ms is under 1.2 times it)")
		}
		if !d.work.pickProved.Load() {
			t.Error("a ramp ended at a pick left no republish for the next Done")
		}
	})
	t.Run("wait", func(t *testing.T) {
		start := time.Second.Nanoseconds()
		d := &doneShared{}
		e := newEndpoint("x", d, false)
		e.rampProof.reset(start)
		d.peers.claim(start + 3*ms) // the peers' wait counts from here
		for range quickAnswers {
			e.rampProof.count(proofOwn)
			if d.answer(e, proofOwn, ok, 12*ms, start+12*ms) {
				t.Fatal("five answers of 12 ms proved against a wait of 9 ms")
			}
		}
		e.rampProof.count(proofOwn) // a sixth, still out
		if d.judge(e, start+20*ms) {
			t.Error("judged warm against a wait of 17 ms by the quick proof; only relief may")
		}
		if d.judge(e, start+30*ms) {
			t.Error("relieved at a wait of 27 ms with a timed call still out")
		}
		d.answer(e, proofOwn, balancer.DoneInfo{}, ms, start+30*ms) // it never reached the server
		if !d.judge(e, start+31*ms) {
			t.Error("not relieved at a wait of 28 ms, twice its slowest answer, with every call settled")
		}
	})
}

// TestRampProofOpening: the opening's calls are all timed, whatever
// proofGap says, and the calls after them one a proofGap; a new ramp
// opens again, a spoiled one times none.
func TestRampProofOpening(t *testing.T) {
	var p rampProof
	now := int64(time.Second)
	p.reset(now)
	for k := range quickAnswers {
		if !p.opening() || !p.claim(now) {
			t.Fatalf("opening call %d at the same instant not timed", k+1)
		}
	}
	if p.opening() || p.claim(now) || p.claim(now+proofGap/2) {
		t.Error("calls after the opening timed within proofGap of the last")
	}
	if !p.claim(now + proofGap) {
		t.Error("a call a proofGap after the opening's not timed")
	}
	p.reset(now + proofGap)
	if !p.opening() || !p.claim(now+proofGap) {
		t.Error("a new ramp does not open again")
	}
	p.spoiled.Store(true)
	if p.opening() || p.claim(now+10*proofGap) {
		t.Error("a spoiled ramp still opens or times calls")
	}
}

// TestRampSharesOpening: while its opening is under way, a ramping
// endpoint drawn by a client whose picks come fast takes up to
// quickAnswers picks ahead of its share, which it does not take again
// later; drawn by one whose picks come slowly, it takes nothing ahead.
func TestRampSharesOpening(t *testing.T) {
	ms := int64(time.Millisecond)
	s := newRampShares(9, 9, 2, false)
	// took counts the picks taken over draws draws, at elapsed(k)
	// nanoseconds into the ramp for the k-th, with an opening of its
	// first quickAnswers picks if opening.
	took := func(draws int, opening bool, elapsed func(k int) int64) int {
		c := &rampCount{}
		n := 0
		for k := range draws {
			if !s.drawnFull(c, 1, 0.1, true, opening && n < quickAnswers, elapsed(k)) {
				c.took.Add(1)
				n++
			}
		}
		return n
	}
	// 0.1 ms apart (taken as 1 ms, the least elapsed time drawnFull
	// counts): a pick earns 0.1/8.1 x 4.5 = 0.056 picks a draw, 5.6
	// in 100 ms at that pace.
	fast := func(k int) int64 { return int64(k+1) * ms / 10 }
	if got := took(5, true, fast); got != quickAnswers {
		t.Errorf("fast client, opening: took %d of its first 5 draws, want %d", got, quickAnswers)
	}
	if got := took(5, false, fast); got != 1 {
		t.Errorf("fast client, no opening: took %d of its first 5 draws, want 1 (its first share)", got)
	}
	// Over its first 1,000 draws it takes what its share gives, the
	// opening's included: 1,000 x 0.056 = 56, and a pick or so more.
	if got := took(1000, true, fast); got < 55 || got > 58 {
		t.Errorf("fast client, opening: took %d picks over 1,000 draws, want its share, about 56", got)
	}
	// One draw every 200 ms: 0.056 picks earned a draw, 0.028 in 100 ms.
	slow := func(k int) int64 { return int64(k+1) * 200 * ms }
	if got := took(5, true, slow); got != 1 {
		t.Errorf("slow client, opening: took %d of its first 5 draws, want 1 (its first share), nothing ahead", got)
	}
}

// TestPeerAverageWantsCalls: the peers' average asks for timed calls
// until peerBound are, and again once it starts over, when the next call
// is timed at once, whatever proofGap says.
func TestPeerAverageWantsCalls(t *testing.T) {
	var a peerAverage
	ms := int64(time.Millisecond)
	for k := range int64(peerBound) {
		if !a.wantsCalls() {
			t.Fatalf("no longer asks for calls after %d were timed", k)
		}
		a.claim(5*ms + k*proofGap)
	}
	if a.wantsCalls() {
		t.Errorf("still asks for calls after %d were timed", peerBound)
	}
	last := 5*ms + (peerBound-1)*proofGap
	a.restart(last + proofGap/2)
	if !a.wantsCalls() || !a.claim(last+proofGap/2) {
		t.Error("an average that started over does not ask for calls, or refuses one within proofGap of the last")
	}
}

// TestProofSampledSpreads: the weighted schedule's sample of peers'
// answers takes one position in 16, spread over a schedule's slots
// rather than every 16th of them, which in a cycle whose length is a
// multiple of 16 would always be the same slots.
func TestProofSampledSpreads(t *testing.T) {
	const cycle, rounds = 1024, 64
	var perSlot [cycle]int
	n := 0
	for pos := range uint32(cycle * rounds) {
		if proofSampled(pos) {
			perSlot[pos%cycle]++
			n++
		}
	}
	if share := float64(n) / (cycle * rounds); share < 0.055 || share > 0.07 {
		t.Errorf("sampled share %.4f, want about 1/16", share)
	}
	hit := 0
	for _, c := range perSlot {
		if c > 0 {
			hit++
		}
	}
	if hit < cycle*3/4 {
		t.Errorf("samples fell on %d of %d slots, want most of them", hit, cycle)
	}
}

// TestRampProofSpoiled: a ramping endpoint whose own timed call reached
// it and failed with a server-side status, timed out or was cancelled
// proves nothing for the rest of its ramp, however fast its other
// answers: a cold process's slow calls that time out would leave only its
// fast ones. A call that never reached it, or an application's error
// (NotFound), does not spoil it, nor does anything of the last ramp: a
// new ramp starts unspoiled, and a call timed before it began counts for
// nothing in it.
func TestRampProofSpoiled(t *testing.T) {
	sent := func(err error) balancer.DoneInfo { return balancer.DoneInfo{Err: err, BytesSent: true} }
	answered := balancer.DoneInfo{BytesSent: true, BytesReceived: true}
	for _, tc := range []struct {
		name    string
		info    balancer.DoneInfo
		spoiled bool
	}{
		{"deadline", sent(status.Error(codes.DeadlineExceeded, "")), true},
		{"cancelled", sent(status.Error(codes.Canceled, "")), true},
		{"unavailable", sent(status.Error(codes.Unavailable, "")), true},
		{"not found", sent(status.Error(codes.NotFound, "")), false},
		{"never sent", balancer.DoneInfo{Err: status.Error(codes.Unavailable, "")}, false},
		{"cancelled before it was sent", balancer.DoneInfo{Err: status.Error(codes.Canceled, "")}, false},
	} {
		var d doneShared
		d.peers.add(int64(2*time.Millisecond), int64(time.Second))
		e := newEndpoint("x", &d, false)
		d.answer(e, proofOwn, tc.info, int64(time.Second), int64(time.Second))
		proved := false
		for range quickAnswers {
			proved = d.answer(e, proofOwn, answered, int64(2*time.Millisecond), int64(time.Second)) || proved
		}
		if proved == tc.spoiled {
			t.Errorf("%s: five fast answers after it proved it warm: %v, want %v", tc.name, proved, !tc.spoiled)
		}
	}
}

// rampingAt is an endpoint whose ramp began at start, and its doneShared,
// whose peers' average is 2 ms.
func rampingAt(start int64) (*doneShared, *Endpoint) {
	d := &doneShared{}
	d.peers.add(int64(2*time.Millisecond), start)
	e := newEndpoint("x", d, false)
	e.rampProof.reset(start)
	return d, e
}

// TestRampProofPerRamp: a new ramp starts with nothing of the last one:
// not spoiled by its failure, and not spoiled by a failure of a call
// timed before it began.
func TestRampProofPerRamp(t *testing.T) {
	sec, ms := int64(time.Second), int64(time.Millisecond)
	d, e := rampingAt(sec)
	failed := balancer.DoneInfo{Err: status.Error(codes.Unavailable, ""), BytesSent: true}
	d.answer(e, proofOwn, failed, 10*ms, sec+20*ms)
	e.rampProof.reset(2 * sec)
	// The last ramp's call, timed at 1.99 s, ends at 2.01 s.
	d.answer(e, proofOwn, failed, 20*ms, 2*sec+10*ms)
	proved := false
	for range quickAnswers {
		proved = d.answer(e, proofOwn, balancer.DoneInfo{BytesSent: true, BytesReceived: true}, 2*ms, 2*sec+100*ms) || proved
	}
	if !proved {
		t.Error("five fast answers in a new ramp did not prove it: the last ramp's failures spoiled it")
	}
}

// TestRampProofIgnoresUnsent: a call that never reached the server ends
// with an empty DoneInfo (grpc's, for a pick whose connection was not
// ready): no answer, however fast, for the ramping endpoint or its peers.
func TestRampProofIgnoresUnsent(t *testing.T) {
	sec, ms := int64(time.Second), int64(time.Millisecond)
	d, e := rampingAt(sec)
	for range 2 * proofAnswers {
		if d.answer(e, proofOwn, balancer.DoneInfo{}, 1000, sec+ms) {
			t.Fatal("calls that never reached the server proved the endpoint warm")
		}
	}
	if n := e.rampProof.answers.Load(); n != 0 {
		t.Errorf("%d answers counted from calls that never reached the server, want 0", n)
	}
	d.answer(e, proofBaseline, balancer.DoneInfo{}, 1000, sec+ms)
	if got := d.peers.atLeast(sec + ms); got != float64(2*ms) {
		t.Errorf("peers' average after a peer call that never reached its server = %v, want %v", got, 2*ms)
	}
}
