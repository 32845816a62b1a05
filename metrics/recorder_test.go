package metrics_test

import (
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/pickwise/pickwise/internal/fleet"
	"github.com/pickwise/pickwise/internal/testkit"
	"github.com/pickwise/pickwise/metrics"
	"google.golang.org/grpc"
	estats "google.golang.org/grpc/experimental/stats"
)

// samples keeps what a Recorder hands over, safe to read while channels
// record.
type samples struct {
	mu  sync.Mutex
	all []metrics.Sample
}

func (s *samples) record(x metrics.Sample) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.all = append(s.all, x)
}

// of returns the samples of the metric name.
func (s *samples) of(name string) []metrics.Sample {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []metrics.Sample
	for _, x := range s.all {
		if x.Name == name {
			out = append(out, x)
		}
	}
	return out
}

// total sums the values of name's samples.
func (s *samples) total(name string) float64 {
	t := 0.0
	for _, x := range s.of(name) {
		t += x.Value
	}
	return t
}

// last returns name's latest value, and false if it has none.
func (s *samples) last(name string) (float64, bool) {
	xs := s.of(name)
	if len(xs) == 0 {
		return 0, false
	}
	return xs[len(xs)-1].Value, true
}

func (s *samples) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.all)
}

// TestRecorderEndToEnd dials real backends on loopback with pickwise_p2c
// and a Recorder, beside a second metrics recorder on the same channel
// (as grpc's OpenTelemetry plugin would be), and checks what reaches the
// Recorder's function: every pick, counted once, the gauges and the cost
// samples at Collect, with the labels of each metric's descriptor, and
// nothing once the channel is closed. Calls run while Collect does, for
// the race detector.
func TestRecorderEndToEnd(t *testing.T) {
	ctx := fleet.Context(t, time.Minute)
	f := fleet.StartT(t, 3)
	var got samples
	rec := metrics.NewRecorder(got.record)
	other := testkit.NewMetrics()
	c := fleet.DialT(t, f.Addrs(), `{"loadBalancingConfig": [{"pickwise_p2c": {}}]}`, rec.DialOption(), grpc.WithStatsHandler(other))
	target := c.Conn.CanonicalTarget()

	// A collection after each call, while the other callers' calls run.
	const callers, perCaller = 4, 50
	var wg sync.WaitGroup
	called := make(chan struct{}, callers*perCaller)
	for range callers {
		wg.Go(func() {
			for range perCaller {
				if _, err := c.Call(ctx); err != nil {
					t.Error(err)
					return
				}
				called <- struct{}{}
			}
		})
	}
	go func() { wg.Wait(); close(called) }()
	for range called {
		rec.Collect()
	}
	rec.Collect()
	const calls = callers * perCaller
	if n := got.total("pickwise.p2c.picks"); n != calls {
		t.Errorf("picks recorded %v times, want %d (one per call)", n, calls)
	}
	// The other recorder got the same counts: grpc's MetricsRecorderList
	// hands every count to each recorder on the channel.
	if n := other.Total("pickwise.p2c.picks"); n != calls {
		t.Errorf("the second recorder on the channel counted %v picks, want %d", n, calls)
	}

	// Every endpoint READY in a collection.
	fleet.WaitFor(t, ctx, "endpoints_ready 3", func() bool {
		rec.Collect()
		v, ok := got.last("pickwise.p2c.endpoints_ready")
		return ok && v == 3
	})
	wantLabels := map[string][]string{
		"pickwise.p2c.picks":           {"grpc.target", "pickwise.reason", "grpc.lb.locality"},
		"pickwise.p2c.endpoints_ready": {"grpc.target", "grpc.lb.locality"},
		"pickwise.p2c.endpoint_cost":   {"grpc.target", "grpc.lb.locality"},
	}
	wantKind := map[string]metrics.Kind{
		"pickwise.p2c.picks":           metrics.Counter,
		"pickwise.p2c.endpoints_ready": metrics.Gauge,
		"pickwise.p2c.endpoint_cost":   metrics.Histogram,
	}
	for name, labels := range wantLabels {
		xs := got.of(name)
		if len(xs) == 0 {
			t.Errorf("no sample of %s", name)
			continue
		}
		for _, x := range xs {
			if x.Kind != wantKind[name] || !slices.Equal(x.LabelNames, labels) || len(x.LabelValues) != len(labels) || x.LabelValues[0] != target {
				t.Errorf("%s: kind %v, labels %q = %q; want %v, %q with %s first", name, x.Kind, x.LabelNames, x.LabelValues, wantKind[name], labels, target)
				break
			}
		}
		d := estats.DescriptorForMetric(name)
		if x := xs[0]; x.Unit != d.Unit || x.Description != d.Description {
			t.Errorf("%s: unit %q, description %q; want the descriptor's", name, x.Unit, x.Description)
		}
	}
	reasons := map[string]bool{}
	for _, x := range got.of("pickwise.p2c.picks") {
		reasons[x.LabelValues[1]] = true
	}
	for r := range reasons {
		// only_ready: before the other two connections were READY.
		if r != "tie" && r != "least_loaded" && r != "only_ready" {
			t.Errorf("picks with reason %q, want tie, least_loaded or only_ready with healthy backends", r)
		}
	}
	for _, n := range []string{"pickwise.p2c.endpoints_in_slow_start", "pickwise.p2c.endpoints_ejected"} {
		if v, ok := got.last(n); !ok || v != 0 {
			t.Errorf("%s = %v (recorded: %v), want 0", n, v, ok)
		}
	}
	got.mu.Lock()
	for _, x := range got.all {
		if !strings.HasPrefix(x.Name, "pickwise.") {
			t.Errorf("a sample of %s: a Recorder passes on pickwise's metrics only", x.Name)
		}
	}
	got.mu.Unlock()

	// A closed channel's policies have unregistered: nothing more.
	c.Close()
	n := got.len()
	rec.Collect()
	if m := got.len(); m != n {
		t.Errorf("Collect after the channel closed recorded %d samples, want none", m-n)
	}
}

// TestRecorderHandlesEveryKind: every metric a policy registers is of a
// type a Recorder passes on, so none is dropped silently.
func TestRecorderHandlesEveryKind(t *testing.T) {
	passed := []estats.MetricType{estats.MetricTypeIntCount, estats.MetricTypeFloatCount, estats.MetricTypeIntHisto,
		estats.MetricTypeFloatHisto, estats.MetricTypeIntGauge, estats.MetricTypeIntAsyncGauge}
	for _, n := range metrics.Names() {
		if d := estats.DescriptorForMetric(n); !slices.Contains(passed, d.Type) {
			t.Errorf("%s is of type %v, which a Recorder does not pass on", n, d.Type)
		}
	}
}

func TestKindString(t *testing.T) {
	got := []string{metrics.Counter.String(), metrics.Histogram.String(), metrics.Gauge.String(), metrics.Kind(0).String()}
	if d := cmp.Diff([]string{"counter", "histogram", "gauge", "unknown"}, got); d != "" {
		t.Errorf("Kind.String (-want +got):\n%s", d)
	}
}
