package engine

import (
	estats "google.golang.org/grpc/experimental/stats"
)

// The weight metrics, registered with grpc's metrics registry so that they
// reach grpc's OpenTelemetry plugin (and any other stats handler) like
// grpc's own weighted_round_robin metrics. Off unless enabled by name, as
// grpc's are. Every one carries the channel's target.
var (
	rrFallbackMetric = estats.RegisterInt64Count(estats.MetricDescriptor{
		Name:        "pickwise.lb.weights.rr_fallback",
		Description: "Weight updates in which fewer than two READY endpoints had a usable weight, so that every endpoint got an equal share.",
		Unit:        "{update}",
		Labels:      []string{"grpc.target"},
	})
	notYetUsableMetric = estats.RegisterInt64Count(estats.MetricDescriptor{
		Name:        "pickwise.lb.weights.endpoint_weight_not_yet_usable",
		Description: "READY endpoints, counted at each weight update, without a usable weight because they have not reported or are in their blackout period; they get the median weight.",
		Unit:        "{endpoint}",
		Labels:      []string{"grpc.target"},
	})
	staleMetric = estats.RegisterInt64Count(estats.MetricDescriptor{
		Name:        "pickwise.lb.weights.endpoint_weight_stale",
		Description: "READY endpoints, counted at each weight update, whose last report is older than the weight expiration period; they get the median weight.",
		Unit:        "{endpoint}",
		Labels:      []string{"grpc.target"},
	})
	endpointWeightMetric = estats.RegisterFloat64Histo(estats.MetricDescriptor{
		Name:        "pickwise.lb.weights.endpoint_weights",
		Description: "The usable weight of each READY endpoint at each weight update.",
		Unit:        "{weight}",
		Labels:      []string{"grpc.target"},
	})
	badReportsMetric = estats.RegisterInt64Count(estats.MetricDescriptor{
		Name:        "pickwise.lb.weights.bad_reports",
		Description: "ORCA load reports ignored as unusable: NaN, infinite or negative values, zero queries per second, or zero utilization under load.",
		Unit:        "{report}",
		Labels:      []string{"grpc.target"},
	})
)

// noMetrics is the recorder of a balancer built without one (tests, the
// simulator): it drops everything. Embedding the interface is what grpc
// asks of recorders, so that it can add methods; the ones it has are
// overridden here.
type noMetrics struct{ estats.MetricsRecorder }

func (noMetrics) RecordInt64Count(*estats.Int64CountHandle, int64, ...string)             {}
func (noMetrics) RecordFloat64Count(*estats.Float64CountHandle, float64, ...string)       {}
func (noMetrics) RecordInt64Histo(*estats.Int64HistoHandle, int64, ...string)             {}
func (noMetrics) RecordFloat64Histo(*estats.Float64HistoHandle, float64, ...string)       {}
func (noMetrics) RecordInt64Gauge(*estats.Int64GaugeHandle, int64, ...string)             {}
func (noMetrics) RecordInt64UpDownCount(*estats.Int64UpDownCountHandle, int64, ...string) {}
func (noMetrics) RegisterAsyncReporter(estats.AsyncMetricReporter, ...estats.AsyncMetric) func() {
	return func() {}
}
