package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/xds"

	"github.com/pickwise/pickwise/balancer/ringhash"
	"github.com/pickwise/pickwise/balancer/shadow"
	"github.com/pickwise/pickwise/examples/xds/internal/xdsenv"
	"github.com/pickwise/pickwise/interop/server"
)

// env is shared by every test: one management server, serving one
// listener per test.
var (
	env         *xdsenv.Env
	xdsResolver resolver.Builder
)

func TestMain(m *testing.M) {
	var err error
	env, err = xdsenv.Start(4)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// grpc reads GRPC_XDS_BOOTSTRAP_CONFIG when the process starts, before
	// TestMain can set it, so the test hands the bootstrap it built to an
	// xds resolver of its own; a deployment sets the environment variable.
	xdsResolver, err = xds.NewXDSResolverWithConfigForTesting([]byte(env.Bootstrap()))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	env.Stop()
	os.Exit(code)
}

func dial(t *testing.T, svc xdsenv.Service, opts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	if err := env.Set(context.Background(), svc); err != nil {
		t.Fatalf("set %s: %v", svc.Name, err)
	}
	conn, err := grpc.NewClient("xds:///"+svc.Name, append([]grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithResolvers(xdsResolver)}, opts...)...)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

func update(t *testing.T, svc xdsenv.Service) {
	t.Helper()
	if err := env.Set(context.Background(), svc); err != nil {
		t.Fatalf("set %s: %v", svc.Name, err)
	}
}

func endpoints(weights ...uint32) []xdsenv.Endpoint {
	var eps []xdsenv.Endpoint
	for i, w := range weights {
		eps = append(eps, xdsenv.Endpoint{Addr: env.Addrs[i], Weight: w})
	}
	return eps
}

func setLatency(t *testing.T, i int, d time.Duration) {
	t.Helper()
	if err := env.Patch(i, func(b *server.Behavior) { b.Latency = server.Duration(d) }); err != nil {
		t.Fatal(err)
	}
}

// drive makes calls and fails the test on any failed RPC.
func drive(t *testing.T, conn *grpc.ClientConn, calls, conc int, ctxFor func(context.Context, int) context.Context) xdsenv.Counts {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, failed, err := xdsenv.Drive(ctx, conn, calls, conc, ctxFor)
	if failed > 0 {
		t.Fatalf("%d of %d RPCs failed, first: %v", failed, calls, err)
	}
	return c
}

// await drives batches until ok holds for one (an xDS update has reached
// the policy), failing after a bounded number of batches.
func await(t *testing.T, what string, conn *grpc.ClientConn, ctxFor func(context.Context, int) context.Context, ok func(xdsenv.Counts) bool) {
	t.Helper()
	var c xdsenv.Counts
	for range 200 {
		c = drive(t, conn, 60, 6, ctxFor)
		if ok(c) {
			return
		}
	}
	t.Fatalf("%s: never seen; last batch %v", what, c)
}

func name(i int) string { return fmt.Sprintf("backend-%d", i) }

// wantShare checks that backend i's share of c is in [lo, hi]; ideal says
// what it would be exactly.
func wantShare(t *testing.T, c xdsenv.Counts, i int, lo, hi float64, ideal string) {
	t.Helper()
	if s := c.Share(name(i)); s < lo || s > hi {
		t.Errorf("%s's share %.3f, want in [%.2f, %.2f] (%s)", name(i), s, lo, hi, ideal)
	}
}

func randomKey(ctx context.Context, _ int) context.Context {
	return ringhash.WithKey(ctx, fmt.Sprint(rand.Uint64()))
}

