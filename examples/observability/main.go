// Command observability exports pickwise's load-balancing metrics to
// Prometheus through grpc's OpenTelemetry plugin.
//
// It starts five gRPC backends on 127.0.0.1 (one fails every call at once
// with Unavailable, one is ten times slower than the rest, and all of them
// attach an ORCA load report to each reply), an OpenTelemetry MeterProvider
// whose only reader is the Prometheus exporter, and an HTTP server for
// /metrics. It then sends traffic, concurrently, through one channel per
// policy: pickwise_p2c, pickwise_peak_ewma, pickwise_orca_wrr,
// pickwise_ring_hash (random keys, bounded load) and pickwise_subset over
// pickwise_p2c. When the traffic ends it scrapes its own /metrics over HTTP
// and prints the pickwise_ samples, and how many attempts grpc started per
// channel, so what a Prometheus server would see is on the terminal.
//
// pickwise's metrics, like grpc's own load-balancing metrics, are off until
// they are enabled by name. The whole client-side setup is one dial option:
//
//	opentelemetry.DialOption(opentelemetry.Options{
//		MetricsOptions: opentelemetry.MetricsOptions{
//			MeterProvider: provider,
//			Metrics:       opentelemetry.DefaultMetrics().Add(metrics.Names()...),
//		},
//	})
//
// where metrics is github.com/pickwise/pickwise/metrics. Names lists the
// metrics of every pickwise policy the program imports, so the option
// needs no change when a policy gains a metric.
//
// This is a module of its own, so that the library's go.mod does not pull
// in OpenTelemetry and the Prometheus client. Run it from
// examples/observability:
//
//	go run .                      # a few seconds of traffic, then the samples
//	go run . -duration 10s
//	go run . -serve -addr 127.0.0.1:9464
//
// With -serve it keeps the traffic going and /metrics up until interrupted,
// for a look with curl or a real Prometheus server:
//
//	curl -s http://127.0.0.1:9464/metrics | grep '^pickwise_'
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
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

	// Each blank import registers a policy with grpc and its metrics with
	// grpc's metrics registry, which is where metrics.Names finds them.
	"github.com/pickwise/pickwise/admin"
	_ "github.com/pickwise/pickwise/balancer/orcawrr"
	_ "github.com/pickwise/pickwise/balancer/p2c"
	_ "github.com/pickwise/pickwise/balancer/peakewma"
	"github.com/pickwise/pickwise/balancer/ringhash"
	_ "github.com/pickwise/pickwise/balancer/subset"
	"github.com/pickwise/pickwise/interop/server"
	"github.com/pickwise/pickwise/metrics"
)

// config is what the flags set; run takes it so that the test can run the
// program with its own values.
type config struct {
	// addr is where /metrics is served.
	addr string
	// duration bounds the traffic when rpcs is 0.
	duration time.Duration
	// rpcs, when > 0, is how many calls each channel makes instead.
	rpcs int
	// concurrency is the number of callers per channel.
	concurrency int
	// serve keeps traffic and /metrics going until ctx ends.
	serve bool
}

func main() {
	var cfg config
	flag.StringVar(&cfg.addr, "addr", "127.0.0.1:0", "listen address of the /metrics endpoint")
	flag.DurationVar(&cfg.duration, "duration", 3*time.Second, "how long to send traffic before scraping (ignored with -rpcs)")
	flag.IntVar(&cfg.rpcs, "rpcs", 0, "RPCs per channel before scraping; 0 means send for -duration")
	flag.IntVar(&cfg.concurrency, "concurrency", 4, "concurrent callers per channel")
	flag.BoolVar(&cfg.serve, "serve", false, "after printing, keep sending traffic and serving /metrics until interrupted")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		// After the first interrupt the program shuts down in an orderly
		// way; giving the signals back to the runtime lets a second one
		// end it at once.
		<-ctx.Done()
		stop()
	}()
	if _, err := run(ctx, cfg, os.Stdout); err != nil {
		log.Fatal(err)
	}
}

// backendSpec is one backend of the fleet.
type backendSpec struct {
	about    string
	behavior server.Behavior
}

