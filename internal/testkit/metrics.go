package testkit

import (
	"slices"
	"sync"

	estats "google.golang.org/grpc/experimental/stats"
)

// Metrics is a metrics recorder for tests: it keeps, per metric name, the
// sum of everything recorded and the recorded values in order, with their
// labels' first value (the channel target). Safe for concurrent use.
type Metrics struct {
	// Embedded as grpc requires of recorders, so that it can add methods;
	// every method it has today is implemented below.
	estats.MetricsRecorder

	mu     sync.Mutex
	totals map[string]float64
	values map[string][]float64
	labels map[string]string
}

// NewMetrics returns an empty recorder.
func NewMetrics() *Metrics {
	return &Metrics{totals: map[string]float64{}, values: map[string][]float64{}, labels: map[string]string{}}
}

func (m *Metrics) record(d *estats.MetricDescriptor, v float64, labels []string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.totals[d.Name] += v
	m.values[d.Name] = append(m.values[d.Name], v)
	if len(labels) > 0 {
		m.labels[d.Name] = labels[0]
	}
}

// Total is the sum of the values recorded for name.
func (m *Metrics) Total(name string) float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.totals[name]
}

// Values are the values recorded for name, oldest first.
func (m *Metrics) Values(name string) []float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.values[name])
}

// Label is the first label value of name's latest record.
func (m *Metrics) Label(name string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.labels[name]
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

// RegisterAsyncReporter implements estats.MetricsRecorder; nothing here
// reports asynchronously.
func (m *Metrics) RegisterAsyncReporter(estats.AsyncMetricReporter, ...estats.AsyncMetric) func() {
	return func() {}
}
