package sim

import (
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
)

// Black-hole parameters for load reports.
const (
	// bhCores makes a healthy backend, 100 rps x 50 ms = 5 requests in
	// service, report about 50% utilization.
	bhCores = 10
	// bhWarmup lets pickwise_orca_wrr pass its 10 s blackout before the
	// run is measured.
	bhWarmup = 15 * time.Second
	// bhTail is the end of the run whose share shows where a policy
	// settles.
	bhTail = 10 * time.Second
)

func init() {
	register(Scenario{Name: "black-hole", Run: func(s Scale) (*Table, error) {
		r, err := BlackHole(s)
		if err != nil {
			return nil, err
		}
		return r.Table, nil
	}})
}

// BlackHoleResult holds the black-hole scenario's numbers per policy, in
// column order.
type BlackHoleResult struct {
	Policies []string
	// Share is the broken backend's share of requests, TailShare its share
	// of those placed in the run's last 10 s; ErrorRate is the share of
	// requests clients saw fail.
	Share, TailShare, ErrorRate []float64
	Table                       *Table
}

// BlackHole: 10 backends, 1,000 requests per second, 50 ms service; one
// backend fails every request in 1 ms. A balancer that compares in-flight
// counts sees the broken backend as the idlest: full-scan least connections
// sends it nearly everything, two random choices about 1-(9/10)^2 = 19%.
//
// Backends report their load through ORCA as 10-core machines (a healthy
// one, about 5 requests in service, is about 50% busy); the broken one
// reports its qps, as many errors per second, and almost no busy time.
// pickwise_orca_wrr's weight, qps / (utilization + eps/qps * penalty),
// charges its 100% error rate as 100% utilization. Every run is measured
// after a 15 s warm-up, so that it is past its 10 s blackout.
func BlackHole(scale Scale) (*BlackHoleResult, error) {
	measured := 60 * time.Second
	if scale == Reduced {
		measured = 20 * time.Second
	}
	run := bhRun(measured)
	policies := append(loadAwarePolicies(),
		GRPC("pickwise_orca_wrr (reports only)", "pickwise_orca_wrr", `{"failurePenalty":{"enabled":false}}`),
		GRPC("pickwise_orca_wrr (raw, reports only)", "pickwise_orca_wrr", `{"weightHalfLife":"0s","failurePenalty":{"enabled":false}}`))
	out := &BlackHoleResult{Policies: columns(policies)}
	// The last bhTail of arrivals show where a policy settles.
	tailFrom := run.Duration - bhTail
	for _, p := range policies {
		var tail, tailBroken int
		r := run
		r.OnPick = func(now time.Duration, _ *Request, backend int, _ time.Duration) {
			if now >= tailFrom {
				tail++
				if backend == 0 {
					tailBroken++
				}
			}
		}
		res, err := r.Execute(p)
		if err != nil {
			return nil, err
		}
		out.Share = append(out.Share, res.Share(0))
		out.TailShare = append(out.TailShare, float64(tailBroken)/float64(max(tail, 1)))
		out.ErrorRate = append(out.ErrorRate, res.ErrorRate())
	}
	t := &Table{Title: fmt.Sprintf("Black hole: 10 backends, 1,000 rps, 50 ms service; backend-0 fails every request in 1 ms; %.0f s measured after %.0f s of warm-up",
		(run.Duration - run.Warmup).Seconds(), run.Warmup.Seconds()), Columns: out.Policies}
	share, tail, errs := make([]string, len(policies)), make([]string, len(policies)), make([]string, len(policies))
	for i := range policies {
		share[i], tail[i], errs[i] = Pct(out.Share[i]), Pct(out.TailShare[i]), Pct(out.ErrorRate[i])
	}
	t.AddRow("share to the broken backend (fair: 10%)", share...)
	t.AddRow(fmt.Sprintf("share to the broken backend, last %.0f s", bhTail.Seconds()), tail...)
	t.AddRow("errors seen by clients", errs...)
	t.AddNote("measured after a 15 s warm-up at the same load, which pickwise_orca_wrr needs to leave its 10 s blackout (it places as round robin until then); the other columns are as without it")
	t.AddNote("pickwise_orca_wrr: its default failure penalty divides the broken backend's weight by up to 100 from the failures the client itself sees, within a few weight updates of the first ones: the scheduler's floor of one slot in about 1,000 (0.1%) as soon as its weight is used")
	t.AddNote("pickwise_orca_wrr (reports only): failurePenalty off, the reports alone. Backends report ORCA load as 10-core machines, so a healthy one reports about 100 qps at 50% utilization, weight about 200. The broken one reports eps = qps and almost no busy time; errorUtilizationPenalty 1 charges its 100% error rate as 100% utilization, so its weight is about its own qps: half a healthy one's at first (a 5% share), then less as its share, and with it its qps, shrinks. That loop runs through the smoothed qps: with the default 5 s half-life the share halves about every 12 s, from 5% when its weight is first used to 0.3% a minute later, on its way to the floor")
	t.AddNote(`pickwise_orca_wrr (raw, reports only): also weightHalfLife "0s", each update's reports alone, as grpc-go's weighted_round_robin weighs them: the same loop without the averaging, at the floor within about 15 s. Smoothing, which keeps noise out of the weights (noisy-reports), also slows this loop; the failure penalty does not wait for it`)
	notes(t, policies)
	addWallClockColumn(t)
	out.Table = t
	return out, nil
}

// bhRun is the scenario's run, measured for measured after the warm-up.
func bhRun(measured time.Duration) Run {
	const n = 10
	backends := make([]Backend, n)
	for i := range backends {
		backends[i] = Backend{Service: LogNormal(50*time.Millisecond, 0.2), Cores: bhCores}
	}
	backends[0] = Backend{Service: Const(50 * time.Millisecond), FailRate: 1, FailAfter: time.Millisecond, FailCode: codes.Unavailable, Cores: bhCores}
	return Run{Seed: 1, Backends: backends, Rate: 1000, Warmup: bhWarmup, Duration: bhWarmup + measured}
}
