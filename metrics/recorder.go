package metrics

import (
	"context"
	"slices"
	"strings"
	"sync"

	"google.golang.org/grpc"
	estats "google.golang.org/grpc/experimental/stats"
	"google.golang.org/grpc/grpclog"
	"google.golang.org/grpc/stats"
)

var logger = grpclog.Component("pickwise")

// Kind says how to read a Sample's Value.
type Kind int

const (
	// Counter: Value is an increment. A counter's total for one set of
	// label values is the sum of its samples.
	Counter Kind = iota + 1
	// Histogram: Value is one observation.
	Histogram
	// Gauge: Value is the metric's value when it was collected
	// (Recorder.Collect); it replaces the previous one for the same
	// label values.
	Gauge
)

// String returns "counter", "histogram" or "gauge".
func (k Kind) String() string {
	switch k {
	case Counter:
		return "counter"
	case Histogram:
		return "histogram"
	case Gauge:
		return "gauge"
	}
	return "unknown"
}

// A Sample is one value a policy recorded.
type Sample struct {
	// Name is the metric's name, such as "pickwise.p2c.picks": one of
	// Names.
	Name string
	// Kind says how to read Value: an increment, an observation, or the
	// value at a collection.
	Kind  Kind
	Value float64
	// LabelNames and LabelValues are the sample's labels, in the same
	// order, which is the same for every sample of a metric: grpc.target,
	// the metric's own (pickwise.reason on picks), then grpc.lb.locality
	// ("" when xDS sets none). The slices belong to the Sample.
	LabelNames, LabelValues []string
	// Unit ("{pick}", "s") and Description are the metric's, as
	// registered with grpc.
	Unit, Description string
}

// A Recorder hands pickwise's metrics to a function, for a metrics stack
// other than grpc's OpenTelemetry plugin (a Prometheus registry, statsd,
// a stack of one's own). Every pickwise metric of a channel dialed with
// DialOption reaches it, without enabling names: counters and histograms
// as the policies record them, gauges when Collect runs.
//
// grpc hands a balancer the metrics recorders of the channel's stats
// handlers, and a Recorder is one; with grpc's OpenTelemetry plugin also
// on the channel, grpc gives each policy both: each gets every count and
// histogram sample, and the gauges at its own collections.
type Recorder struct {
	record func(Sample)
	h      *handler
	// endpoints says whether the metrics labelled by endpoint are
	// forwarded; perEndpoint names them, read once at the first value.
	endpoints   bool
	perEndpoint func() map[string]bool

	// recordMu makes calls of record one at a time: policies record from
	// calls' goroutines, timers and collections at once.
	recordMu sync.Mutex
	// collectMu makes collections one at a time, so that one collection's
	// gauges are not interleaved with another's.
	collectMu sync.Mutex

	reportersMu sync.Mutex
	reporters   map[*estats.AsyncMetricReporter]struct{}
}

// NewRecorder returns a Recorder that calls record with every value a
// pickwise policy records on the channels dialed with its DialOption, but
// for the metrics labelled by endpoint (see WithEndpoints). Calls of
// record never overlap; record must not call Collect.
func NewRecorder(record func(Sample)) *Recorder {
	r := &Recorder{record: record, reporters: map[*estats.AsyncMetricReporter]struct{}{}}
	r.perEndpoint = sync.OnceValue(func() map[string]bool {
		m := map[string]bool{}
		for _, n := range EndpointNames() {
			m[n] = true
		}
		return m
	})
	r.h = &handler{r: r}
	return r
}

// WithEndpoints makes r forward the metrics labelled by endpoint too
// (EndpointNames), and returns r. Call it before dialing.
func (r *Recorder) WithEndpoints() *Recorder {
	r.endpoints = true
	return r
}

// DialOption returns the option that gives a channel's policies the
// Recorder. One Recorder may serve any number of channels.
func (r *Recorder) DialOption() grpc.DialOption { return grpc.WithStatsHandler(r.h) }