// fleet is the set of backends every channel balances over, named
// backend-0, backend-1, ... in this order. Every backend reports its load
// per call in "rate" mode, utilization = completed calls per second over
// its rated capacity, so that pickwise_orca_wrr's weight (QPS over
// utilization) comes out as the rated capacity whatever share of the
// traffic the backend gets.
func fleet() []backendSpec {
	orca := func(ratedQPS float64) server.ORCAConfig {
		return server.ORCAConfig{PerCall: true, Utilization: server.UtilizationRate, RatedQPS: ratedQPS}
	}
	healthy := server.Behavior{Latency: server.Duration(2 * time.Millisecond), ORCA: orca(2000)}
	return []backendSpec{
		{"black hole: fails every call at once with UNAVAILABLE", server.Behavior{ErrorRate: 1, ErrorCode: "UNAVAILABLE", ORCA: orca(2000)}},
		{"slow: 20ms per call, rated for a tenth of the others", server.Behavior{Latency: server.Duration(20 * time.Millisecond), ORCA: orca(200)}},
		{"healthy: 2ms per call", healthy},
		{"healthy: 2ms per call", healthy},
		{"healthy: 2ms per call", healthy},
	}
}

// channelSpec is one client channel: a policy, chosen by service config,
// over the whole fleet.
type channelSpec struct {
	// name is the path of the target, and so shows in the grpc_target
	// label as fleet:///<name>.
	name string
	// lbConfig is the channel's loadBalancingConfig list.
	lbConfig string
	// keyed gives every call a random ring-hash key.
	keyed bool
}

var channels = []channelSpec{
	{name: "p2c", lbConfig: `[{"pickwise_p2c": {}}]`},
	{name: "peak_ewma", lbConfig: `[{"pickwise_peak_ewma": {}}]`},
	// A short blackout and update period let the weights settle within
	// the few seconds the program runs; the defaults suit a long-lived
	// channel.
	{name: "orca_wrr", lbConfig: `[{"pickwise_orca_wrr": {"blackoutPeriod": "200ms", "weightUpdatePeriod": "100ms"}}]`},
	// With bounded load an endpoint holding more than 1.25 times its fair
	// share of the calls in flight passes a key on to the next one, which
	// the picks counter reports as spilled.
	{name: "ring_hash", lbConfig: `[{"pickwise_ring_hash": {"balanceFactor": 1.25}}]`, keyed: true},
	// This client is one of two, each connecting to 3 of the 5 backends.
	{name: "subset", lbConfig: `[{"pickwise_subset": {"subsetSize": 3, "clientIndex": 0, "clientCount": 2, "childPolicy": [{"pickwise_p2c": {}}]}}]`},
}

// channel is a dialed channelSpec and its traffic counters.
type channel struct {
	channelSpec
	conn          *grpc.ClientConn
	calls, failed atomic.Int64
}

