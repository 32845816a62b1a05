package sim

import (
	"testing"
	"time"
)

// TestScale runs the simulator at fleet scale: 10,000 backends and
// 1,000,000 requests with -sim.full, a tenth of each otherwise. It asserts
// what the run must show (every request placed, load spread by the real
// pickwise_p2c picker), and logs how long it took; speed is not asserted.
func TestScale(t *testing.T) {
	backends, requests := 1000, 100_000
	if *full {
		backends, requests = 10_000, 1_000_000
	}
	bs := make([]Backend, backends)
	for i := range bs {
		bs[i] = Backend{Servers: 4, Service: LogNormal(20*time.Millisecond, 0.5)}
	}
	// 40% utilization across the fleet.
	rate := 0.4 * float64(backends) * 4 / 0.020
	start := time.Now()
	r, err := Run{Seed: 11, Backends: bs, Rate: rate, Requests: requests}.Execute(Static("pickwise_p2c", "pickwise_p2c", `{}`))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d backends, %d requests: %v of wall time for %v of virtual time; p99 %v", backends, requests, time.Since(start).Round(time.Millisecond), r.End.Round(time.Millisecond), r.Quantile(0.99))
	if r.Total != requests || r.Failed != 0 {
		t.Fatalf("placed %d requests with %d failures, want %d and none", r.Total, r.Failed, requests)
	}
	maxPicks, mean := 0, float64(requests)/float64(backends)
	for _, n := range r.Picks {
		maxPicks = max(maxPicks, n)
	}
	// Picks follow load, which is spread evenly: no backend gets double.
	if float64(maxPicks) > 2*mean {
		t.Errorf("busiest backend got %d requests, mean %.0f", maxPicks, mean)
	}
}
