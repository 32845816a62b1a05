package evidence

import (
	"testing"

	"github.com/pickwise/pickwise/lbconfig"
)

func TestHealthyBitsIsHealthyPacked(t *testing.T) {
	if got := Healthy.Pack(); got != HealthyBits {
		t.Fatalf("Healthy.Pack() = %#x, HealthyBits = %#x", got, uint64(HealthyBits))
	}
}

// penalty is the default failure penalty's parameters, as the engine
// derives them: what each outcome keeps of the older ones, the count a
// full window stands for, and the cap on avoidance.
func penalty() (keep, full float32, maxAvoid float64) {
	c := lbconfig.DefaultFailurePenalty()
	return 1 - 1/float32(c.Window), 0.95 * float32(c.Window), 1 - 1/c.MaxMultiplier
}

// steady returns the counts of an endpoint that has answered many calls,
// all successfully, then the given outcomes in order.
func steady(then ...bool) Counts {
	keep, full, _ := penalty()
	var o Counts
	for o.Total < full {
		o = o.Step(false, keep)
	}
	for _, failed := range then {
		o = o.Step(failed, keep)
	}
	return o
}

func repeat(failed bool, n int) []bool {
	out := make([]bool, n)
	for i := range out {
		out[i] = failed
	}
	return out
}

func TestAvoidanceNeedsEvidence(t *testing.T) {
	keep, _, maxAvoid := penalty()
	for _, tc := range []struct {
		what     string
		o        Counts
		fleet    float64
		min, max float64
	}{
		{"no failure", steady(), 0, 0, 0},
		{"one failure after many successes", steady(true), 0, 0.1, 0.2},
		{"one failure, the fleet failing alike", steady(true), 0.1, 0, 0.1},
		{"one failure and nothing else", Counts{}.Step(true, keep), 0, 0.4, 0.6},
		{"ten failures in a row", steady(repeat(true, 10)...), 0, 0.75, 0.85},
		{"a black hole", steady(repeat(true, 200)...), 0, 0.96, 0.99},
		{"a black hole among ten", steady(repeat(true, 200)...), 0.1, 0.96, 0.99},
		{"every endpoint a black hole", steady(repeat(true, 200)...), 1, 0, 0},
	} {
		if q := Avoidance(tc.o, tc.fleet, maxAvoid); q < tc.min || q > tc.max {
			t.Errorf("%s (failures %.2f of %.2f, fleet %.2f): avoidance %.3f, want [%.2f, %.2f]", tc.what, tc.o.Failures, tc.o.Total, tc.fleet, q, tc.min, tc.max)
		}
	}
	if q := Avoidance(Counts{Failures: 1e6, Total: 1e6}, 0, maxAvoid); q != maxAvoid {
		t.Errorf("avoidance of a certain failure = %v, want the cap %v", q, maxAvoid)
	}
}

// TestPackRoundTrips: counts come back from their word as they went in,
// and Counted gives Healthy's stand-in total the full count.
func TestPackRoundTrips(t *testing.T) {
	for _, c := range []Counts{{}, {Failures: 1, Total: 10}, {Failures: 0.05, Total: 9.5}, Healthy} {
		if got := Unpack(c.Pack()); got != c {
			t.Errorf("Unpack(%+v.Pack()) = %+v", c, got)
		}
	}
	if got := Healthy.Counted(9.5); got != (Counts{Total: 9.5}) {
		t.Errorf("Healthy.Counted(9.5) = %+v, want a total of 9.5", got)
	}
}