// run is the program: it returns the text of the last scrape of /metrics
// and writes what a user reads to w. It stops everything it started before
// returning.
func run(ctx context.Context, cfg config, w io.Writer) (scrape string, err error) {
	if cfg.concurrency < 1 {
		return "", fmt.Errorf("-concurrency %d: must be >= 1", cfg.concurrency)
	}
	if cfg.rpcs < 0 {
		return "", fmt.Errorf("-rpcs %d: must be >= 0", cfg.rpcs)
	}
	if cfg.rpcs == 0 && cfg.duration <= 0 {
		return "", fmt.Errorf("-duration %v: must be > 0 when -rpcs is 0", cfg.duration)
	}

	addrs, stopBackends, err := startFleet(w)
	if err != nil {
		return "", err
	}
	defer stopBackends()

	// A registry of our own rather than prometheus.DefaultRegisterer, so
	// that /metrics shows what this program set up and nothing that some
	// library registered globally, and so that run leaves no trace in
	// the process and can run again in it.
	registry := prometheus.NewRegistry()
	exporter, err := otelprom.New(
		otelprom.WithRegisterer(registry),
		// Spelled out because the exporter's default depends on a
		// process-wide setting of the Prometheus client: under UTF-8
		// validation it would keep the dots of the OpenTelemetry names.
		// This gives the classic pickwise_p2c_picks_total.
		otelprom.WithTranslationStrategy(otlptranslator.UnderscoreEscapingWithSuffixes),
		// Every grpc metric comes from the one instrumentation scope of
		// grpc's plugin, so the otel_scope_* labels would only lengthen
		// each line.
		otelprom.WithoutScopeInfo(),
	)
	if err != nil {
		return "", err
	}
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter))
	defer func() {
		// A fresh context: ctx may be the one that just ended.
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		err = errors.Join(err, provider.Shutdown(sctx))
	}()

	url, stopHTTP, err := serveMetrics(cfg.addr, registry)
	if err != nil {
		return "", err
	}
	defer func() { err = errors.Join(err, stopHTTP()) }()
	fmt.Fprintf(w, "metrics: %s\nbalancers: %s\n", url, strings.TrimSuffix(url, "/metrics")+"/debug/pickwise")

	stats := opentelemetry.DialOption(opentelemetry.Options{MetricsOptions: opentelemetry.MetricsOptions{
		MeterProvider: provider,
		// grpc's default per-call metrics, and every pickwise metric of
		// the policies imported above.
		Metrics: opentelemetry.DefaultMetrics().Add(metrics.Names()...),
		// The endpoint's locality, set by grpc's xDS resolver. With this
		// program's static resolver there is none, so the label is empty.
		OptionalLabels: []string{"grpc.lb.locality"},
	}})
	chans, err := dialAll(addrs, stats)
	if err != nil {
		return "", err
	}
	defer func() {
		for _, c := range chans {
			c.conn.Close()
		}
	}()

	fmt.Fprintf(w, "pickwise metrics enabled: %s\n", strings.Join(metrics.Names(), " "))
	if cfg.rpcs > 0 {
		fmt.Fprintf(w, "sending %d RPCs on each of %d channels, %d callers each...\n", cfg.rpcs, len(chans), cfg.concurrency)
		drive(ctx, chans, cfg.rpcs, cfg.concurrency)
	} else {
		fmt.Fprintf(w, "sending traffic on %d channels for %v, %d callers each...\n", len(chans), cfg.duration, cfg.concurrency)
		tctx, cancel := context.WithTimeout(ctx, cfg.duration)
		drive(tctx, chans, 0, cfg.concurrency)
		cancel()
	}
	if err := ctx.Err(); err != nil {
		return "", err
	}
	for _, c := range chans {
		fmt.Fprintf(w, "  %-10s %6d calls, %5d failed\n", c.name, c.calls.Load(), c.failed.Load())
	}

	scrape, err = scrapeUntilPicks(ctx, url)
	if err != nil {
		return "", err
	}
	fmt.Fprintf(w, "\nscraped %s (pickwise_ samples; histogram buckets left out):\n", url)
	for _, l := range selectLines(scrape) {
		fmt.Fprintln(w, l)
	}
	if !hasPickwiseSample(scrape) {
		return scrape, fmt.Errorf("the scrape of %s has no pickwise_ metric (metrics.Names(): %q)", url, metrics.Names())
	}

	page, err := fetch(ctx, strings.TrimSuffix(url, "/metrics")+"/debug/pickwise?format=json")
	if err != nil {
		return scrape, err
	}
	if err := printBalancers(w, page); err != nil {
		return scrape, err
	}

	if cfg.serve {
		fmt.Fprintf(w, "\nserving %s and sending traffic until interrupted\n", url)
		drive(ctx, chans, 0, cfg.concurrency)
	}
	return scrape, nil
}

// startFleet starts the backends and returns their addresses and a
// function that stops them all.
func startFleet(w io.Writer) (addrs []string, stop func(), err error) {
	var started []*server.Server
	stop = func() {
		for _, s := range started {
			s.Stop()
		}
	}
	for i, spec := range fleet() {
		s, err := server.New(fmt.Sprintf("backend-%d", i), spec.behavior)
		if err != nil {
			stop()
			return nil, nil, err
		}
		addr, err := s.Start("127.0.0.1:0")
		if err != nil {
			stop()
			return nil, nil, err
		}
		started = append(started, s)
		addrs = append(addrs, addr)
		fmt.Fprintf(w, "backend-%d %-16s %s\n", i, addr, spec.about)
	}
	return addrs, stop, nil
}