func TestXDSPickwiseP2C(t *testing.T) {
	svc := xdsenv.Service{Name: "p2c", Policy: "pickwise_p2c", Config: `{}`, Endpoints: endpoints(0, 0, 0)}
	conn := dial(t, svc)

	// RPCs flow through xds:///p2c and reach every backend.
	c := drive(t, conn, 300, 6, nil)
	t.Logf("even: %v", c)
	for i := range 3 {
		if c[name(i)] == 0 {
			t.Errorf("%s got no calls: %v", name(i), c)
		}
	}
	if c[name(3)] != 0 {
		t.Errorf("backend-3 is not in the EDS resource but got calls: %v", c)
	}

	// One slow backend: p2c, comparing in-flight counts, gives it little.
	setLatency(t, 0, 40*time.Millisecond)
	for i := 1; i < 3; i++ {
		setLatency(t, i, 2*time.Millisecond)
	}
	c = drive(t, conn, 1200, 12, nil)
	t.Logf("backend-0 slow (40ms vs 2ms): %v", c)
	if s := c.Share(name(0)); s > 0.15 {
		t.Errorf("slow backend's share %.3f, want < 0.15 (round robin: 0.33)", s)
	}
	setLatency(t, 0, 2*time.Millisecond)

	// EDS load_balancing_weight 1:1:4 reaches p2c as endpoint weights.
	svc.Endpoints = endpoints(1, 1, 4)
	update(t, svc)
	await(t, "weights 1:1:4", conn, nil, func(c xdsenv.Counts) bool { return c.Share(name(2)) > 0.5 })
	c = drive(t, conn, 1200, 12, nil)
	t.Logf("weights 1:1:4: %v", c)
	wantShare(t, c, 2, 0.5, 0.85, "4/6 = 0.67")
	for i := range 2 {
		wantShare(t, c, i, 0.05, 0.3, "1/6 = 0.17")
	}
	for i := range 3 {
		setLatency(t, i, 0)
	}

	// Endpoint-set updates from the server while a goroutine keeps calling:
	// no RPC fails.
	var (
		stop           atomic.Bool
		wg             sync.WaitGroup
		calls, failed  atomic.Int64
		firstErrMu     sync.Mutex
		firstErr       error
		bgCtx, bgClose = context.WithTimeout(context.Background(), time.Minute)
	)
	defer bgClose()
	for range 4 {
		wg.Go(func() {
			for !stop.Load() {
				_, err := server.Call(bgCtx, conn, "bg")
				calls.Add(1)
				if err != nil {
					failed.Add(1)
					firstErrMu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					firstErrMu.Unlock()
				}
			}
		})
	}
	// Add backend-3.
	svc.Endpoints = endpoints(1, 1, 1, 1)
	update(t, svc)
	await(t, "backend-3 added", conn, nil, func(c xdsenv.Counts) bool { return c[name(3)] > 0 })
	// Remove backend-0.
	svc.Endpoints = svc.Endpoints[1:]
	update(t, svc)
	await(t, "backend-0 removed", conn, nil, func(c xdsenv.Counts) bool { return c[name(0)] == 0 })
	c = drive(t, conn, 300, 6, nil)
	t.Logf("after the endpoint updates: %v", c)
	if c[name(0)] != 0 || c[name(1)] == 0 || c[name(2)] == 0 || c[name(3)] == 0 {
		t.Errorf("want backends 1, 2, 3 only: %v", c)
	}
	stop.Store(true)
	wg.Wait()
	t.Logf("background RPCs during the updates: %d, failed %d", calls.Load(), failed.Load())
	if failed.Load() != 0 {
		t.Errorf("%d background RPCs failed during endpoint updates, first: %v", failed.Load(), firstErr)
	}
}

