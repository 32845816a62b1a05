package p2c_test

// End-to-end tests: real gRPC channels over loopback to internal/fleet
// backends, with pickwise_p2c selected the way a user selects it (a blank
// import and a service config). Unit tests over the fake ClientConn check
// the picker's arithmetic; these check that the whole stack (resolver,
// engine, its per-endpoint pickfirst children, transport, Done callbacks) produces
// the behaviour the design promises. Distribution checks use tolerances
// wide enough for a noisy two-core machine under -race, and no assertion is
// about speed.
//
// Every package-level name here starts with e2e so it cannot collide with
// the package's other test files.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	_ "github.com/pickwise/pickwise/balancer/p2c" // registers pickwise_p2c
	"github.com/pickwise/pickwise/internal/fleet"
	"github.com/pickwise/pickwise/lbconfig"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	_ "google.golang.org/grpc/balancer/leastrequest" // the peer in TestEndToEndBlackHole
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/experimental/balancer/weight"
	"google.golang.org/grpc/resolver"
)

// e2eConfig selects pickwise_p2c with every default, as a user would.
const e2eConfig = `{"loadBalancingConfig":[{"pickwise_p2c":{}}]}`

const (
	// e2eTimeout bounds a whole test. Waits end as soon as their condition
	// holds, so it matters only when something is broken, and it is
	// generous because the race detector on a small machine is slow.
	e2eTimeout = 30 * time.Second
	// e2eCallTimeout bounds one RPC, so a stuck call fails the test
	// instead of hanging it.
	e2eCallTimeout = 10 * time.Second
)

// e2eScale is a test's setting: full in the full run, short under -short.
func e2eScale[T any](full, short T) T {
	if testing.Short() {
		return short
	}
	return full
}

// e2eShortParallel lets a test run beside the package's other such tests
// under -short (two at a time on two cores, -parallel's default). Only
// tests that count calls placed by the in-flight comparison call it: a
// neighbour's load slows the client's calls to every backend alike, so
// the counts it compares keep their order. Tests whose outcome hangs on when
// something happens (a ramp ended by the newcomer's answers, a kill the
// channel notices) keep the machine to themselves, as every test does in
// the full run.
func e2eShortParallel(t *testing.T) {
	if testing.Short() {
		t.Parallel()
	}
}

// e2eSetLatency gives every backend of f the same latency.
func e2eSetLatency(f *fleet.Fleet, d time.Duration) {
	for _, b := range f.Backends {
		b.SetBehavior(fleet.Behavior{Latency: d})
	}
}

// e2eWarmUp calls one at a time until every backend in want has answered,
// then zeroes the counts of f. The policy can only pick an endpoint once its
// connection is READY, so without this the first calls would measure
// connection setup rather than the policy. With nothing in flight every
// candidate ties, and the policy breaks ties at random, so each backend is
// reached after a few dozen calls.
func e2eWarmUp(t *testing.T, ctx context.Context, c *fleet.Client, f *fleet.Fleet, want ...*fleet.Backend) {
	t.Helper()
	seen := make(map[string]bool)
	for len(seen) < len(want) {
		name, err := c.Call(ctx, grpc.WaitForReady(true))
		if ctx.Err() != nil {
			t.Fatalf("warm-up: not every backend answered before the deadline; saw %v (last error: %v)", seen, err)
		}
		for _, b := range want {
			if err == nil && name == b.Name() {
				seen[name] = true
			}
		}
	}
	for _, b := range f.Backends {
		b.ResetCounts()
	}
}

// e2eLoad sends total wait-for-ready calls from workers goroutines and fails
// the test if the deadline cut the run short. Wait-for-ready keeps a
// connection that is still being set up from turning into a failure; errors
// returned by a backend still fail the call.
func e2eLoad(t *testing.T, ctx context.Context, c *fleet.Client, total, workers int) fleet.LoadResult {
	t.Helper()
	res := c.Load(ctx, total, workers, e2eCallTimeout, grpc.WaitForReady(true))
	if res.Total != total {
		t.Fatalf("Load made %d of %d calls before the deadline", res.Total, total)
	}
	return res
}

