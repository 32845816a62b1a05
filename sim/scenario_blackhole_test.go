package sim

import (
	"slices"
	"testing"
	"time"
)

func TestBlackHole(t *testing.T) {
	scenarioTest(t, "black-hole")
	r, err := BlackHole(testScale())
	if err != nil {
		t.Fatal(err)
	}
	logTable(t, "black-hole", r.Table)
	share := map[string]float64{}
	for i, p := range r.Policies {
		share[p] = r.Share[i]
		if d := r.ErrorRate[i] - r.Share[i]; d > 0.005 || d < -0.005 {
			t.Errorf("%s: error rate %.3f differs from the broken backend's share %.3f; only it fails", p, r.ErrorRate[i], r.Share[i])
		}
	}
	// Placement that ignores load gives the broken backend its fair share.
	for _, p := range []string{"random", "round_robin"} {
		if s := share[p]; s < 0.08 || s > 0.12 {
			t.Errorf("%s: broken backend share %.3f, want about 0.10", p, s)
		}
	}
	// Two random choices: about 1-(9/10)^2 = 19%.
	if s := share["least_request"]; s < 0.16 || s > 0.22 {
		t.Errorf("least_request: broken backend share %.3f, want about 0.19", s)
	}
	// A full scan finds the always-idle broken backend almost every time.
	if s := share["least-conn (full scan)"]; s < 0.5 {
		t.Errorf("least-conn: broken backend share %.3f, want above 0.5", s)
	}
	if s := share["pickwise_p2c"]; s > 0.02 {
		t.Errorf("pickwise_p2c: broken backend share %.3f, want at most 0.02", s)
	}
	// Peak EWMA records each failure as a sample slower than any success
	// and applies the failure penalty on top: a 1 ms failure never looks
	// fast.
	if s, ok := share["pickwise_peak_ewma"]; !ok {
		t.Errorf("no pickwise_peak_ewma column in %q", r.Policies)
	} else if s >= 0.02 {
		t.Errorf("pickwise_peak_ewma: broken backend share %.3f, want below 0.02", s)
	}

	// ORCA with the default failure penalty: the failures the client sees
	// put the broken backend at the scheduler's floor at once.
	orca := column(t, r.Policies, "pickwise_orca_wrr")
	if s := r.Share[orca]; s >= 0.01 {
		t.Errorf("pickwise_orca_wrr: broken backend share %.4f, want below 0.01", s)
	}
	// Reports alone: the broken backend reports eps = qps, which the error
	// penalty charges as 100% utilization, so its weight is about its own
	// qps, half a healthy backend's at first and less as its share shrinks.
	reports, raw := column(t, r.Policies, "pickwise_orca_wrr (reports only)"), column(t, r.Policies, "pickwise_orca_wrr (raw, reports only)")
	if s := r.Share[reports]; s >= 0.05 {
		t.Errorf("pickwise_orca_wrr (reports only): broken backend share %.3f, want below half the fair 0.10", s)
	}
	// The share keeps falling: the run's end sees less of it than the run.
	if r.TailShare[reports] >= r.Share[reports] {
		t.Errorf("pickwise_orca_wrr (reports only): broken backend share %.4f in the last 10 s, %.4f overall; want it falling", r.TailShare[reports], r.Share[reports])
	}
	// Raw weights run the loop without averaging: at the scheduler's floor
	// within seconds, where the smoothed weights take about a minute.
	if s := r.Share[raw]; s >= 0.01 || s >= r.Share[reports] {
		t.Errorf("pickwise_orca_wrr (raw, reports only): broken backend share %.4f, want below 0.01 and below the smoothed %.4f", s, r.Share[reports])
	}
}

func TestBlackHoleDeterministic(t *testing.T) {
	t.Parallel()
	// grpc-go's own columns draw from the global source; these do not.
	run := bhRun(3 * time.Second)
	for _, p := range []Policy{
		Random(), LeastConnections(),
		GRPC("pickwise_p2c", "pickwise_p2c", `{}`),
		GRPC("pickwise_peak_ewma", "pickwise_peak_ewma", `{}`),
		GRPC("pickwise_orca_wrr", "pickwise_orca_wrr", `{}`),
	} {
		a, err := run.Execute(p)
		if err != nil {
			t.Fatal(err)
		}
		b, err := run.Execute(p)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(a.Picks, b.Picks) || a.Failed != b.Failed {
			t.Errorf("%s: two runs with the same seed placed %v (%d failed) and %v (%d failed)", p.Name, a.Picks, a.Failed, b.Picks, b.Failed)
		}
	}
}
