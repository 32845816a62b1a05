package peakewma_test

import (
	"slices"
	"testing"
	"time"

	"github.com/pickwise/pickwise/balancer/peakewma"
	"github.com/pickwise/pickwise/internal/testkit"
)

// TestMetricsCostsAndPicks checks that the endpoint_cost samples are the
// latency-based costs the picker compares, and that picks are counted.
func TestMetricsCostsAndPicks(t *testing.T) {
	h := testkit.NewHarness(t, peakewma.Name, `{"decayTime": "1s"}`)
	as := testkit.Addrs(4)
	h.Start(as...)
	backend := func(a string, _ time.Duration) (time.Duration, error) {
		if a == as[0] {
			return 200 * time.Millisecond, nil
		}
		return 20 * time.Millisecond, nil
	}
	got := run(h, 2, time.Second, backend)
	picks := h.PicksByReason("peak_ewma")
	if sum := picks["least_loaded"] + picks["tie"] + picks["avoided_failing"]; sum != 2000 {
		t.Errorf("picks by reason = %v, want 2000 in all", picks)
	}
	if picks["least_loaded"] < 1000 {
		t.Errorf("picks by reason = %v, want most by least_loaded once latencies are known", picks)
	}
	if got[as[0]] > 100 {
		t.Errorf("the slow endpoint got %d of 2000 calls", got[as[0]])
	}
	costs := h.Metrics.Values("pickwise.peak_ewma.endpoint_cost")
	if len(costs) != 4 {
		t.Fatalf("endpoint_cost samples = %v, want one per READY endpoint", costs)
	}
	slices.Sort(costs)
	// Idle now: each cost is the endpoint's latency average in ns; the
	// slow one's about 10x the others'.
	if costs[0] < float64(10*time.Millisecond) || costs[3] < 5*costs[0] {
		t.Errorf("endpoint costs %v: want latencies in ns, the slow endpoint's >= 5x the rest", costs)
	}
}
