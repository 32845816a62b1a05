package sim

import (
	"math"
	"testing"
	"time"
)

func TestHardwareGenerations(t *testing.T) {
	scenarioTest(t, "hardware-generations")
	r, err := HardwareGenerations(testScale())
	if err != nil {
		t.Fatal(err)
	}
	logTable(t, "hardware-generations", r.Table)
	col := func(name string) int { return column(t, r.Policies, name) }
	rr, p2c, weighted := col("round_robin"), col("pickwise_p2c"), col("pickwise_p2c (weights)")
	if len(r.Runs) != 2 || r.Runs[0].Clients != 1 || r.Runs[1].Clients != 20 {
		t.Fatalf("runs for %d balancer counts, want 1 and 20", len(r.Runs))
	}
	one, many := r.Runs[0], r.Runs[1]
	for _, run := range r.Runs {
		// Round robin: 750 rps on 600 of capacity, 125%.
		if o := run.OldOffered[rr]; o < 1.15 {
			t.Errorf("%d balancers: round_robin old-generation offered load %.3f, want at least 1.15", run.Clients, o)
		}
		if u := run.NewUtil[rr]; u < 0.70 || u > 0.80 {
			t.Errorf("%d balancers: round_robin new-generation utilization %.3f, want about 0.75", run.Clients, u)
		}
	}
	if o := one.OldOffered[weighted]; o > 1.0 {
		t.Errorf("pickwise_p2c (weights), 1 balancer: old-generation offered load %.3f, want at most 1", o)
	}
	if o := one.OldOffered[p2c]; o > 1.0 {
		t.Errorf("pickwise_p2c, 1 balancer: old-generation offered load %.3f, want at most 1", o)
	}
	// Round robin's old-generation queues grow for the whole run; with one
	// balancer pickwise_p2c keeps every queue short.
	if one.P99[p2c]*5 > one.P99[rr] {
		t.Errorf("1 balancer: p99 pickwise_p2c %v, round_robin %v; want pickwise_p2c at least 5x lower", one.P99[p2c], one.P99[rr])
	}
	// Thin local signal: with 20 balancers each sees a twentieth of the
	// in-flight requests and the unweighted policy lets noticeably more
	// load through to the old generation than it does alone.
	if many.InFlight[p2c]*10 > one.InFlight[p2c] {
		t.Errorf("pickwise_p2c: in flight per backend per balancer %.2f with 20 balancers, %.2f with 1; want 10x thinner", many.InFlight[p2c], one.InFlight[p2c])
	}
	if many.OldOffered[p2c] < one.OldOffered[p2c]+0.05 {
		t.Errorf("pickwise_p2c: old-generation offered load %.3f with 20 balancers, %.3f with 1; want the thin signal to show", many.OldOffered[p2c], one.OldOffered[p2c])
	}

	// Backend-reported load is a global signal: every balancer reads each
	// backend's own qps and utilization, which do not thin out with the
	// number of balancers, and qps / utilization is the backend's
	// capacity. Both generations land within a few points of the even
	// 83%, with 1 balancer and with 20.
	orca := col("pickwise_orca_wrr")
	const even = hwRate / (hwNew*1000.0 + hwOld*600.0)
	for _, run := range r.Runs {
		for gen, u := range map[string]float64{"new": run.NewUtil[orca], "old": run.OldUtil[orca]} {
			if d := u - even; d < -0.03 || d > 0.03 {
				t.Errorf("pickwise_orca_wrr, %d balancers: %s-generation utilization %.3f, want %.3f within 0.03", run.Clients, gen, u, even)
			}
		}
		// No queue builds: p99 stays within a few service times.
		if run.P99[orca] > 50*time.Millisecond {
			t.Errorf("pickwise_orca_wrr, %d balancers: p99 %v, want at most 50ms", run.Clients, run.P99[orca])
		}
	}
	// With 20 balancers it keeps the old generation nearer even than
	// pickwise_p2c, whose local counts thin out.
	if d, dp := math.Abs(many.OldUtil[orca]-even), math.Abs(many.OldUtil[p2c]-even); d >= dp {
		t.Errorf("20 balancers: old-generation utilization off even by %.3f for pickwise_orca_wrr, %.3f for pickwise_p2c; want pickwise_orca_wrr closer", d, dp)
	}
}

func TestHardwareGenerationsDeterministic(t *testing.T) {
	t.Parallel()
	// grpc-go's own columns draw from the global source; these do not.
	for _, p := range []Policy{Random(), LeastConnections(), GRPC("pickwise_p2c", "pickwise_p2c", `{}`), GRPC("pickwise_peak_ewma", "pickwise_peak_ewma", `{}`), GRPC("pickwise_orca_wrr", "pickwise_orca_wrr", `{}`), Oracle()} {
		for _, clients := range []int{1, 20} {
			// The warm-up is kept, so that pickwise_orca_wrr's weights are
			// in use when the run is measured, at a lower rate to keep the
			// test short: a few reports a second per balancer and backend
			// are enough to leave blackout.
			run := hwRun(true, clients, time.Second)
			run.WarmupRate = hwRate / 20
			a, err := hwMeasure(run, p)
			if err != nil {
				t.Fatal(err)
			}
			b, err := hwMeasure(run, p)
			if err != nil {
				t.Fatal(err)
			}
			if a != b {
				t.Errorf("%s, %d balancers: two runs with the same seed differ:\n%+v\n%+v", p.Name, clients, a, b)
			}
		}
	}
}