// Collect asks every policy on the Recorder's channels for its gauges
// (endpoints_ready and the others) and its samples taken at collection
// (endpoint_cost, answer_age), and records the pick counts not yet
// recorded; all of them reach record before Collect returns. Call it
// before each scrape or export, or from a ticker for a stack that pushes.
// Pick counts and the other counters also arrive without it, within a
// second while calls flow.
func (r *Recorder) Collect() {
	r.collectMu.Lock()
	defer r.collectMu.Unlock()
	r.reportersMu.Lock()
	reporters := make([]*estats.AsyncMetricReporter, 0, len(r.reporters))
	for rep := range r.reporters {
		reporters = append(reporters, rep)
	}
	r.reportersMu.Unlock()
	// Reporters take their balancer's lock, which record is called
	// under too: no lock of the Recorder is held while one runs.
	for _, rep := range reporters {
		if err := (*rep).Report(r.h); err != nil {
			logger.Warningf("metrics: a policy's metrics reporter failed: %v", err)
		}
	}
}

// send hands one value to record, if it is a pickwise metric: the channel's
// other components (pick_first, the xDS client) record through the same
// recorders.
func (r *Recorder) send(d *estats.MetricDescriptor, kind Kind, v float64, labels []string) {
	if !strings.HasPrefix(d.Name, "pickwise.") || !r.endpoints && r.perEndpoint()[d.Name] {
		return
	}
	s := Sample{
		Name:        d.Name,
		Kind:        kind,
		Value:       v,
		LabelNames:  slices.Concat(d.Labels, d.OptionalLabels),
		LabelValues: slices.Clone(labels),
		Unit:        d.Unit,
		Description: d.Description,
	}
	r.recordMu.Lock()
	defer r.recordMu.Unlock()
	r.record(s)
}

// handler is the Recorder as grpc sees it: a stats.Handler that is also a
// metrics recorder, which is how grpc finds a channel's recorders. It
// ignores the calls' and connections' events.
type handler struct {
	// Embedded as grpc requires, so that methods grpc adds are no-ops.
	estats.UnimplementedMetricsRecorder
	r *Recorder
}

func (h *handler) RecordInt64Count(m *estats.Int64CountHandle, v int64, labels ...string) {
	h.r.send(m.Descriptor(), Counter, float64(v), labels)
}

func (h *handler) RecordFloat64Count(m *estats.Float64CountHandle, v float64, labels ...string) {
	h.r.send(m.Descriptor(), Counter, v, labels)
}

func (h *handler) RecordInt64Histo(m *estats.Int64HistoHandle, v int64, labels ...string) {
	h.r.send(m.Descriptor(), Histogram, float64(v), labels)
}

func (h *handler) RecordFloat64Histo(m *estats.Float64HistoHandle, v float64, labels ...string) {
	h.r.send(m.Descriptor(), Histogram, v, labels)
}

func (h *handler) RecordInt64Gauge(m *estats.Int64GaugeHandle, v int64, labels ...string) {
	h.r.send(m.Descriptor(), Gauge, float64(v), labels)
}

// RecordInt64AsyncGauge records for the reporters Collect runs.
func (h *handler) RecordInt64AsyncGauge(m *estats.Int64AsyncGaugeHandle, v int64, labels ...string) {
	h.r.send(m.Descriptor(), Gauge, float64(v), labels)
}

// RegisterAsyncReporter keeps rep for Collect until the returned function
// is called.
func (h *handler) RegisterAsyncReporter(rep estats.AsyncMetricReporter, _ ...estats.AsyncMetric) func() {
	key := &rep
	h.r.reportersMu.Lock()
	h.r.reporters[key] = struct{}{}
	h.r.reportersMu.Unlock()
	return func() {
		h.r.reportersMu.Lock()
		delete(h.r.reporters, key)
		h.r.reportersMu.Unlock()
	}
}

func (h *handler) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context { return ctx }

func (h *handler) HandleRPC(context.Context, stats.RPCStats) {}

func (h *handler) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context { return ctx }

func (h *handler) HandleConn(context.Context, stats.ConnStats) {}