func TestXDSPickwiseRingHash(t *testing.T) {
	svc := xdsenv.Service{Name: "ringhash", Policy: "pickwise_ring_hash", Config: `{}`, Endpoints: endpoints(1, 1, 4)}
	conn := dial(t, svc)
	c := drive(t, conn, 3000, 6, randomKey)
	t.Logf("ring, weights 1:1:4, random keys: %v", c)
	wantShare(t, c, 2, 0.55, 0.78, "4/6 = 0.67")
	for i := range 2 {
		wantShare(t, c, i, 0.08, 0.26, "1/6 = 0.17")
	}
	// The same key goes to the same backend.
	keyed := func(ctx context.Context, _ int) context.Context { return ringhash.WithKey(ctx, "user-42") }
	if c := drive(t, conn, 50, 5, keyed); len(c) != 1 {
		t.Errorf("one key reached several backends: %v", c)
	}

	// Add backend-3 (weight 1) while callers keep going: no RPC fails,
	// and most keys stay where they were.
	where := func() map[string]string {
		m := map[string]string{}
		for i := range 300 {
			key := fmt.Sprint("key-", i)
			b, err := server.Call(ringhash.WithKey(context.Background(), key), conn, key)
			if err != nil {
				t.Fatalf("key %s: %v", key, err)
			}
			m[key] = b
		}
		return m
	}
	before := where()
	var (
		stop   atomic.Bool
		wg     sync.WaitGroup
		failed atomic.Int64
	)
	for range 4 {
		wg.Go(func() {
			for i := 0; !stop.Load(); i++ {
				if _, err := server.Call(randomKey(context.Background(), i), conn, "bg"); err != nil {
					failed.Add(1)
				}
			}
		})
	}
	svc.Endpoints = endpoints(1, 1, 4, 1)
	update(t, svc)
	await(t, "backend-3 added", conn, randomKey, func(c xdsenv.Counts) bool { return c[name(3)] > 0 })
	stop.Store(true)
	wg.Wait()
	if failed.Load() != 0 {
		t.Errorf("%d RPCs failed during the endpoint update", failed.Load())
	}
	after := where()
	// The ring keeps minRingSize (1024) entries in all, so an old
	// endpoint's share of entries shrinks a little too and some keys move
	// between old endpoints; most of the movement is to the newcomer.
	moved, toNew := 0, 0
	for k, b := range before {
		if after[k] != b {
			moved++
			if after[k] == name(3) {
				toNew++
			}
		}
	}
	t.Logf("backend-3 added: %d of %d keys moved, %d of them to backend-3 (1/7 of keys is 43)", moved, len(before), toNew)
	if toNew == 0 || 3*toNew < moved {
		t.Errorf("%d of %d moved keys went to the new backend, want at least a third", toNew, moved)
	}
	if f := float64(moved) / float64(len(before)); f > 0.3 {
		t.Errorf("%.2f of keys moved, want <= 0.3 (modulo hashing: about 0.75)", f)
	}
}

// TestXDSPickwisePeakEWMA checks that pickwise_peak_ewma, selected by the
// cluster, sends little to a backend 20x slower than the others.
func TestXDSPickwisePeakEWMA(t *testing.T) {
	conn := dial(t, xdsenv.Service{Name: "peakewma", Policy: "pickwise_peak_ewma", Config: `{}`, Endpoints: endpoints(0, 0, 0)})
	setLatency(t, 0, 40*time.Millisecond)
	for i := 1; i < 3; i++ {
		setLatency(t, i, 2*time.Millisecond)
	}
	defer func() {
		for i := range 3 {
			setLatency(t, i, 0)
		}
	}()
	drive(t, conn, 300, 12, nil) // learn the latencies
	c := drive(t, conn, 1200, 12, nil)
	t.Logf("pickwise_peak_ewma, backend-0 slow (40ms vs 2ms): %v", c)
	if s := c.Share(name(0)); s > 0.1 {
		t.Errorf("slow backend's share %.3f, want < 0.1 (round robin: 0.33)", s)
	}
}

// TestXDSPickwiseORCA checks that pickwise_orca_wrr, selected by the
// cluster, follows the capacities the backends report per call (ORCA):
// rated 500, 500 and 2000 calls/s, each reporting served/rated as its
// utilization, so that its weight is its rating.
func TestXDSPickwiseORCA(t *testing.T) {
	conn := dial(t, xdsenv.Service{Name: "orcawrr", Policy: "pickwise_orca_wrr",
		Config: `{"blackoutPeriod": "0s", "weightUpdatePeriod": "100ms"}`, Endpoints: endpoints(0, 0, 0)})
	for i, rated := range []float64{500, 500, 2000} {
		setORCA(t, i, server.ORCAConfig{PerCall: true, Utilization: server.UtilizationRate, RatedQPS: rated})
	}
	defer func() {
		for i := range 3 {
			setORCA(t, i, server.ORCAConfig{})
		}
	}()
	await(t, "weights from the reports", conn, nil, func(c xdsenv.Counts) bool { return c.Share(name(2)) > 0.55 })
	c := drive(t, conn, 1200, 6, nil)
	t.Logf("pickwise_orca_wrr, rated 500/500/2000: %v", c)
	for i, want := range []float64{1.0 / 6, 1.0 / 6, 4.0 / 6} {
		wantShare(t, c, i, want-0.08, want+0.08, fmt.Sprintf("%.3f", want))
	}
}