// serveMetrics serves the registry's /metrics on addr and returns its URL
// and a function that shuts the server down.
func serveMetrics(addr string, registry *prometheus.Registry) (url string, stop func() error, err error) {
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, fmt.Errorf("-addr %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(registry, promhttp.HandlerOpts{}))
	// Every pickwise balancer's endpoints, for a person (HTML) or a tool
	// (?format=json): mount it on a debug server, never a public one.
	mux.Handle("/debug/pickwise", admin.Handler())
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(lis) }()
	stop = func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		err := srv.Shutdown(ctx)
		if serr := <-done; !errors.Is(serr, http.ErrServerClosed) {
			err = errors.Join(err, serr)
		}
		return err
	}
	return "http://" + lis.Addr().String() + "/metrics", stop, nil
}

// dialAll dials every channel of channels over addrs. Each channel gets a
// manual resolver of its own that hands it the fleet once: a static list
// is all a demonstration needs, and unlike passthrough it gives the policy
// every backend at once.
func dialAll(addrs []string, stats grpc.DialOption) ([]*channel, error) {
	eps := make([]resolver.Endpoint, len(addrs))
	for i, a := range addrs {
		eps[i] = resolver.Endpoint{Addresses: []resolver.Address{{Addr: a}}}
	}
	var out []*channel
	for _, spec := range channels {
		r := manual.NewBuilderWithScheme("fleet")
		r.InitialState(resolver.State{Endpoints: eps})
		conn, err := grpc.NewClient("fleet:///"+spec.name,
			grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithResolvers(r),
			grpc.WithDefaultServiceConfig(`{"loadBalancingConfig": `+spec.lbConfig+`}`),
			stats)
		if err != nil {
			for _, c := range out {
				c.conn.Close()
			}
			return nil, fmt.Errorf("dial %s: %w", spec.name, err)
		}
		out = append(out, &channel{channelSpec: spec, conn: conn})
	}
	return out, nil
}

// drive makes calls on every channel at once, concurrency callers per
// channel, until ctx ends or, when rpcs > 0, each channel has made rpcs
// calls. Failed calls are counted, not fatal: the black hole fails every
// call it gets, and how few a policy sends it is part of what the metrics
// show.
func drive(ctx context.Context, chans []*channel, rpcs, concurrency int) {
	var wg sync.WaitGroup
	for _, c := range chans {
		var budget atomic.Int64
		budget.Store(int64(rpcs))
		for range concurrency {
			wg.Go(func() {
				for ctx.Err() == nil {
					if rpcs > 0 && budget.Add(-1) < 0 {
						return
					}
					cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
					if c.keyed {
						cctx = ringhash.WithKey(cctx, fmt.Sprint(rand.Uint64()))
					}
					// StaticMethodCallOption lets grpc's plugin record the
					// method name in grpc_method rather than "other".
					_, err := server.Call(cctx, c.conn, "observability", grpc.StaticMethodCallOption{})
					cancel()
					if ctx.Err() != nil {
						// Cut short by the end of the run, not the backend.
						return
					}
					c.calls.Add(1)
					if err != nil {
						c.failed.Add(1)
					}
				}
			})
		}
	}
	wg.Wait()
}

// scrapeUntilPicks fetches url until the text holds a sample of every
// pickwise pick counter that is registered, at most a few times. Some
// pickwise metrics are recorded when the metrics are collected, and a
// value recorded during one collection may only be exported by the next.
func scrapeUntilPicks(ctx context.Context, url string) (string, error) {
	var text string
	for attempt := range 5 {
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return "", ctx.Err()
			case <-time.After(200 * time.Millisecond):
			}
		}
		var err error
		if text, err = fetch(ctx, url); err != nil {
			return "", err
		}
		if len(missingSamples(text, pickCounters(metrics.Names()))) == 0 {
			break
		}
	}
	return text, nil
}

// fetch returns the body of a GET of url.
func fetch(ctx context.Context, url string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	// One request per connection: a kept-alive connection would outlive
	// the program's HTTP server in the client's pool.
	req.Close = true
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s: %s", url, resp.Status, body)
	}
	return string(body), nil
}