// e2eShare is b's fraction of the calls in res, failures included.
func e2eShare(res fleet.LoadResult, b *fleet.Backend) float64 {
	return float64(res.PerBackend[b.Name()]) / float64(res.Total)
}

// e2eShares formats every backend's share in fleet order, for logs and
// failure messages.
func e2eShares(res fleet.LoadResult, f *fleet.Fleet) string {
	parts := make([]string, len(f.Backends))
	for i, b := range f.Backends {
		parts[i] = fmt.Sprintf("%s %.1f%%", b.Name(), 100*e2eShare(res, b))
	}
	return strings.Join(parts, ", ")
}

// TestEndToEndEqualBackends checks that identical backends share the load
// evenly. The backends take 2ms per call so that calls overlap and the
// in-flight counts the policy compares are not all zero.
func TestEndToEndEqualBackends(t *testing.T) {
	e2eShortParallel(t)
	const (
		backends = 10
		total    = 5000
		workers  = 20
		fair     = 1.0 / backends
		// 3 points either way. The spread of a uniform random choice over
		// 5,000 calls is already below half a point; least-request keeps it
		// tighter still.
		tolerance = 0.03
	)
	ctx := fleet.Context(t, e2eTimeout)
	f := fleet.StartT(t, backends)
	c := fleet.DialT(t, f.Addrs(), e2eConfig)
	e2eWarmUp(t, ctx, c, f, f.Backends...)
	e2eSetLatency(f, 2*time.Millisecond)

	res := e2eLoad(t, ctx, c, total, workers)
	t.Logf("shares of %d RPCs: %s", res.Total, e2eShares(res, f))
	if res.Failed != 0 {
		t.Errorf("%d of %d calls failed, want none", res.Failed, res.Total)
	}
	lo, hi := 1.0, 0.0
	for _, b := range f.Backends {
		s := e2eShare(res, b)
		lo, hi = min(lo, s), max(hi, s)
		if s < fair-tolerance || s > fair+tolerance {
			t.Errorf("%s got %.1f%% of the calls, want %.0f%% ± %.0f%%", b.Name(), 100*s, 100*fair, 100*tolerance)
		}
	}
	t.Logf("spread: min %.1f%%, max %.1f%%", 100*lo, 100*hi)
}

// TestEndToEndSlowBackend checks that a backend ten times slower than its
// peers gets less than half its fair share. Its calls last longer, so its
// in-flight count stays higher and it loses most of the comparisons it is
// drawn into.
func TestEndToEndSlowBackend(t *testing.T) {
	e2eShortParallel(t)
	const (
		backends = 10
		total    = 2000
		workers  = 20
		fair     = 1.0 / backends
	)
	ctx := fleet.Context(t, e2eTimeout)
	f := fleet.StartT(t, backends)
	c := fleet.DialT(t, f.Addrs(), e2eConfig)
	e2eWarmUp(t, ctx, c, f, f.Backends...)
	// 10ms rather than less, so that the client's own cost per call, which
	// the race detector multiplies, stays small beside the latency and the
	// slow backend really is about ten times slower.
	e2eSetLatency(f, 10*time.Millisecond)
	slow := f.Backends[0]
	slow.SetBehavior(fleet.Behavior{Latency: 100 * time.Millisecond})

	res := e2eLoad(t, ctx, c, total, workers)
	if res.Failed != 0 {
		t.Errorf("%d of %d calls failed, want none", res.Failed, res.Total)
	}
	share := e2eShare(res, slow)
	t.Logf("slow backend share: %.1f%% of %d RPCs (fair share %.0f%%); all: %s", 100*share, res.Total, 100*fair, e2eShares(res, f))
	if share >= fair/2 {
		t.Errorf("slow backend got %.1f%% of the calls, want less than half its fair share (%.0f%%)", 100*share, 100*fair/2)
	}
}

