package metrics_test

import (
	"fmt"
	"strings"

	_ "github.com/pickwise/pickwise/balancer/orcawrr"
	_ "github.com/pickwise/pickwise/balancer/p2c"
	_ "github.com/pickwise/pickwise/balancer/peakewma"
	_ "github.com/pickwise/pickwise/balancer/prequal"
	_ "github.com/pickwise/pickwise/balancer/ringhash"
	_ "github.com/pickwise/pickwise/balancer/shadow"
	_ "github.com/pickwise/pickwise/balancer/subset"
	"github.com/pickwise/pickwise/metrics"
)

// The metrics of the policies this program imports, which a stats plugin
// enables by name. With grpc's OpenTelemetry plugin
// (google.golang.org/grpc/stats/opentelemetry) and a MeterProvider, e.g.
// the Prometheus exporter's:
//
//	opts := opentelemetry.Options{MetricsOptions: opentelemetry.MetricsOptions{
//		MeterProvider: provider,
//		Metrics:       opentelemetry.DefaultMetrics().Add(metrics.Names()...),
//	}}
//	conn, err := grpc.NewClient(target, opentelemetry.DialOption(opts), ...)
//
// Or name only some of them, such as the picks and the ready endpoints:
// opentelemetry.DefaultMetrics().Add("pickwise.p2c.picks",
// "pickwise.p2c.endpoints_ready").
func ExampleNames() {
	for _, name := range metrics.Names() {
		fmt.Println(name)
	}
	// Output:
	// pickwise.orca_wrr.attempts_elsewhere
	// pickwise.orca_wrr.bad_reports
	// pickwise.orca_wrr.ejections
	// pickwise.orca_wrr.endpoint_weight
	// pickwise.orca_wrr.endpoint_weight_not_yet_usable
	// pickwise.orca_wrr.endpoint_weight_stale
	// pickwise.orca_wrr.endpoints_ejected
	// pickwise.orca_wrr.endpoints_in_slow_start
	// pickwise.orca_wrr.endpoints_ready
	// pickwise.orca_wrr.membership
	// pickwise.orca_wrr.picks
	// pickwise.orca_wrr.probe_picks
	// pickwise.orca_wrr.readmissions
	// pickwise.orca_wrr.retry_picks
	// pickwise.orca_wrr.rr_fallback
	// pickwise.p2c.attempts_elsewhere
	// pickwise.p2c.ejections
	// pickwise.p2c.endpoint_cost
	// pickwise.p2c.endpoints_ejected
	// pickwise.p2c.endpoints_in_slow_start
	// pickwise.p2c.endpoints_ready
	// pickwise.p2c.membership
	// pickwise.p2c.picks
	// pickwise.p2c.probe_picks
	// pickwise.p2c.readmissions
	// pickwise.p2c.retry_picks
	// pickwise.peak_ewma.attempts_elsewhere
	// pickwise.peak_ewma.ejections
	// pickwise.peak_ewma.endpoint_cost
	// pickwise.peak_ewma.endpoints_ejected
	// pickwise.peak_ewma.endpoints_in_slow_start
	// pickwise.peak_ewma.endpoints_ready
	// pickwise.peak_ewma.membership
	// pickwise.peak_ewma.picks
	// pickwise.peak_ewma.probe_picks
	// pickwise.peak_ewma.readmissions
	// pickwise.peak_ewma.retry_picks
	// pickwise.prequal.answer_age
	// pickwise.prequal.attempts_elsewhere
	// pickwise.prequal.ejections
	// pickwise.prequal.endpoint_cost
	// pickwise.prequal.endpoints_ejected
	// pickwise.prequal.endpoints_in_slow_start
	// pickwise.prequal.endpoints_ready
	// pickwise.prequal.load_probes
	// pickwise.prequal.membership
	// pickwise.prequal.picks
	// pickwise.prequal.pool_answers
	// pickwise.prequal.probe_picks
	// pickwise.prequal.readmissions
	// pickwise.prequal.retry_picks
	// pickwise.ring_hash.attempts_elsewhere
	// pickwise.ring_hash.ejections
	// pickwise.ring_hash.endpoint_cost
	// pickwise.ring_hash.endpoints_ejected
	// pickwise.ring_hash.endpoints_in_slow_start
	// pickwise.ring_hash.endpoints_ready
	// pickwise.ring_hash.membership
	// pickwise.ring_hash.picks
	// pickwise.ring_hash.probe_picks
	// pickwise.ring_hash.readmissions
	// pickwise.ring_hash.retry_picks
	// pickwise.shadow.call_duration
	// pickwise.shadow.calls
	// pickwise.shadow.endpoint_picks
	// pickwise.shadow.predictions
	// pickwise.subset.churn
	// pickwise.subset.endpoints
	// pickwise.subset.size
}

// The metrics labelled by endpoint, one series per endpoint and channel:
// enable them by name where the fleet is small enough, or while looking
// for one misbehaving backend.
func ExampleEndpointNames() {
	for _, name := range metrics.EndpointNames() {
		if strings.HasPrefix(name, "pickwise.p2c.") {
			fmt.Println(name)
		}
	}
	// Output:
	// pickwise.p2c.endpoint_effective_weight
	// pickwise.p2c.endpoint_ejected
	// pickwise.p2c.endpoint_failures
	// pickwise.p2c.endpoint_in_flight
	// pickwise.p2c.endpoint_picks
}