// printBalancers prints, from the introspection page's JSON, each
// balancer's ejected endpoints with their failure rate and share.
func printBalancers(w io.Writer, page string) error {
	var p struct {
		Balancers []struct {
			Policy     string `json:"policy"`
			Membership struct {
				Fingerprint string `json:"fingerprint"`
			} `json:"membership"`
			Endpoints []struct {
				Address     string  `json:"address"`
				Ejected     bool    `json:"ejected"`
				FailureRate float64 `json:"failureRate"`
				Share       float64 `json:"share"`
			} `json:"endpoints"`
		} `json:"balancers"`
	}
	if err := json.Unmarshal([]byte(page), &p); err != nil {
		return fmt.Errorf("/debug/pickwise: %w", err)
	}
	if len(p.Balancers) == 0 {
		return errors.New("/debug/pickwise lists no balancer")
	}
	fmt.Fprintf(w, "\n/debug/pickwise: %d balancers\n", len(p.Balancers))
	for _, b := range p.Balancers {
		fmt.Fprintf(w, "  %-20s membership %s, %d endpoints\n", b.Policy, b.Membership.Fingerprint, len(b.Endpoints))
		for _, e := range b.Endpoints {
			if e.Ejected {
				fmt.Fprintf(w, "    ejected %s: failure rate %.0f%%, share %.1f%%\n", e.Address, 100*e.FailureRate, 100*e.Share)
			}
		}
	}
	return nil
}

// selectLines returns, sorted, the sample lines of text a user wants to
// see first: every pickwise_ sample except histogram buckets (dozens of
// lines per channel; the _sum and _count carry the gist), and grpc's count
// of started attempts per channel, to compare the pick counts with.
func selectLines(text string) []string {
	var out []string
	for l := range strings.Lines(text) {
		l = strings.TrimRight(l, "\n")
		name := metricName(l)
		switch {
		case strings.HasPrefix(name, "pickwise_") && !strings.HasSuffix(name, "_bucket"):
		case name == "grpc_client_attempt_started_total":
		default:
			continue
		}
		out = append(out, l)
	}
	slices.Sort(out)
	return out
}

// hasPickwiseSample reports whether the Prometheus text has a sample of a
// pickwise metric.
func hasPickwiseSample(text string) bool {
	for l := range strings.Lines(text) {
		if strings.HasPrefix(metricName(strings.TrimRight(l, "\n")), "pickwise_") {
			return true
		}
	}
	return false
}

// metricName returns the metric name of a sample line of the Prometheus
// text format, or "" for a comment or blank line.
func metricName(line string) string {
	if line == "" || line[0] == '#' {
		return ""
	}
	if i := strings.IndexAny(line, "{ "); i >= 0 {
		return line[:i]
	}
	return line
}

// pickCounters returns the names among names of pickwise pick counters,
// the metrics that every pickwise channel records on its first call.
func pickCounters(names []string) []string {
	var out []string
	for _, n := range names {
		if strings.HasPrefix(n, "pickwise.") && strings.HasSuffix(n, ".picks") {
			out = append(out, n)
		}
	}
	return out
}

// missingSamples returns the names among names (OpenTelemetry names) with
// no sample in the Prometheus text.
func missingSamples(text string, names []string) []string {
	var have []string
	for l := range strings.Lines(text) {
		if n := metricName(strings.TrimRight(l, "\n")); n != "" {
			have = append(have, n)
		}
	}
	var missing []string
	for _, n := range names {
		if !slices.ContainsFunc(have, func(h string) bool { return isSampleOf(h, n) }) {
			missing = append(missing, n)
		}
	}
	return missing
}

// isSampleOf reports whether sample, the metric name of a sample line, is
// a sample of the OpenTelemetry metric name. The exporter turns dots into
// underscores and appends a unit (none for the curly-brace units pickwise
// uses, but a time or size unit would show), then _total for counters or
// _bucket, _sum and _count for histograms. The suffixes are peeled off
// one by one rather than matched as a prefix, because a prefix match would
// take pickwise_p2c_endpoints_ready for a sample of pickwise.p2c.endpoints.
func isSampleOf(sample, name string) bool {
	base := strings.ReplaceAll(name, ".", "_")
	for _, suffix := range []string{"_total", "_bucket", "_sum", "_count"} {
		if s, ok := strings.CutSuffix(sample, suffix); ok {
			sample = s
			break
		}
	}
	if sample == base {
		return true
	}
	for _, unit := range []string{"_seconds", "_milliseconds", "_microseconds", "_nanoseconds", "_bytes", "_ratio"} {
		if sample == base+unit {
			return true
		}
	}
	return false
}
