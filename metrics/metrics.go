// Package metrics names the metrics that pickwise's policies record
// through grpc's metrics registry (google.golang.org/grpc/experimental/stats),
// and hands them to a metrics stack other than OpenTelemetry (Recorder).
//
// Like grpc's own load-balancing metrics, they are off until enabled by
// name in the stats plugin. With grpc's OpenTelemetry plugin:
//
//	import (
//		"google.golang.org/grpc/stats/opentelemetry"
//		"github.com/pickwise/pickwise/metrics"
//	)
//
//	opts := opentelemetry.Options{MetricsOptions: opentelemetry.MetricsOptions{
//		MeterProvider: provider,
//		Metrics:       opentelemetry.DefaultMetrics().Add(metrics.Names()...),
//	}}
//	conn, err := grpc.NewClient(target, opentelemetry.DialOption(opts), ...)
//
// Without OpenTelemetry, a Recorder passes every pickwise metric to a
// function, and its Collect takes the gauges, for example before each
// Prometheus scrape:
//
//	rec := metrics.NewRecorder(func(s metrics.Sample) { ... })
//	conn, err := grpc.NewClient(target, rec.DialOption(), ...)
//	...
//	rec.Collect() // the gauges reach the function now
//
// Every metric is named pickwise.<policy>.<metric> and carries the label
// grpc.target (the channel's target) and, where grpc knows it (under xDS),
// the optional label grpc.lb.locality, as grpc's weighted_round_robin does.
// Picks carry pickwise.reason, which says why the picker chose the
// endpoint.
//
// The gauges and the endpoint_cost samples are taken when the sink
// collects, through grpc's async reporter, which grpc's OpenTelemetry
// plugin runs only if at least one of the policy's gauges
// (endpoints_ready, endpoints_in_slow_start) is enabled (Names enables
// them all), and a Recorder at each Collect. Pick counts need no gauge: while calls flow they are recorded
// at least once a second.
package metrics

import (
	"github.com/pickwise/pickwise/internal/engine"
)

// Names returns the name of every pickwise metric registered in this
// program, sorted. A policy registers its metrics when its package is
// initialized, so call Names after the blank imports of the policies the
// program uses have run (any time in or after main).
//
// It leaves out the metrics labelled by endpoint (EndpointNames), whose
// series grow with the fleet.
func Names() []string { return engine.MetricNames() }

// EndpointNames returns the name of every pickwise metric labelled by
// endpoint (pickwise.endpoint, its address) registered in this program,
// sorted: each endpoint's picks, server-side failures, ejection, calls in
// flight and effective weight. They make one series per endpoint and
// channel; enable them where that is affordable, for a fleet of tens or
// hundreds of endpoints, or to find one misbehaving backend, and read the
// introspection page (package admin) otherwise.
func EndpointNames() []string { return engine.EndpointMetricNames() }
