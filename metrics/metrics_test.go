package metrics_test

import (
	"slices"
	"strings"
	"testing"

	_ "github.com/pickwise/pickwise/balancer/orcawrr"
	_ "github.com/pickwise/pickwise/balancer/p2c"
	_ "github.com/pickwise/pickwise/balancer/peakewma"
	_ "github.com/pickwise/pickwise/balancer/prequal"
	_ "github.com/pickwise/pickwise/balancer/ringhash"
	_ "github.com/pickwise/pickwise/balancer/shadow"
	_ "github.com/pickwise/pickwise/balancer/subset"
	"github.com/pickwise/pickwise/metrics"
	estats "google.golang.org/grpc/experimental/stats"
)

// TestNames checks that every policy's metrics are listed, registered
// with grpc under that name, off by default, and labelled as grpc labels
// its own load-balancing metrics.
func TestNames(t *testing.T) {
	names := metrics.Names()
	if !slices.IsSorted(names) {
		t.Errorf("Names() not sorted: %q", names)
	}
	want := []string{"pickwise.subset.size", "pickwise.subset.endpoints", "pickwise.subset.churn",
		"pickwise.shadow.predictions", "pickwise.shadow.endpoint_picks", "pickwise.shadow.calls", "pickwise.shadow.call_duration",
		"pickwise.orca_wrr.bad_reports", "pickwise.orca_wrr.endpoint_weight", "pickwise.orca_wrr.endpoint_weight_stale",
		"pickwise.orca_wrr.endpoint_weight_not_yet_usable", "pickwise.orca_wrr.rr_fallback",
		"pickwise.prequal.load_probes", "pickwise.prequal.pool_answers", "pickwise.prequal.answer_age"}
	for _, p := range []string{"p2c", "peak_ewma", "orca_wrr", "ring_hash", "prequal"} {
		want = append(want, "pickwise."+p+".picks", "pickwise."+p+".endpoints_ready", "pickwise."+p+".endpoints_in_slow_start",
			"pickwise."+p+".endpoints_ejected", "pickwise."+p+".ejections", "pickwise."+p+".readmissions",
			"pickwise."+p+".probe_picks", "pickwise."+p+".attempts_elsewhere", "pickwise."+p+".membership", "pickwise."+p+".retry_picks")
		if p != "orca_wrr" {
			want = append(want, "pickwise."+p+".endpoint_cost")
		}
	}
	slices.Sort(want)
	if !slices.Equal(names, want) {
		t.Errorf("Names() = %q\nwant %q", names, want)
	}
	for _, n := range names {
		d := estats.DescriptorForMetric(n)
		if d == nil {
			t.Errorf("%s is not in grpc's metrics registry", n)
			continue
		}
		if d.Default {
			t.Errorf("%s is on by default; grpc's load-balancing metrics are off until enabled", n)
		}
		if len(d.Labels) == 0 || d.Labels[0] != "grpc.target" || !slices.Equal(d.OptionalLabels, []string{"grpc.lb.locality"}) {
			t.Errorf("%s labels %q, optional %q: want grpc.target first and grpc.lb.locality optional", n, d.Labels, d.OptionalLabels)
		}
		if strings.HasSuffix(n, ".picks") && !slices.Contains(d.Labels, "pickwise.reason") {
			t.Errorf("%s has no pickwise.reason label", n)
		}
		if d.Description == "" || d.Unit == "" {
			t.Errorf("%s lacks a description or a unit", n)
		}
	}
}