// TestEndToEndBlackHole is the black-hole failure: one backend fails every
// call at once while its peers take 20ms. Any balancer that compares
// in-flight counts sees the failing backend as the idlest and feeds it about
// 2/N of the calls; pickwise_p2c's failure penalty must hold it to at most
// 1/N. The same scenario runs without the penalty and with grpc-go's
// least_request_experimental, for comparison in the log.
func TestEndToEndBlackHole(t *testing.T) {
	e2eShortParallel(t)
	const fair = 1.0 / e2eBlackHoleBackends
	variants := []struct {
		name, label, config string
	}{
		{"penalty_on", "pickwise_p2c (failure penalty on, the default)", e2eConfig},
		{"penalty_off", "pickwise_p2c (failure penalty off)", `{"loadBalancingConfig":[{"pickwise_p2c":{"failurePenalty":{"enabled":false}}}]}`},
		{"least_request", "least_request_experimental (grpc-go)", `{"loadBalancingConfig":[{"least_request_experimental":{}}]}`},
	}
	shares := make(map[string]float64)
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			hits, total := e2eBlackHole(t, v.config)
			share := float64(hits) / float64(total)
			shares[v.name] = share
			t.Logf("black-hole share: %.1f%% for %s (%d of %d RPCs, fair share %.0f%%)",
				100*share, v.label, hits, total, 100*fair)
		})
	}
	if t.Failed() {
		return // a variant did not finish, so there is nothing to compare
	}
	on, off := shares["penalty_on"], shares["penalty_off"]
	if on > fair {
		t.Errorf("with the failure penalty the black hole got %.1f%% of the calls, want at most %.0f%%", 100*on, 100*fair)
	}
	if on >= off {
		t.Errorf("with the failure penalty the black hole got %.1f%% of the calls, not less than the %.1f%% it got without", 100*on, 100*off)
	}
}

// e2eBlackHoleBackends is the fleet size of TestEndToEndBlackHole.
const e2eBlackHoleBackends = 10

// e2eBlackHole runs the black-hole scenario under serviceConfig and returns
// how many calls reached the black hole, out of how many. The short run
// makes half the calls: the penalty's few calls to the hole (under 1% of
// 1,500) are then under 2% of them, still far below 1/N, and the 2/N or so
// it gets without the penalty, about 130 of 750, still stands well above.
func e2eBlackHole(t *testing.T, serviceConfig string) (hits, total int) {
	t.Helper()
	const workers = 20
	calls := e2eScale(1500, 750)
	ctx := fleet.Context(t, e2eTimeout)
	f := fleet.StartT(t, e2eBlackHoleBackends)
	c := fleet.DialT(t, f.Addrs(), serviceConfig)
	e2eWarmUp(t, ctx, c, f, f.Backends...)
	e2eSetLatency(f, 20*time.Millisecond)
	hole := f.Backends[0]
	hole.SetBehavior(fleet.Behavior{ErrorRate: 1, ErrorCode: codes.Unavailable, ErrorLatency: 0})

	res := e2eLoad(t, ctx, c, calls, workers)
	hits = res.PerBackend[hole.Name()]
	// Every failure must come from the black hole: the healthy backends
	// never fail, and a failure without the backend's trailer would mean
	// the channel itself broke.
	if res.Failed != hits {
		t.Errorf("%d calls failed but the black hole answered %d; all: %s", res.Failed, hits, e2eShares(res, f))
	}
	return hits, res.Total
}

