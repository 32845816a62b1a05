package orcawrr_test

import (
	"testing"
	"time"

	v3orcapb "github.com/cncf/xds/go/xds/data/orca/v3"
	"github.com/pickwise/pickwise/balancer/orcawrr"
	"github.com/pickwise/pickwise/internal/testkit"
)

func TestMetricsPicksWeightedOrFallback(t *testing.T) {
	h := testkit.NewHarness(t, orcawrr.Name, `{"blackoutPeriod": "0s"}`)
	as := testkit.Addrs(3)
	h.Start(as...)
	// No reports yet: round robin.
	serve(h, 90, time.Second, nil)
	got := h.PicksByReason("orca_wrr")
	if got["round_robin_fallback"] != 90 || got["weighted"] != 0 {
		t.Fatalf("picks by reason before any report = %v, want 90 round_robin_fallback", got)
	}
	reports := map[string]*v3orcapb.OrcaLoadReport{
		as[0]: report(100, 0.1, 0), as[1]: report(100, 0.2, 0), as[2]: report(100, 0.4, 0),
	}
	serve(h, 70, time.Second, reports) // answered after the update above: weights from the next
	serve(h, 700, time.Second, reports)
	got = h.PicksByReason("orca_wrr")
	if got["weighted"] < 700 {
		t.Errorf("picks by reason with every endpoint reporting = %v, want at least 700 weighted", got)
	}
	if got["weighted"]+got["round_robin_fallback"] != 860 {
		t.Errorf("picks counted %v, want 860", got)
	}
	ws := h.Metrics.Values("pickwise.orca_wrr.endpoint_weight")
	if len(ws) < 3 {
		t.Fatalf("endpoint_weight recorded %d times, want one per endpoint per update", len(ws))
	}
	// The last update's weights, 4:2:1 as the utilizations say.
	last := ws[len(ws)-3:]
	lo, hi := min(last[0], last[1], last[2]), max(last[0], last[1], last[2])
	if r := hi / lo; r < 3.5 || r > 4.5 {
		t.Errorf("endpoint weights %v: highest/lowest = %.2f, want 4", last, r)
	}
	if v, ok := h.Metrics.Last("pickwise.orca_wrr.endpoints_ready"); !ok || v != 3 {
		t.Errorf("endpoints_ready = %v (recorded %v), want 3", v, ok)
	}
	// orca_wrr reports weights, not costs.
	if n := len(h.Metrics.Values("pickwise.orca_wrr.endpoint_cost")); n != 0 {
		t.Errorf("endpoint_cost recorded %d times by a policy without costs", n)
	}
}
