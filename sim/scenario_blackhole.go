package sim

import (
	"time"

	"google.golang.org/grpc/codes"
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
	// Share is the broken backend's share of requests; ErrorRate is the
	// share of requests clients saw fail.
	Share, ErrorRate []float64
	Table            *Table
}

// BlackHole: 10 backends, 1,000 requests per second, 50 ms service; one
// backend fails every request in 1 ms. A balancer that compares in-flight
// counts sees the broken backend as the idlest: full-scan least connections
// sends it nearly everything, two random choices about 1-(9/10)^2 = 19%.
func BlackHole(scale Scale) (*BlackHoleResult, error) {
	const n = 10
	backends := make([]Backend, n)
	for i := range backends {
		backends[i] = Backend{Service: LogNormal(50*time.Millisecond, 0.2)}
	}
	backends[0] = Backend{Service: Const(50 * time.Millisecond), FailRate: 1, FailAfter: time.Millisecond, FailCode: codes.Unavailable}
	run := Run{Seed: 1, Backends: backends, Rate: 1000, Duration: 60 * time.Second}
	if scale == Reduced {
		run.Duration = 10 * time.Second
	}
	policies := loadAwarePolicies()
	results, err := runAll(run, policies)
	if err != nil {
		return nil, err
	}
	out := &BlackHoleResult{Policies: columns(policies)}
	t := &Table{Title: "Black hole: 10 backends, 1,000 rps, 50 ms service; backend-0 fails every request in 1 ms", Columns: out.Policies}
	share, errs := make([]string, len(results)), make([]string, len(results))
	for i, r := range results {
		out.Share = append(out.Share, r.Share(0))
		out.ErrorRate = append(out.ErrorRate, r.ErrorRate())
		share[i], errs[i] = Pct(r.Share(0)), Pct(r.ErrorRate())
	}
	t.AddRow("share to the broken backend (fair: 10%)", share...)
	t.AddRow("errors seen by clients", errs...)
	notes(t, policies)
	out.Table = t
	return out, nil
}