// TestEndToEndListedCode is one host of four answering PERMISSION_DENIED
// to every call at once (a broken credential on that machine) while its
// peers take 20ms. By default the code is the caller's problem, and the
// fast answers make the host the idlest of its pairs, as a black hole is:
// it draws 1/N of the calls or more. With the code listed in
// failurePenalty.codes it is a black hole the penalty and ejection act
// on. grpc-go's least_request_experimental runs beside, for the log.
func TestEndToEndListedCode(t *testing.T) {
	e2eShortParallel(t)
	const backends = 4
	variants := []struct {
		name, config string
	}{
		{"default_codes", e2eConfig},
		{"listed", `{"loadBalancingConfig":[{"pickwise_p2c":{"failurePenalty":{"codes":["UNAVAILABLE","INTERNAL","UNKNOWN","DEADLINE_EXCEEDED","RESOURCE_EXHAUSTED","PERMISSION_DENIED"]}}}]}`},
		{"least_request", `{"loadBalancingConfig":[{"least_request_experimental":{}}]}`},
	}
	shares := make(map[string]float64)
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			const workers = 20
			calls := e2eScale(1500, 750)
			ctx := fleet.Context(t, e2eTimeout)
			f := fleet.StartT(t, backends)
			c := fleet.DialT(t, f.Addrs(), v.config)
			e2eWarmUp(t, ctx, c, f, f.Backends...)
			e2eSetLatency(f, 20*time.Millisecond)
			denier := f.Backends[0]
			denier.SetBehavior(fleet.Behavior{ErrorRate: 1, ErrorCode: codes.PermissionDenied})
			res := e2eLoad(t, ctx, c, calls, workers)
			shares[v.name] = e2eShare(res, denier)
			t.Logf("%s: the denying host's share %.1f%% of %d calls (fair %.0f%%); all: %s", v.name, 100*shares[v.name], res.Total, 100.0/backends, e2eShares(res, f))
		})
	}
	if t.Failed() {
		return
	}
	if s := shares["default_codes"]; s < 0.8/backends {
		t.Errorf("default codes: the denying host got %.1f%% of the calls, want about 1/N (%.0f%%) or more", 100*s, 100.0/backends)
	}
	if s := shares["listed"]; s > 0.05 {
		t.Errorf("PERMISSION_DENIED listed: the denying host got %.1f%% of the calls, want < 5%%", 100*s)
	}
}

// TestEndToEndMembershipChange checks that the policy follows the resolver:
// a removed backend gets no call once the update has been applied, and an
// added one gets its share: at once with the defaults, as it answers as
// fast as the others and so proves warm, and its ramped share when its
// ramp goes by time alone.
func TestEndToEndMembershipChange(t *testing.T) {
	t.Run("default", func(t *testing.T) {
		e2eMembershipChange(t, e2eConfig, func(time.Duration) (float64, float64) {
			// Its fair share is a third; its first answers end its ramp
			// within a few calls.
			return 0.2, 0.5
		})
	})
	t.Run("timeOnly", func(t *testing.T) {
		const cfg = `{"loadBalancingConfig": [{"pickwise_p2c": {"slowStart": {"timeOnly": true}}}]}`
		e2eMembershipChange(t, cfg, func(since time.Duration) (float64, float64) {
			// It starts at 10% of its weight, a share of 0.1/2.1 against
			// the two others, and its factor can have grown by no more
			// than the time since the update over the 30 s window. Half
			// the first share is a loose floor, and half as much again as
			// the largest a loose ceiling.
			ramp := max(0.1, float64(since)/float64(lbconfig.DefaultSlowStartWindow))
			return 0.1 / 2.1 / 2, 1.5 * ramp / (2 + ramp)
		})
	})
}

