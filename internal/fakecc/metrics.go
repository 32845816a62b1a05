package fakecc

import (
	"context"
	"fmt"
	"slices"
	"sync"

	estats "google.golang.org/grpc/experimental/stats"
	"google.golang.org/grpc/stats"
)

// Metrics is a metrics recorder for tests: it keeps every value recorded
// per metric name, in order, with its labels by name. It checks what grpc's
// own recorders assume: one value per label and optional label of the
// metric's descriptor, in order. It also plays the part of a metrics sink
// that collects: Collect runs every registered async reporter. Safe for
// concurrent use. (The simulator sets ClientConn.Metrics to nil: a run's
// metrics would only pile up in memory.)
type Metrics struct {
	// Embedded as grpc requires of recorders, so that it can add methods;
	// every method it has today is implemented below.
	estats.MetricsRecorder

	// Discard, set before use, makes the recorder keep nothing and check
	// nothing: for benchmarks whose balancers require a recorder (grpc's
	// weighted_round_robin does) but whose cost must not be the
	// recorder's.
	Discard bool

	mu        sync.Mutex
	records   map[string][]Record
	reporters map[int]estats.AsyncMetricReporter
	nextID    int
}

// Record is one recorded value and its labels.
type Record struct {
	Value  float64
	Labels map[string]string
}

// NewMetrics returns an empty recorder.
func NewMetrics() *Metrics {
	return &Metrics{records: map[string][]Record{}, reporters: map[int]estats.AsyncMetricReporter{}}
}

func (m *Metrics) record(d *estats.MetricDescriptor, v float64, labels []string) {
	if m.Discard {
		return
	}
	names := append(slices.Clone(d.Labels), d.OptionalLabels...)
	if len(labels) != len(names) {
		panic(fmt.Sprintf("fakecc: %s recorded with %d label values %q, want one for each of %q", d.Name, len(labels), labels, names))
	}
	r := Record{Value: v, Labels: make(map[string]string, len(names))}
	for i, n := range names {
		r.Labels[n] = labels[i]
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.records[d.Name] = append(m.records[d.Name], r)
}

// Records returns what was recorded for name, in order.
func (m *Metrics) Records(name string) []Record {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.records[name])
}

// Total is the sum of the values recorded for name.
func (m *Metrics) Total(name string) float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	t := 0.0
	for _, r := range m.records[name] {
		t += r.Value
	}
	return t
}

// Values returns the values recorded for name, in order.
func (m *Metrics) Values(name string) []float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	vs := make([]float64, len(m.records[name]))
	for i, r := range m.records[name] {
		vs[i] = r.Value
	}
	return vs
}

// Last returns the latest value recorded for name, and false if there is
// none: a gauge's current value.
func (m *Metrics) Last(name string) (float64, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	rs := m.records[name]
	if len(rs) == 0 {
		return 0, false
	}
	return rs[len(rs)-1].Value, true
}

// Label is the value of the first label (the channel target) of name's
// latest record.
func (m *Metrics) Label(name string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	rs := m.records[name]
	d := estats.DescriptorForMetric(estats.Metric(name))
	if len(rs) == 0 || d == nil || len(d.Labels) == 0 {
		return ""
	}
	return rs[len(rs)-1].Labels[d.Labels[0]]
}

// RecordInt64Count implements estats.MetricsRecorder.
func (m *Metrics) RecordInt64Count(h *estats.Int64CountHandle, v int64, labels ...string) {
	m.record(h.Descriptor(), float64(v), labels)
}

// RecordFloat64Count implements estats.MetricsRecorder.
func (m *Metrics) RecordFloat64Count(h *estats.Float64CountHandle, v float64, labels ...string) {
	m.record(h.Descriptor(), v, labels)
}

// RecordInt64Histo implements estats.MetricsRecorder.
func (m *Metrics) RecordInt64Histo(h *estats.Int64HistoHandle, v int64, labels ...string) {
	m.record(h.Descriptor(), float64(v), labels)
}

// RecordFloat64Histo implements estats.MetricsRecorder.
func (m *Metrics) RecordFloat64Histo(h *estats.Float64HistoHandle, v float64, labels ...string) {
	m.record(h.Descriptor(), v, labels)
}

// RecordInt64Gauge implements estats.MetricsRecorder.
func (m *Metrics) RecordInt64Gauge(h *estats.Int64GaugeHandle, v int64, labels ...string) {
	m.record(h.Descriptor(), float64(v), labels)
}

// RecordInt64UpDownCount implements estats.MetricsRecorder.
func (m *Metrics) RecordInt64UpDownCount(h *estats.Int64UpDownCountHandle, v int64, labels ...string) {
	m.record(h.Descriptor(), float64(v), labels)
}

// RecordInt64AsyncGauge implements estats.AsyncMetricsRecorder, for the
// reporters Collect runs.
func (m *Metrics) RecordInt64AsyncGauge(h *estats.Int64AsyncGaugeHandle, v int64, labels ...string) {
	m.record(h.Descriptor(), float64(v), labels)
}

// RegisterAsyncReporter implements estats.MetricsRecorder: Collect runs
// the reporter until the returned function is called.
func (m *Metrics) RegisterAsyncReporter(r estats.AsyncMetricReporter, _ ...estats.AsyncMetric) func() {
	m.mu.Lock()
	defer m.mu.Unlock()
	id := m.nextID
	m.nextID++
	m.reporters[id] = r
	return func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		delete(m.reporters, id)
	}
}

// Reporters is how many async reporters are registered.
func (m *Metrics) Reporters() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.reporters)
}

// Collect runs every registered async reporter, as a sink does when it
// exports or is scraped, and returns the first error one returned.
func (m *Metrics) Collect() error {
	m.mu.Lock()
	rs := make([]estats.AsyncMetricReporter, 0, len(m.reporters))
	for _, r := range m.reporters {
		rs = append(rs, r)
	}
	m.mu.Unlock()
	for _, r := range rs {
		if err := r.Report(m); err != nil {
			return err
		}
	}
	return nil
}

// Metrics is also a stats.Handler, so that a real channel can be given it
// (grpc.WithStatsHandler) and record its balancers' metrics into it: grpc
// hands every stats handler that is a metrics recorder to the channel's
// balancers. It ignores the RPC and connection events.

// TagRPC implements stats.Handler.
func (m *Metrics) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context { return ctx }

// HandleRPC implements stats.Handler.
func (m *Metrics) HandleRPC(context.Context, stats.RPCStats) {}

// TagConn implements stats.Handler.
func (m *Metrics) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context { return ctx }

// HandleConn implements stats.Handler.
func (m *Metrics) HandleConn(context.Context, stats.ConnStats) {}
