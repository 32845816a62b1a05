package engine

import (
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

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
		r := newRamp(&SlowStartConfig{Window: Duration(10 * time.Second), Aggression: tc.aggression, MinWeightPercent: tc.minPct})
		if got := r.factor(int64(tc.elapsed)); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("aggression %v min %v%% at %v: factor %v, want %v", tc.aggression, tc.minPct, tc.elapsed, got, tc.want)
		}
	}
	if newRamp(nil) != nil {
		t.Error("newRamp(nil) is not nil")
	}
}

func TestPenaltyMultiplier(t *testing.T) {
	p := newPenalty(DefaultFailurePenalty())
	for _, tc := range []struct{ f, want float64 }{
		{0, 1},
		{0.1, 1 / 0.81},
		{0.5, 4},
		{0.9, 100},
		{0.95, 100},
		{1, 100},
	} {
		if got := p.multiplier(tc.f); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("multiplier(%v) = %v, want %v", tc.f, got, tc.want)
		}
	}
	if newPenalty(FailurePenaltyConfig{Enabled: false}) != nil {
		t.Error("a disabled penalty is not nil")
	}
}

func TestFailureAverage(t *testing.T) {
	e := newEndpoint("a", nil, false)
	alpha := 0.1
	for i := 1; i <= 22; i++ {
		e.recordOutcome(true, alpha)
		if want := 1 - math.Pow(0.9, float64(i)); math.Abs(e.FailureRatio()-want) > 1e-9 {
			t.Fatalf("after %d failures f = %v, want %v", i, e.FailureRatio(), want)
		}
	}
	if m := newPenalty(DefaultFailurePenalty()).multiplier(e.FailureRatio()); m != DefaultFailureMaxMultiplier {
		t.Errorf("22 consecutive failures give a penalty of %v, want the maximum %v", m, DefaultFailureMaxMultiplier)
	}
	for i := 0; i < 100 && e.FailureRatio() > 0; i++ {
		e.recordOutcome(false, alpha)
	}
	if e.FailureRatio() != 0 {
		t.Errorf("f = %v after 100 successes, want it snapped to 0", e.FailureRatio())
	}
	e.recordOutcome(false, alpha)
	if e.FailureRatio() != 0 {
		t.Error("a success on a clean endpoint changed its failure average")
	}
}

func TestIsServerFailure(t *testing.T) {
	server := []codes.Code{codes.Unavailable, codes.Internal, codes.Unknown, codes.DeadlineExceeded, codes.ResourceExhausted}
	client := []codes.Code{codes.OK, codes.Canceled, codes.InvalidArgument, codes.NotFound, codes.AlreadyExists,
		codes.PermissionDenied, codes.FailedPrecondition, codes.Aborted, codes.OutOfRange, codes.Unimplemented, codes.Unauthenticated}
	for _, c := range server {
		if !IsServerFailure(status.Error(c, "x")) {
			t.Errorf("%v is not counted as a server failure", c)
		}
	}
	for _, c := range client {
		if IsServerFailure(status.Error(c, "x")) {
			t.Errorf("%v is counted as a server failure", c)
		}
	}
	if IsServerFailure(nil) {
		t.Error("nil is a server failure")
	}
	// A non-status error is Unknown to grpc: the transport failed somehow.
	if !IsServerFailure(errors.New("transport closed")) {
		t.Error("a plain error is not a server failure")
	}
	if !IsServerFailure(fmt.Errorf("wrapped: %w", status.Error(codes.Unavailable, "x"))) {
		t.Error("a wrapped Unavailable is not a server failure")
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