// e2eMembershipChange is TestEndToEndMembershipChange under serviceConfig;
// bounds gives the added backend's least and most share, from the time
// since the update.
func e2eMembershipChange(t *testing.T, serviceConfig string, bounds func(since time.Duration) (low, high float64)) {
	const workers = 8
	ctx := fleet.Context(t, e2eTimeout)
	f := fleet.StartT(t, 4)
	removed, added := f.Backends[0], f.Backends[3]
	c := fleet.DialT(t, fleet.AddrsOf(f.Backends[:3]), serviceConfig)
	e2eWarmUp(t, ctx, c, f, f.Backends[:3]...)
	e2eSetLatency(f, 2*time.Millisecond)

	updated := time.Now()
	c.SetAddrs(fleet.AddrsOf(f.Backends[1:]))
	// SetAddrs returns once the balancer has published a picker without
	// the removed backend, and nothing is in flight, so from here on not a
	// single call may reach it.
	for _, b := range f.Backends {
		b.ResetCounts()
	}

	// The added backend needs a moment to connect, during which the others
	// take every call; keep the load going until it has answered.
	for added.Served() == 0 {
		if ctx.Err() != nil {
			t.Fatalf("the added backend got no call before the deadline; served: %v", f.Served())
		}
		if res := e2eLoad(t, ctx, c, 100, workers); res.Failed != 0 {
			t.Fatalf("%d of %d calls failed while the added backend connected", res.Failed, res.Total)
		}
	}

	res := e2eLoad(t, ctx, c, 900, workers)
	t.Logf("after the update: %s", e2eShares(res, f))
	if res.Failed != 0 {
		t.Errorf("%d of %d calls failed, want none", res.Failed, res.Total)
	}
	if n := removed.Served(); n != 0 {
		t.Errorf("removed backend served %d calls after the update, want 0", n)
	}
	low, high := bounds(time.Since(updated))
	if s := e2eShare(res, added); s < low || s > high {
		t.Errorf("added backend got %.1f%% of the calls, want %.1f%% to %.1f%%", 100*s, 100*low, 100*high)
	}
}

// TestEndToEndChurnRace races callers against a resolver that keeps changing
// the endpoint list, for the race detector and for the invariant that the
// policy only ever picks endpoints the resolver gave it. Two backends are
// out of every list during the churn: the outsider never was in one, and
// the retired one was connected and served calls before it was removed, so
// a picker or endpoint state that outlived its removal would still send it
// calls. Any call either serves is a call the balancer should not have
// placed. Backend 0 stays in every list so that callers always have an
// endpoint to make progress on, while the other four join and leave, often
// before their connection is even up. The short run churns for a second,
// still hundreds of updates.
func TestEndToEndChurnRace(t *testing.T) {
	const (
		members = 5
		callers = 8
	)
	churnFor := e2eScale(3*time.Second, time.Second)
	ctx := fleet.Context(t, e2eTimeout)
	f := fleet.StartT(t, members+2)
	pool, retired, outsider := f.Backends[:members], f.Backends[members], f.Backends[members+1]
	initial := f.Backends[:members+1] // the pool and the retired backend
	c := fleet.DialT(t, fleet.AddrsOf(initial), e2eConfig)
	e2eWarmUp(t, ctx, c, f, initial...)
	// Nothing is in flight and SetAddrs returns once the balancer has
	// dropped the retired backend, so it may not serve another call.
	c.SetAddrs(fleet.AddrsOf(pool))
	retired.ResetCounts()
	// A millisecond per call keeps calls in flight while endpoints are
	// removed under them.
	e2eSetLatency(f, time.Millisecond)

	var (
		stop     atomic.Bool
		wg       sync.WaitGroup
		mu       sync.Mutex // guards served, failures and firstErr
		served   = make(map[string]int)
		failures int
		firstErr error
	)
	for range callers {
		wg.Go(func() {
			for !stop.Load() && ctx.Err() == nil {
				cctx, cancel := context.WithTimeout(ctx, e2eCallTimeout)
				name, err := c.Call(cctx, grpc.WaitForReady(true))
				cancel()
				mu.Lock()
				served[name]++
				if err != nil {
					failures++
					if firstErr == nil {
						firstErr = err
					}
				}
				mu.Unlock()
			}
		})
	}
	// Stop the callers even if the test fails early, before the client
	// they use is closed.
	defer func() {
		stop.Store(true)
		wg.Wait()
	}()

	// The seed fixes the sequence of subsets; the interleaving with the
	// callers is up to the scheduler, which is the point.
	rnd := rand.New(rand.NewPCG(1, 2))
	updates := 0
	for end := time.Now().Add(churnFor); time.Now().Before(end) && ctx.Err() == nil; updates++ {
		subset := []*fleet.Backend{pool[0]}
		for _, b := range pool[1:] {
			if rnd.IntN(2) == 0 {
				subset = append(subset, b)
			}
		}
		// Order must not matter to the policy.
		rnd.Shuffle(len(subset), func(i, j int) { subset[i], subset[j] = subset[j], subset[i] })
		c.SetAddrs(fleet.AddrsOf(subset))
		time.Sleep(time.Duration(rnd.IntN(3000)) * time.Microsecond)
	}
	stop.Store(true)
	wg.Wait()

	calls := 0
	for _, n := range served {
		calls += n
	}
	t.Logf("%d resolver updates, %d calls: %v", updates, calls, served)
	if failures != 0 {
		t.Errorf("%d of %d calls failed, want none; first error: %v", failures, calls, firstErr)
	}
	if calls == 0 {
		t.Error("no call completed during the churn")
	}
	if n := outsider.Served(); n != 0 {
		t.Errorf("%s, never in the resolver's list, served %d calls", outsider.Name(), n)
	}
	if n := retired.Served(); n != 0 {
		t.Errorf("%s, removed from the resolver's list before the churn, served %d calls", retired.Name(), n)
	}
}

