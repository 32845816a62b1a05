package sim

import (
	"testing"
	"time"
)

func TestNoisyReports(t *testing.T) {
	scenarioTest(t, "noisy-reports")
	r, err := NoisyReports(testScale())
	if err != nil {
		t.Fatal(err)
	}
	logTable(t, "noisy-reports", r.Table)
	col := func(name string) int { return column(t, r.Policies, name) }
	raw, def, long, exact := col("pickwise_orca_wrr (raw)"), col("pickwise_orca_wrr"), col("pickwise_orca_wrr (10s)"), col("pickwise_orca_wrr, exact reports")

	// Raw weights pass the reports' noise, about 23% (the stddev of
	// U(-0.4, 0.4)), into the traffic; a 5 s half-life over 1 s updates
	// keeps about a quarter of it, 10 s less.
	if r.Spread[raw] < 0.10 {
		t.Errorf("raw: per-second share spread %.3f, want the noise to show (above 0.10)", r.Spread[raw])
	}
	if r.Spread[def] > r.Spread[raw]/2 {
		t.Errorf("per-second share spread: smoothed %.3f, raw %.3f; want smoothing to halve it at least", r.Spread[def], r.Spread[raw])
	}
	if r.Spread[long] > r.Spread[def]*1.1 {
		t.Errorf("per-second share spread: 10s half-life %.3f, 5s %.3f; want the longer half-life no worse", r.Spread[long], r.Spread[def])
	}
	// Exact reports leave only the arrivals' randomness.
	if r.Spread[exact] > 0.02 {
		t.Errorf("exact reports: per-second share spread %.3f, want below 0.02", r.Spread[exact])
	}
	if w, d := r.High[raw]-r.Low[raw], r.High[def]-r.Low[def]; d > w/2 {
		t.Errorf("backend-0's per-second share range: smoothed %.3f, raw %.3f; want smoothing to halve it at least", d, w)
	}
	// A raw weight that reads 40% high offers a backend at 80% more than
	// it can serve; smoothed weights never get that far off.
	if r.Overloaded[raw] < 0.02 || r.Overloaded[def] > 0.005 {
		t.Errorf("backend-seconds over capacity: raw %.3f, smoothed %.3f; want above 0.02 and at most 0.005", r.Overloaded[raw], r.Overloaded[def])
	}
	// The calls in flight take the worst of the raw weights' swings (a
	// p99 of 249 ms at the full scale when picks followed the weights
	// alone, 31 ms now), but smoothed weights still place better.
	if float64(r.P99[def]) > 0.8*float64(r.P99[raw]) {
		t.Errorf("p99: smoothed %v, raw %v; want smoothed at most 0.8x", r.P99[def], r.P99[raw])
	}
	// Noise multiplies every backend's weight alike on average, so it
	// moves load between seconds, not between generations: all columns
	// keep both generations near the even 80%.
	for j, p := range r.Policies {
		for gen, u := range map[string]float64{"new": r.NewUtil[j], "old": r.OldUtil[j]} {
			if u < 0.75 || u > 0.86 {
				t.Errorf("%s: %s-generation utilization %.3f, want about 0.80", p, gen, u)
			}
		}
	}
}

func TestNoisyReportsDeterministic(t *testing.T) {
	run := noisyRun(noisyNoise, 3*time.Second)
	run.WarmupRate = noisyRate / 10 // enough reports to leave blackout
	for _, p := range []Policy{
		GRPC("pickwise_orca_wrr (raw)", "pickwise_orca_wrr", `{"weightHalfLife":"0s"}`),
		GRPC("pickwise_orca_wrr", "pickwise_orca_wrr", `{}`),
	} {
		a, err := noisyMeasure(run, p)
		if err != nil {
			t.Fatal(err)
		}
		b, err := noisyMeasure(run, p)
		if err != nil {
			t.Fatal(err)
		}
		if a != b {
			t.Errorf("%s: two runs with the same seed differ:\n%+v\n%+v", p.Name, a, b)
		}
	}
}
