package engine

import (
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/pickwise/pickwise/internal/evidence"
	"github.com/pickwise/pickwise/internal/ramp"
	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

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
		for range ramp.PeerWarmup {
			d.peers.Add(2*ms, now)
		}
		for range ramp.QuickAnswers {
			e.rampProof.Count(ramp.Own)
			if d.answer(e, ramp.Own, ok, 25*ms/10, now+10*ms) {
				t.Fatal("five answers of 2.5 ms proved against peers at 2 ms")
			}
		}
		if d.judge(e, now+20*ms) {
			t.Fatal("judged warm with the peers' average unmoved")
		}
		d.peers.Add(4*ms, now+20*ms) // the average moves to 2.125 ms
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
		e.rampProof.Reset(start)
		d.peers.Claim(start + 3*ms) // the peers' wait counts from here
		for range ramp.QuickAnswers {
			e.rampProof.Count(ramp.Own)
			if d.answer(e, ramp.Own, ok, 12*ms, start+12*ms) {
				t.Fatal("five answers of 12 ms proved against a wait of 9 ms")
			}
		}
		e.rampProof.Count(ramp.Own) // a sixth, still out
		if d.judge(e, start+20*ms) {
			t.Error("judged warm against a wait of 17 ms by the quick proof; only relief may")
		}
		if d.judge(e, start+30*ms) {
			t.Error("relieved at a wait of 27 ms with a timed call still out")
		}
		d.answer(e, ramp.Own, balancer.DoneInfo{}, ms, start+30*ms) // it never reached the server
		if !d.judge(e, start+31*ms) {
			t.Error("not relieved at a wait of 28 ms, twice its slowest answer, with every call settled")
		}
	})
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
		d.peers.Add(int64(2*time.Millisecond), int64(time.Second))
		e := newEndpoint("x", &d, false)
		d.answer(e, ramp.Own, tc.info, int64(time.Second), int64(time.Second))
		proved := false
		for range ramp.QuickAnswers {
			proved = d.answer(e, ramp.Own, answered, int64(2*time.Millisecond), int64(time.Second)) || proved
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
	d.peers.Add(int64(2*time.Millisecond), start)
	e := newEndpoint("x", d, false)
	e.rampProof.Reset(start)
	return d, e
}

// TestRampProofPerRamp: a new ramp starts with nothing of the last one:
// not spoiled by its failure, and not spoiled by a failure of a call
// timed before it began.
func TestRampProofPerRamp(t *testing.T) {
	sec, ms := int64(time.Second), int64(time.Millisecond)
	d, e := rampingAt(sec)
	failed := balancer.DoneInfo{Err: status.Error(codes.Unavailable, ""), BytesSent: true}
	d.answer(e, ramp.Own, failed, 10*ms, sec+20*ms)
	e.rampProof.Reset(2 * sec)
	// The last ramp's call, timed at 1.99 s, ends at 2.01 s.
	d.answer(e, ramp.Own, failed, 20*ms, 2*sec+10*ms)
	proved := false
	for range ramp.QuickAnswers {
		proved = d.answer(e, ramp.Own, balancer.DoneInfo{BytesSent: true, BytesReceived: true}, 2*ms, 2*sec+100*ms) || proved
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
	for range 2 * ramp.ProofAnswers {
		if d.answer(e, ramp.Own, balancer.DoneInfo{}, 1000, sec+ms) {
			t.Fatal("calls that never reached the server proved the endpoint warm")
		}
	}
	if n := e.rampProof.Answers(); n != 0 {
		t.Errorf("%d answers counted from calls that never reached the server, want 0", n)
	}
	d.answer(e, ramp.Baseline, balancer.DoneInfo{}, 1000, sec+ms)
	if got := d.peers.AtLeast(sec + ms); got != float64(2*ms) {
		t.Errorf("peers' average after a peer call that never reached its server = %v, want %v", got, 2*ms)
	}
}