// TestEndToEndBackendKilled kills a backend under load and brings it back on
// the same address. Only the calls in flight on it when it dies may fail;
// wait-for-ready calls made after the channel has noticed go elsewhere and
// succeed; and once restarted it gets traffic again, even though the failed
// calls raised its failure penalty and only the policy's probes can lower it.
func TestEndToEndBackendKilled(t *testing.T) {
	const (
		backends = 5
		workers  = 10
		// How long the restarted backend may take to get a call. It must
		// reconnect (backoff at most 200ms below) and then win picks
		// despite its penalty, first through probes.
		rejoinTimeout = 10 * time.Second
	)
	ctx := fleet.Context(t, e2eTimeout)
	f := fleet.StartT(t, backends)
	victim := f.Backends[0]
	watch := &e2eCloseWatch{addr: victim.Addr(), closed: make(chan struct{})}
	c := fleet.DialT(t, f.Addrs(), e2eConfig,
		// The default backoff starts at one second; a short one lets the
		// channel find the restarted backend quickly.
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 50 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 200 * time.Millisecond},
			MinConnectTimeout: time.Second,
		}),
		grpc.WithContextDialer(watch.dial))
	e2eWarmUp(t, ctx, c, f, f.Backends...)
	e2eSetLatency(f, 5*time.Millisecond)

	var (
		stop, noticed atomic.Bool
		wg            sync.WaitGroup
		late          atomic.Int64 // calls started after the channel noticed the kill
		mu            sync.Mutex   // guards the two slices
		early, failed []error      // failures of calls started before / after
	)
	for range workers {
		wg.Go(func() {
			for !stop.Load() && ctx.Err() == nil {
				after := noticed.Load()
				cctx, cancel := context.WithTimeout(ctx, e2eCallTimeout)
				_, err := c.Call(cctx, grpc.WaitForReady(true))
				cancel()
				if after {
					late.Add(1)
				}
				if err != nil {
					mu.Lock()
					if after {
						failed = append(failed, err)
					} else {
						early = append(early, err)
					}
					mu.Unlock()
				}
			}
		})
	}
	defer func() {
		stop.Store(true)
		wg.Wait()
	}()

	fleet.WaitFor(t, ctx, "the victim to serve calls under load", func() bool { return victim.Served() >= 50 })
	watch.arm()
	victim.Stop()
	// Stop returns when the server is gone, but the channel learns it only
	// when its transport reads the end of the connection. A call made in
	// between is sent on a dead connection and fails like the calls that
	// were in flight; grpc retries transparently only a call whose stream
	// could not be created, which is the case once the transport has shut
	// itself down and closed its socket. That moment is the kill as the
	// client sees it.
	select {
	case <-watch.closed:
	case <-ctx.Done():
		t.Fatal("the channel never closed its connection to the killed backend")
	}
	noticed.Store(true)
	fleet.WaitFor(t, ctx, "200 calls after the kill", func() bool { return late.Load() >= 200 })

	victim.ResetCounts()
	if err := victim.Restart(); err != nil {
		t.Fatalf("Restart: %v", err)
	}
	restarted := time.Now()
	rctx, cancel := context.WithTimeout(ctx, rejoinTimeout)
	defer cancel()
	fleet.WaitFor(t, rctx, "the restarted backend to get a call", func() bool { return victim.Served() > 0 })
	t.Logf("restarted backend got its first call %v after Restart", time.Since(restarted).Round(time.Millisecond))

	stop.Store(true)
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	t.Logf("%d calls failed around the kill, %d after it of %d", len(early), len(failed), late.Load())
	if len(early) > workers {
		t.Errorf("%d calls failed around the kill, want at most %d (one in flight per worker): %v", len(early), workers, early)
	}
	if len(failed) != 0 {
		t.Errorf("%d calls started after the channel noticed the kill failed, want none: %v", len(failed), failed)
	}
}

