package subset

import (
	"sync/atomic"

	"github.com/pickwise/pickwise/internal/engine"
	estats "google.golang.org/grpc/experimental/stats"
)

// The metrics of pickwise_subset (pickwise.subset.*; see the metrics
// package). They carry the channel's target and, optionally, the xDS
// locality, like every pickwise metric.
var (
	sizeMetric = estats.RegisterInt64AsyncGauge(engine.RegisterMetricName(estats.MetricDescriptor{
		Name:           "pickwise.subset.size",
		Description:    "Endpoints in this client's subset, handed to the child policy.",
		Unit:           "{endpoint}",
		Labels:         []string{"grpc.target"},
		OptionalLabels: []string{"grpc.lb.locality"},
	}))
	endpointsMetric = estats.RegisterInt64AsyncGauge(engine.RegisterMetricName(estats.MetricDescriptor{
		Name:           "pickwise.subset.endpoints",
		Description:    "Distinct endpoints the resolver gave, which the subset is chosen from.",
		Unit:           "{endpoint}",
		Labels:         []string{"grpc.target"},
		OptionalLabels: []string{"grpc.lb.locality"},
	}))
	churnMetric = estats.RegisterInt64Count(engine.RegisterMetricName(estats.MetricDescriptor{
		Name:           "pickwise.subset.churn",
		Description:    "Endpoints that entered this client's subset when the endpoint list or the config changed: each is a new connection, and one of the old subset's lost.",
		Unit:           "{endpoint}",
		Labels:         []string{"grpc.target"},
		OptionalLabels: []string{"grpc.lb.locality"},
	}))
)

// subsetGauges are what the async reporter reads; atomic, because grpc
// calls the reporter from the metrics sink's goroutine.
type subsetGauges struct {
	size, endpoints atomic.Int64
	locality        atomic.Pointer[string]
}

// report implements estats.AsyncMetricReporter.
func (b *subsetBalancer) report(r estats.AsyncMetricsRecorder) error {
	loc := b.locality()
	sizeMetric.Record(r, b.gauges.size.Load(), b.target, loc)
	endpointsMetric.Record(r, b.gauges.endpoints.Load(), b.target, loc)
	return nil
}

func (b *subsetBalancer) locality() string {
	if p := b.gauges.locality.Load(); p != nil {
		return *p
	}
	return ""
}