// TestXDSPickwiseSubset checks that pickwise_subset, selected by the
// cluster with its child list, keeps the client on subsetSize backends.
func TestXDSPickwiseSubset(t *testing.T) {
	// grpc's xDS layer marshals the parsed config back to JSON and parses
	// it again; pickwise_subset's child list survives that.
	conn := dial(t, xdsenv.Service{Name: "subset", Policy: "pickwise_subset",
		Config: `{"subsetSize": 2, "childPolicy": [{"pickwise_p2c": {}}]}`, Endpoints: endpoints(0, 0, 0)})
	c := drive(t, conn, 300, 6, nil)
	t.Logf("pickwise_subset, 2 of 3: %v", c)
	used := 0
	for i := range 3 {
		if c[name(i)] > 0 {
			used++
		}
	}
	if used != 2 || c.Total() != 300 {
		t.Errorf("calls %v: want all 300 on exactly 2 backends", c)
	}
}

// TestXDSPickwiseShadow checks that pickwise_shadow, selected by the
// cluster with both child lists, survives grpc's round trip of the config
// and runs: round_robin places the calls, pickwise_p2c is asked on every
// pick, and a canary of 100% sends every call through pick_first, which
// keeps to one backend.
func TestXDSPickwiseShadow(t *testing.T) {
	conn := dial(t, xdsenv.Service{Name: "shadow", Policy: "pickwise_shadow",
		Config: `{"live": [{"round_robin": {}}], "candidate": [{"pickwise_p2c": {}}], "sampleRate": 1}`, Endpoints: endpoints(0, 0, 0)})
	c := drive(t, conn, 300, 6, nil)
	t.Logf("pickwise_shadow, round_robin live: %v", c)
	for i := range 3 {
		wantShare(t, c, i, 0.25, 0.42, "1/3")
	}
	var s shadow.Summary
	for _, got := range shadow.Summaries() {
		if got.Candidate == "pickwise_p2c" {
			s = got
		}
	}
	if s.Compared+s.NoPrediction < 300 || s.Live != "round_robin" {
		t.Errorf("summary %+v: want round_robin live and every call compared or unanswered", s)
	}

	canary := dial(t, xdsenv.Service{Name: "canary", Policy: "pickwise_shadow",
		Config: `{"live": [{"round_robin": {}}], "candidate": [{"pick_first": {}}], "sampleRate": 0, "canaryPercent": 100}`, Endpoints: endpoints(0, 0, 0)})
	// Until pick_first is READY beside round_robin, the canary's calls
	// fall back to live; wait for it before counting.
	deadline := time.Now().Add(20 * time.Second)
	for {
		c = drive(t, canary, 30, 1, nil)
		used := 0
		for i := range 3 {
			if c[name(i)] > 0 {
				used++
			}
		}
		if used == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the canary never placed every call: %v", c)
		}
	}
	c = drive(t, canary, 300, 6, nil)
	t.Logf("pickwise_shadow, a 100%% pick_first canary: %v", c)
	used := 0
	for i := range 3 {
		if c[name(i)] > 0 {
			used++
		}
	}
	if used != 1 || c.Total() != 300 {
		t.Errorf("calls %v: want all 300 on one backend, as pick_first places them", c)
	}
}

func setORCA(t *testing.T, i int, o server.ORCAConfig) {
	t.Helper()
	if err := env.Patch(i, func(b *server.Behavior) { b.ORCA = o }); err != nil {
		t.Fatal(err)
	}
}
