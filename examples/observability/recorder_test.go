package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/otlptranslator"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"
	"google.golang.org/grpc/stats/opentelemetry"

	"github.com/pickwise/pickwise/interop/server"
	"github.com/pickwise/pickwise/metrics"
)

// newPrometheusRecorder is the code docs/observability.md shows: pickwise's
// metrics into a Prometheus registry through metrics.Recorder, without
// OpenTelemetry. The handler collects the gauges before each scrape.
func newPrometheusRecorder(reg *prometheus.Registry) (*metrics.Recorder, http.Handler) {
	vecs := map[string]prometheus.Collector{} // by metric; record calls never overlap
	rec := metrics.NewRecorder(func(s metrics.Sample) {
		v, ok := vecs[s.Name]
		if !ok {
			name := strings.ReplaceAll(s.Name, ".", "_")
			if s.Unit == "s" {
				name += "_seconds"
			}
			labels := make([]string, len(s.LabelNames))
			for i, l := range s.LabelNames {
				labels[i] = strings.ReplaceAll(l, ".", "_")
			}
			switch s.Kind {
			case metrics.Counter:
				v = prometheus.NewCounterVec(prometheus.CounterOpts{Name: name + "_total", Help: s.Description}, labels)
			case metrics.Gauge:
				v = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: s.Description}, labels)
			case metrics.Histogram:
				v = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: s.Description}, labels)
			}
			reg.MustRegister(v)
			vecs[s.Name] = v
		}
		switch v := v.(type) {
		case *prometheus.CounterVec:
			v.WithLabelValues(s.LabelValues...).Add(s.Value)
		case *prometheus.GaugeVec:
			v.WithLabelValues(s.LabelValues...).Set(s.Value)
		case *prometheus.HistogramVec:
			v.WithLabelValues(s.LabelValues...).Observe(s.Value)
		}
	})
	scrape := promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	return rec, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec.Collect() // the gauges, as of this scrape
		scrape.ServeHTTP(w, r)
	})
}

// TestRecorderBesideOpenTelemetry puts a metrics.Recorder feeding a
// Prometheus registry and grpc's OpenTelemetry plugin with the Prometheus
// exporter on one channel, pickwise_p2c over two backends on loopback:
// both registries count every pick and show both endpoints READY.
func TestRecorderBesideOpenTelemetry(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var addrs []string
	for i := range 2 {
		s, err := server.New(fmt.Sprintf("backend-%d", i), server.Behavior{})
		if err != nil {
			t.Fatal(err)
		}
		addr, err := s.Start("127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer s.Stop()
		addrs = append(addrs, addr)
	}

	recReg := prometheus.NewRegistry()
	rec, recHandler := newPrometheusRecorder(recReg)

	otelReg := prometheus.NewRegistry()
	exporter, err := otelprom.New(otelprom.WithRegisterer(otelReg),
		otelprom.WithTranslationStrategy(otlptranslator.UnderscoreEscapingWithSuffixes), otelprom.WithoutScopeInfo())
	if err != nil {
		t.Fatal(err)
	}
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter))
	defer provider.Shutdown(context.Background())
	otelHandler := promhttp.HandlerFor(otelReg, promhttp.HandlerOpts{})

	r := manual.NewBuilderWithScheme("both")
	eps := make([]resolver.Endpoint, len(addrs))
	for i, a := range addrs {
		eps[i] = resolver.Endpoint{Addresses: []resolver.Address{{Addr: a}}}
	}
	r.InitialState(resolver.State{Endpoints: eps})
	conn, err := grpc.NewClient("both:///p2c",
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithResolvers(r),
		grpc.WithDefaultServiceConfig(`{"loadBalancingConfig": [{"pickwise_p2c": {}}]}`),
		opentelemetry.DialOption(opentelemetry.Options{MetricsOptions: opentelemetry.MetricsOptions{
			MeterProvider: provider,
			Metrics:       opentelemetry.DefaultMetrics().Add(metrics.Names()...),
		}}),
		rec.DialOption())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()

	const calls = 100
	for range calls {
		if _, err := server.Call(ctx, conn, ""); err != nil {
			t.Fatal(err)
		}
	}
	scrape := func(h http.Handler) string {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/metrics", nil))
		return w.Body.String()
	}
	// Both endpoints READY in a collection of each: the second may still
	// be connecting when the calls end.
	var recText, otelText string
	for {
		recText, otelText = scrape(recHandler), scrape(otelHandler)
		if sum(recText, "pickwise_p2c_endpoints_ready") == 2 && sum(otelText, "pickwise_p2c_endpoints_ready") == 2 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("endpoints_ready never 2 in both scrapes:\n%s\n\n%s", recText, otelText)
		case <-time.After(10 * time.Millisecond):
		}
	}
	t.Logf("metrics.Recorder scrape:\n%s", strings.Join(selectLines(recText), "\n"))
	for _, tc := range []struct{ who, text string }{{"metrics.Recorder", recText}, {"OpenTelemetry", otelText}} {
		if n := sum(tc.text, "pickwise_p2c_picks_total"); n != calls {
			t.Errorf("%s: pickwise_p2c_picks_total sums to %v, want %d:\n%s", tc.who, n, calls, tc.text)
		}
		if !strings.Contains(tc.text, `grpc_target="both:///p2c"`) {
			t.Errorf("%s: no sample labeled with the channel's target:\n%s", tc.who, tc.text)
		}
	}
}

// sum adds the values of the samples of metric in a Prometheus text scrape.
func sum(text, metric string) float64 {
	total := 0.0
	for _, l := range sampleLines(text) {
		if metricName(l) != metric {
			continue
		}
		if v, err := strconv.ParseFloat(l[strings.LastIndexByte(l, ' ')+1:], 64); err == nil {
			total += v
		}
	}
	return total
}
