package sim

import (
	"math"
	"testing"
)

// TestRollout checks the rollout scenario: the shadow's predicted shares
// move the way pickwise_p2c's do when it is live, and land within 3
// points of them on every backend; the canary sends about 10% of calls
// through p2c, which, seeing live's load beside its own, places them no
// worse than live places its own and predicts under that load.
func TestRollout(t *testing.T) {
	scenarioTest(t, "rollout")
	r, err := Rollout(testScale())
	if err != nil {
		t.Fatal(err)
	}
	logTable(t, "rollout", r.Table)
	if len(r.Stages) != 5 {
		t.Fatalf("%d stages, want 5", len(r.Stages))
	}
	old := func(xs []float64) float64 {
		sum := 0.0
		for _, x := range xs[hwNew:] {
			sum += x
		}
		return sum / hwOld
	}
	rr, p2c := r.Stages[0], r.Stages[4]
	if math.Abs(old(rr.Placed)-1.0/12) > 0.005 {
		t.Errorf("round_robin: old-gen share %.4f, want 1/12", old(rr.Placed))
	}
	if old(p2c.Placed) > old(rr.Placed)-0.01 {
		t.Errorf("p2c live: old-gen share %.4f, want well below round_robin's %.4f", old(p2c.Placed), old(rr.Placed))
	}
	for _, st := range r.Stages[1:4] {
		if st.Predicted == nil || st.Summary == nil {
			t.Fatalf("%s: no prediction recorded", st.Name)
		}
		// A canary's predictions are made under live's load, which the
		// candidate then counts as its own: they say where it sends
		// calls now, not the shares it would give on its own.
		if e := maxShareError(st.Predicted, p2c.Placed); e > 0.03 && st.Summary.CanaryPercent == 0 {
			t.Errorf("%s: predicted shares off p2c's by up to %.1f points, want <= 3", st.Name, 100*e)
		}
		// Informative, not only close: the prediction moves load off the
		// old generation, as p2c does, while round_robin still places it
		// evenly. At a tenth of the picks the candidate's counts are
		// thinner, a quarter or more of its random candidates are still
		// busy, and its first candidates take turns, which see a slow
		// backend less than random ones do: it moves less.
		moves := 0.005
		if st.Name == "shadow, sampleRate 0.1" {
			moves = 0.0025
		}
		if old(st.Predicted) > old(st.Placed)-moves {
			t.Errorf("%s: predicted old-gen share %.4f, placed %.4f: the prediction does not see the slower backends", st.Name, old(st.Predicted), old(st.Placed))
		}
	}
	canary := r.Stages[3].Summary
	total := canary.CanaryArm.Calls + canary.CanaryFallbacks
	if all := r.Stages[3].Summary.CanaryArm.Calls + r.Stages[3].Summary.LiveArm.Calls; total == 0 || all == 0 {
		t.Fatalf("canary stage recorded no calls: %+v", canary)
	}
	if c, l := canary.CanaryArm.MeanLatency(), canary.LiveArm.MeanLatency(); c > l {
		t.Errorf("canary arm's mean latency %v above the live arm's %v: p2c placed its calls worse than round_robin", c, l)
	}
}