// e2eCloseWatch dials like grpc's default dialer and reports when the
// channel closes its connection to addr after arm, which marks the moment
// the channel has taken in that the backend is gone.
type e2eCloseWatch struct {
	addr   string
	closed chan struct{}
	armed  atomic.Bool
	once   sync.Once
}

func (w *e2eCloseWatch) arm() { w.armed.Store(true) }

func (w *e2eCloseWatch) dial(ctx context.Context, addr string) (net.Conn, error) {
	conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	if err != nil || addr != w.addr {
		return conn, err
	}
	return &e2eWatchedConn{Conn: conn, w: w}, nil
}

// e2eWatchedConn is a connection whose Close e2eCloseWatch observes. grpc's
// client transport marks itself closing before it closes the socket, so new
// streams are refused (and transparently retried elsewhere) from then on.
type e2eWatchedConn struct {
	net.Conn
	w *e2eCloseWatch
}

func (c *e2eWatchedConn) Close() error {
	if c.w.armed.Load() {
		c.w.once.Do(func() { close(c.w.closed) })
	}
	return c.Conn.Close()
}

// TestEndToEndWeights pushes endpoint weights the way xDS does, through the
// weight attribute, and checks that the heaviest backend gets clearly more
// calls. With cost = (inFlight+1)/weight the weight-4 backend carries about
// four times the in-flight calls of each weight-1 one; two choices out of
// three exclude it from a third of the picks, which caps its share at 2/3.
func TestEndToEndWeights(t *testing.T) {
	e2eShortParallel(t)
	const (
		total   = 2400
		workers = 24
	)
	weights := []uint32{1, 1, 4}
	ctx := fleet.Context(t, e2eTimeout)
	f := fleet.StartT(t, len(weights))
	c := fleet.DialT(t, f.Addrs(), e2eConfig)
	e2eWarmUp(t, ctx, c, f, f.Backends...)
	e2eSetLatency(f, 5*time.Millisecond)

	eps := make([]resolver.Endpoint, len(f.Backends))
	for i, b := range f.Backends {
		ep := resolver.Endpoint{Addresses: []resolver.Address{{Addr: b.Addr()}}}
		eps[i] = weight.Set(ep, weight.EndpointInfo{Weight: weights[i]})
	}
	// Like SetAddrs, UpdateState returns once the balancer has the update.
	// The endpoints are the same ones, now with weights, so their
	// connections are kept.
	c.Resolver.UpdateState(resolver.State{Endpoints: eps})

	res := e2eLoad(t, ctx, c, total, workers)
	t.Logf("shares with weights %v: %s", weights, e2eShares(res, f))
	if res.Failed != 0 {
		t.Errorf("%d of %d calls failed, want none", res.Failed, res.Total)
	}
	heavy := e2eShare(res, f.Backends[2])
	for _, b := range f.Backends[:2] {
		if s := e2eShare(res, b); heavy <= 2*s {
			t.Errorf("weight-4 backend got %.1f%% of the calls, not more than twice the %.1f%% of weight-1 %s", 100*heavy, 100*s, b.Name())
		}
	}
}
