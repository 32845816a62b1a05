package subset

import (
	"net/url"
	"slices"
	"testing"

	"github.com/pickwise/pickwise/internal/testkit"
	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/resolver"
)

// TestMetrics checks the subset gauges and the churn count: a first
// subset is not churn; an update that swaps backends counts those that
// entered.
func TestMetrics(t *testing.T) {
	cc := testkit.NewClientConn()
	opts := balancer.BuildOptions{Target: resolver.Target{URL: url.URL{Scheme: "test", Path: "/subset"}}}
	b := newBalancer(cc, opts, 1)
	m := cc.Metrics
	gauges := func() (size, endpoints float64) {
		t.Helper()
		if err := m.Collect(); err != nil {
			t.Fatal(err)
		}
		size, _ = m.Last("pickwise.subset.size")
		endpoints, _ = m.Last("pickwise.subset.endpoints")
		return size, endpoints
	}

	addrs := testkit.Addrs(12)
	cfg := parse(t, childConfig(`"subsetSize": 4, "clientIndex": 1, "clientCount": 3, `))
	update(t, b, cfg, endpointsOf(addrs[:9]))
	if size, eps := gauges(); size != 4 || eps != 9 {
		t.Errorf("size, endpoints = %v, %v; want 4, 9", size, eps)
	}
	if l := m.Label("pickwise.subset.size"); l != "test:///subset" {
		t.Errorf("target label %q, want test:///subset", l)
	}
	if n := m.Total("pickwise.subset.churn"); n != 0 {
		t.Errorf("churn after the first subset = %v, want 0", n)
	}

	before := b.currentSubset()
	update(t, b, cfg, endpointsOf(addrs))
	entered := 0
	for _, id := range b.currentSubset() {
		if !slices.Contains(before, id) {
			entered++
		}
	}
	if entered == 0 {
		t.Fatal("the scale-out left the subset as it was; the test needs one that changes it")
	}
	if n := m.Total("pickwise.subset.churn"); n != float64(entered) {
		t.Errorf("churn after a scale-out = %v, want the %d endpoints that entered", n, entered)
	}
	if size, eps := gauges(); size != 4 || eps != 12 {
		t.Errorf("size, endpoints after the scale-out = %v, %v; want 4, 12", size, eps)
	}

	b.Close()
	if n := m.Reporters(); n != 0 {
		t.Errorf("%d metrics reporters registered after Close, want 0", n)
	}
}
