package peakewma_test

// End-to-end tests: real gRPC channels over loopback to internal/fleet
// backends, with pickwise_peak_ewma selected the way a user selects it (a
// blank import and a service config). The picker tests check the cost
// arithmetic in virtual time; these check that the whole stack (resolver,
// engine, its per-endpoint pickfirst children, transport, Done callbacks timed on
// the wall clock) produces the behaviour the policy promises: a backend
// that turns slow is dropped after its first slow answers and tried again
// once it recovered, a backend that fails fast is not mistaken for a fast
// one, and a newcomer is not flooded before it has answered.
//
// Shares have tolerances wide enough for a noisy two-core machine under
// -race, and nothing asserts how fast a call is. The one assertion that
// involves time, recovery within three decay times, is about the policy's
// own clock: its latency average forgets at the rate decayTime sets,
// whatever the machine's speed.
//
// Every package-level name here starts with e2e so it cannot collide with
// the package's other test files.

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	_ "github.com/pickwise/pickwise/balancer/p2c" // a column of TestEndToEndSlowPhase
	"github.com/pickwise/pickwise/balancer/peakewma"
	"github.com/pickwise/pickwise/internal/fleet"
	"google.golang.org/grpc"
	_ "google.golang.org/grpc/balancer/leastrequest" // the peer in TestEndToEndBlackHole
	_ "google.golang.org/grpc/balancer/roundrobin"   // a column of TestEndToEndSlowPhase
	"google.golang.org/grpc/codes"
)

// e2eServiceConfig selects policy with its JSON config.
func e2eServiceConfig(policy, config string) string {
	return fmt.Sprintf(`{"loadBalancingConfig":[{%q:%s}]}`, policy, config)
}

const (
	// e2eTimeout bounds one scenario run. Waits end as soon as their
	// condition holds, so it matters only when something is broken, and it
	// is generous because the race detector on a small machine is slow.
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

// e2eComparisonParallel lets a subtest that runs a policy for comparison
// run beside its test's other comparison subtests under -short (two at a
// time on two cores, -parallel's default). Such a subtest asserts only
// that its calls do not fail, which a neighbour's load does not change;
// the pickwise_peak_ewma subtest, whose shares follow latency, never calls
// it and runs before them, alone. The full run keeps every subtest to
// itself.
func e2eComparisonParallel(t *testing.T) {
	if testing.Short() {
		t.Parallel()
	}
}

// e2eSpread gives the backends of bs fixed latencies evenly spaced over
// [median-2ms, median+2ms], in fleet order. fleet.Behavior has no jitter;
// distinct latencies keep the healthy backends from being exact copies of
// each other, so a policy that compares latencies has real differences to
// see, as it would in a fleet.
func e2eSpread(bs []*fleet.Backend, median time.Duration) {
	for i, b := range bs {
		d := median - 2*time.Millisecond
		if len(bs) > 1 {
			d += time.Duration(i) * 4 * time.Millisecond / time.Duration(len(bs)-1)
		}
		b.SetBehavior(fleet.Behavior{Latency: d})
	}
}

// e2eCall is one RPC as its caller saw it, in time since the driver began.
type e2eCall struct {
	start, end time.Duration
	backend    string // "" when the call never reached a backend
	err        error
}

// e2eDriver keeps workers goroutines calling in a closed loop, each starting
// its next call when the last ends, and records every call. A fixed number of
// callers, rather than a fixed rate, keeps the load steady on a machine
// whose speed the test does not know, and keeps calls in flight, which
// every cost the policies compare counts.
type e2eDriver struct {
	origin time.Time
	stop   atomic.Bool
	wg     sync.WaitGroup
	// answered counts completed calls per backend name, so a test can wait
	// for a backend's first answer while the load runs.
	answered sync.Map // string -> *atomic.Int64
	// logs[i] is written only by worker i until Stop.
	logs [][]e2eCall
}

// e2eStart starts the driver. Calls wait for a READY connection, so a
// backend still connecting delays calls rather than failing them; errors a
// backend returns still fail the call.
func e2eStart(ctx context.Context, c *fleet.Client, workers int) *e2eDriver {
	d := &e2eDriver{origin: time.Now(), logs: make([][]e2eCall, workers)}
	for w := range workers {
		d.wg.Go(func() {
			for !d.stop.Load() && ctx.Err() == nil {
				cctx, cancel := context.WithTimeout(ctx, e2eCallTimeout)
				start := d.now()
				name, err := c.Call(cctx, grpc.WaitForReady(true))
				end := d.now()
				cancel()
				if name != "" {
					n, _ := d.answered.LoadOrStore(name, new(atomic.Int64))
					n.(*atomic.Int64).Add(1)
				}
				d.logs[w] = append(d.logs[w], e2eCall{start: start, end: end, backend: name, err: err})
			}
		})
	}
	return d
}

// now is the time since the driver began.
func (d *e2eDriver) now() time.Duration { return time.Since(d.origin) }

// answers is how many calls backend has completed so far.
func (d *e2eDriver) answers(backend string) int64 {
	n, ok := d.answered.Load(backend)
	if !ok {
		return 0
	}
	return n.(*atomic.Int64).Load()
}

// Stop stops the workers, waits for their last calls and returns every
// call, in order of start. It is safe to call more than once; later calls
// return nil.
func (d *e2eDriver) Stop() []e2eCall {
	if d.stop.Swap(true) {
		return nil
	}
	d.wg.Wait()
	var all []e2eCall
	for _, l := range d.logs {
		all = append(all, l...)
	}
	slices.SortFunc(all, func(a, b e2eCall) int { return cmp.Compare(a.start, b.start) })
	return all
}

// e2eSleep waits for d, or until ctx ends.
func e2eSleep(ctx context.Context, d time.Duration) {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
	case <-timer.C:
	}
}

// e2eWarmUp keeps d's load running until every backend of want has
// answered, so that measurements start with every connection READY and
// every backend measured.
//
// The warm-up is the measurement's own load, with the backends already at
// their latency, rather than one call at a time with instant backends (as
// pickwise_p2c's tests warm up): one call at a time leaves every cost with
// nothing in flight, and whether an endpoint that has never answered is
// tried then depends on how its cost compares with measured latencies,
// which is TestEndToEndEveryBackendReachedAtLowLoad's subject, not a
// warm-up's.
func e2eWarmUp(t *testing.T, ctx context.Context, d *e2eDriver, want ...*fleet.Backend) {
	t.Helper()
	fleet.WaitFor(t, ctx, "every backend to answer during the warm-up", func() bool {
		for _, b := range want {
			if d.answers(b.Name()) == 0 {
				return false
			}
		}
		return true
	})
}

// e2eWindow is what calls started in [from, to) did.
type e2eWindow struct {
	total, failed int
	per           map[string]int
	latencies     []time.Duration // successful calls, sorted
}

// e2eTally sums up the calls that started in [from, to).
func e2eTally(calls []e2eCall, from, to time.Duration) e2eWindow {
	w := e2eWindow{per: map[string]int{}}
	for _, c := range calls {
		if c.start < from || c.start >= to {
			continue
		}
		w.total++
		if c.backend != "" {
			w.per[c.backend]++
		}
		if c.err != nil {
			w.failed++
			continue
		}
		w.latencies = append(w.latencies, c.end-c.start)
	}
	slices.Sort(w.latencies)
	return w
}

// share is backend's fraction of the window's calls, failures included.
func (w e2eWindow) share(backend string) float64 {
	if w.total == 0 {
		return 0
	}
	return float64(w.per[backend]) / float64(w.total)
}

// quantile is the q-quantile of the window's successful latencies, rounded
// for logs.
func (w e2eWindow) quantile(q float64) time.Duration {
	if len(w.latencies) == 0 {
		return 0
	}
	i := min(max(int(q*float64(len(w.latencies))+0.999999)-1, 0), len(w.latencies)-1)
	return w.latencies[i].Round(100 * time.Microsecond)
}

// e2eSlowPhase* shape TestEndToEndSlowPhase.
const (
	e2eSlowBackends = 11
	e2eSlowWorkers  = 16
	e2eSlowMedian   = 20 * time.Millisecond
	e2eSlowLatency  = 250 * time.Millisecond
	// e2eSlowDecay is pickwise_peak_ewma's decayTime for the test: short,
	// so that recovery fits in a few seconds.
	e2eSlowDecay = time.Second
	// e2eSlowRecovered is the last phase of the run, after the slow one:
	// it must cover the three decay times recovery may take.
	e2eSlowRecovered = 3 * e2eSlowDecay
	// e2eSlowWindow and e2eSlowStep are the sliding window the recovered
	// backend's share is measured over, and how far it slides each step.
	// 500ms holds a few hundred calls, enough for the share to mean
	// something, and is short beside the decay time.
	e2eSlowWindow = 500 * time.Millisecond
	e2eSlowStep   = 50 * time.Millisecond
)

// e2eSlowPhases are the lengths of the first two phases of the run,
// healthy and slow. The full run gives each three decay times, as the
// last. The short run keeps one decay time of health, which takes the
// latency averages most of the way from their first samples to the
// steady state, and 1.5s of slowness, over a thousand calls: the slow
// backend's calls are the few placed before its first slow answer and a
// probe every decay time or so, well under the 2% bound at either length.
func e2eSlowPhases() (healthy, slow time.Duration) {
	return e2eScale(3*e2eSlowDecay, e2eSlowDecay), e2eScale(3*e2eSlowDecay, 1500*time.Millisecond)
}

// TestEndToEndSlowPhase is Linkerd's Peak EWMA experiment on loopback: 11
// backends answer in 18-22ms, and for the middle phase of the run one of
// them takes 250ms. pickwise_p2c and round_robin run the same schedule for
// comparison. pickwise_peak_ewma must stop using the slow backend once its
// first slow answers arrive, and use it again once it is healthy: its
// latency average decays while it gets no calls, so it is probed, and a
// fast probe pulls the average down.
func TestEndToEndSlowPhase(t *testing.T) {
	const fair = 1.0 / e2eSlowBackends
	variants := []struct {
		name, config string
	}{
		{peakewma.Name, e2eServiceConfig(peakewma.Name, fmt.Sprintf(`{"decayTime":%q}`, e2eSlowDecay))},
		{"pickwise_p2c", e2eServiceConfig("pickwise_p2c", `{}`)},
		{"round_robin", e2eServiceConfig("round_robin", `{}`)},
	}
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			if v.name != peakewma.Name {
				e2eComparisonParallel(t)
			}
			r := e2eSlowPhaseRun(t, v.config)
			in := e2eTally(r.calls, r.from, r.to)
			share := in.share(r.slow)
			recovered, ok := r.recovery(fair / 2)
			after := "not within the run"
			if ok {
				after = recovered.Round(10 * time.Millisecond).String()
			}
			t.Logf("slow-phase: %-18s p50 %v, p99 %v, p99.9 %v; slow backend %.2f%% of %d RPCs (fair %.1f%%); back to half its fair share %s after it recovered",
				v.name, in.quantile(0.5), in.quantile(0.99), in.quantile(0.999), 100*share, in.total, 100*fair, after)
			if in.failed != 0 {
				t.Errorf("%d of %d calls in the slow phase failed, want none", in.failed, in.total)
			}
			if v.name != peakewma.Name {
				return // a column for comparison only
			}
			// A few calls reach it before its first slow answer arrives,
			// and a probe every decay time or so after that: a few dozen
			// of a few thousand at most.
			if share >= 0.02 {
				t.Errorf("slow backend got %.2f%% of the calls while slow, want below 2%%", 100*share)
			}
			if limit := 3 * e2eSlowDecay; !ok || recovered > limit {
				t.Errorf("recovered backend's share reached half its fair share (%.1f%%) %s after it recovered, want within %v (3 x decayTime)",
					100*fair/2, after, limit)
			}
		})
	}
}

// e2eSlowRun is one run of the slow-phase schedule: every call started in
// its three phases, the slow backend's name, and when its slow phase began
// and ended and the run ended, on the calls' clock.
type e2eSlowRun struct {
	calls         []e2eCall
	slow          string
	from, to, end time.Duration
}

// e2eSlowPhaseRun runs the slow-phase schedule under serviceConfig.
func e2eSlowPhaseRun(t *testing.T, serviceConfig string) e2eSlowRun {
	t.Helper()
	ctx := fleet.Context(t, e2eTimeout)
	f := fleet.StartT(t, e2eSlowBackends)
	// The middle backend by latency, so the slow one is the fleet's median
	// before and after its slow phase.
	victim := f.Backends[e2eSlowBackends/2]
	e2eSpread(f.Backends, e2eSlowMedian)
	healthy := victim.Behavior()
	c := fleet.DialT(t, f.Addrs(), serviceConfig)
	d := e2eStart(ctx, c, e2eSlowWorkers)
	defer d.Stop() // if the test fails before the end
	e2eWarmUp(t, ctx, d, f.Backends...)

	r := e2eSlowRun{slow: victim.Name()}
	healthyFor, slowFor := e2eSlowPhases()
	begin := d.now()
	e2eSleep(ctx, healthyFor)
	r.from = d.now()
	victim.SetBehavior(fleet.Behavior{Latency: e2eSlowLatency})
	e2eSleep(ctx, slowFor)
	r.to = d.now()
	victim.SetBehavior(healthy)
	e2eSleep(ctx, e2eSlowRecovered)
	r.end = d.now()
	all := d.Stop()
	if ctx.Err() != nil {
		t.Fatal("the run did not finish before the deadline")
	}
	// Only calls started in the three phases count: not the warm-up's, nor
	// the last ones, started while the driver stopped.
	for _, c := range all {
		if c.start >= begin && c.start < r.end {
			r.calls = append(r.calls, c)
		}
	}
	return r
}

// recovery slides a window of e2eSlowWindow, e2eSlowStep at a time, over
// the calls started after the slow phase, and returns how long after the
// slow phase the first window ended in which the slow backend's share
// reached want, and whether one did before the run ended.
func (r e2eSlowRun) recovery(want float64) (time.Duration, bool) {
	for from := r.to; from+e2eSlowWindow <= r.end; from += e2eSlowStep {
		w := e2eTally(r.calls, from, from+e2eSlowWindow)
		if w.total > 0 && w.share(r.slow) >= want {
			return from + e2eSlowWindow - r.to, true
		}
	}
	return 0, false
}

// TestEndToEndBlackHole is the black-hole failure: one of 10 backends fails
// every call with Unavailable at once, while its peers take 18-22ms. A
// policy that reads latency alone would see the fastest backend in the
// fleet. pickwise_peak_ewma never lets a fast failure lower its latency
// average, and the engine's failure evidence and ejection take the black
// hole out, so it must get well under its fair share. grpc-go's
// least_request_experimental runs the same scenario for comparison in the
// log: it compares in-flight counts, which the black hole keeps at zero.
func TestEndToEndBlackHole(t *testing.T) {
	const fair = 1.0 / e2eBlackHoleBackends
	variants := []struct {
		name, config string
	}{
		{peakewma.Name, e2eServiceConfig(peakewma.Name, `{}`)},
		{"least_request_experimental", e2eServiceConfig("least_request_experimental", `{}`)},
	}
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			hits, total := e2eBlackHole(t, v.config)
			share := float64(hits) / float64(total)
			t.Logf("black-hole share: %.2f%% for %s (%d of %d RPCs, fair share %.0f%%)", 100*share, v.name, hits, total, 100*fair)
			if v.name == peakewma.Name && share >= 0.05 {
				t.Errorf("the black hole got %.2f%% of the calls, want below 5%%", 100*share)
			}
		})
	}
}

// e2eBlackHoleBackends is the fleet size of TestEndToEndBlackHole.
const e2eBlackHoleBackends = 10

// e2eBlackHole runs the black-hole scenario under serviceConfig and returns
// how many calls reached the black hole, out of how many. The fleet warms
// up healthy, so the count includes the calls the policy needed to find
// out that the backend broke.
func e2eBlackHole(t *testing.T, serviceConfig string) (hits, total int) {
	t.Helper()
	const (
		workers = 20
		// About 1,500 calls at 20 workers and 20ms a call.
		measure = 1500 * time.Millisecond
	)
	ctx := fleet.Context(t, e2eTimeout)
	f := fleet.StartT(t, e2eBlackHoleBackends)
	e2eSpread(f.Backends, 20*time.Millisecond)
	c := fleet.DialT(t, f.Addrs(), serviceConfig)
	d := e2eStart(ctx, c, workers)
	defer d.Stop()
	e2eWarmUp(t, ctx, d, f.Backends...)

	hole := f.Backends[0]
	from := d.now()
	hole.SetBehavior(fleet.Behavior{ErrorRate: 1, ErrorCode: codes.Unavailable, ErrorLatency: 0})
	e2eSleep(ctx, measure)
	to := d.now()
	calls := d.Stop()
	if ctx.Err() != nil {
		t.Fatal("the run did not finish before the deadline")
	}
	w := e2eTally(calls, from, to)
	hits = w.per[hole.Name()]
	// Every failure must come from the black hole: the healthy backends
	// never fail, and a failure without the backend's trailer would mean
	// the channel itself broke. A call that reached the hole just before
	// it broke may have succeeded, hence at most.
	if w.failed > hits {
		t.Errorf("%d calls failed but the black hole answered only %d", w.failed, hits)
	}
	return hits, w.total
}

// TestEndToEndNewcomerNotFlooded adds a sixth backend to five under load.
// The newcomer is cold: its calls take 200ms, ten times its peers'. Until
// it has answered once it has no latency sample, and pickwise_peak_ewma
// then gives it one call at a time (Finagle's pending penalty): whatever it
// turns out to be, it cannot take a burst of calls before the policy knows
// its latency. pickwise_p2c, which knows only in-flight counts, runs the
// same scenario for comparison in the log: it fills the newcomer up to its
// peers' in-flight count at once.
func TestEndToEndNewcomerNotFlooded(t *testing.T) {
	const fair = 1.0 / (e2eNewcomerOld + 1)
	variants := []struct {
		name, config string
	}{
		{peakewma.Name, e2eServiceConfig(peakewma.Name, `{}`)},
		{"pickwise_p2c", e2eServiceConfig("pickwise_p2c", `{}`)},
	}
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			r := e2eNewcomer(t, v.config)
			share := r.window.share(r.newcomer)
			t.Logf("newcomer: %s placed %d calls on it before its first answer; it got %.1f%% of the %d RPCs of its first %v (fair share %.1f%%)",
				v.name, r.beforeAnswer, 100*share, r.window.total, e2eNewcomerWindow, 100*fair)
			if v.name != peakewma.Name {
				return
			}
			// One, or two if two picks read its empty in-flight count at
			// the same instant.
			if r.beforeAnswer > 2 {
				t.Errorf("%d calls were placed on the newcomer before its first answer, want at most 2 (one at a time)", r.beforeAnswer)
			}
			if share >= fair {
				t.Errorf("newcomer got %.1f%% of the calls of its first %v, want below its fair share %.1f%%", 100*share, e2eNewcomerWindow, 100*fair)
			}
		})
	}
}

const (
	// e2eNewcomerOld is how many backends carry the load before the
	// newcomer joins.
	e2eNewcomerOld = 5
	// e2eNewcomerLatency is the newcomer's latency; e2eNewcomerWindow is
	// how long after its first call its share is measured: the time its
	// first call is pending.
	e2eNewcomerLatency = 200 * time.Millisecond
	e2eNewcomerWindow  = e2eNewcomerLatency
)

// e2eNewcomerRun is what happened to the newcomer.
type e2eNewcomerRun struct {
	newcomer string
	// beforeAnswer counts calls placed on the newcomer before its first
	// answer, the call that answered included.
	beforeAnswer int
	// window is the calls started in the e2eNewcomerWindow after the
	// newcomer's first call started.
	window e2eWindow
}

// e2eNewcomer runs the newcomer scenario under serviceConfig.
func e2eNewcomer(t *testing.T, serviceConfig string) e2eNewcomerRun {
	t.Helper()
	const workers = 16 // about 3 in flight per old backend
	ctx := fleet.Context(t, e2eTimeout)
	f := fleet.StartT(t, e2eNewcomerOld+1)
	old, newcomer := f.Backends[:e2eNewcomerOld], f.Backends[e2eNewcomerOld]
	e2eSpread(old, 20*time.Millisecond)
	newcomer.SetBehavior(fleet.Behavior{Latency: e2eNewcomerLatency})
	c := fleet.DialT(t, fleet.AddrsOf(old), serviceConfig)
	d := e2eStart(ctx, c, workers)
	defer d.Stop()
	e2eWarmUp(t, ctx, d, old...)

	// SetAddrs returns once the balancer has the new list; the newcomer
	// joins the picker when its connection is READY.
	c.SetAddrs(f.Addrs())
	fleet.WaitFor(t, ctx, "the newcomer's first answer", func() bool { return d.answers(newcomer.Name()) > 0 })
	// The first call ended; keep the load on until the window after its
	// start is surely over, with a margin for a slow machine.
	e2eSleep(ctx, e2eNewcomerWindow/2)
	calls := d.Stop()
	if ctx.Err() != nil {
		t.Fatal("the run did not finish before the deadline")
	}

	r := e2eNewcomerRun{newcomer: newcomer.Name()}
	// Calls are in order of start, so the first found started first.
	var first, answer *e2eCall
	for i := range calls {
		c := &calls[i]
		if c.backend != r.newcomer {
			continue
		}
		if first == nil {
			first = c
		}
		if answer == nil || c.end < answer.end {
			answer = c
		}
	}
	if first == nil {
		t.Fatal("no call to the newcomer was recorded")
	}
	// A call started on the client a moment before the answer came back
	// may have been picked a moment after; that can only add to the count,
	// and once the newcomer has answered, 200ms, its cost is high anyway.
	for _, c := range calls {
		if c.backend == r.newcomer && c.start < answer.end {
			r.beforeAnswer++
		}
	}
	r.window = e2eTally(calls, first.start, first.start+e2eNewcomerWindow)
	if r.window.total == 0 {
		t.Fatal("no call started in the newcomer's first window")
	}
	return r
}

// TestEndToEndEveryBackendReachedAtLowLoad makes one call at a time to four
// backends that answer in 3-7ms, well under defaultRtt (30ms): a service
// at low traffic, or a client with little of it. Every backend must get
// calls within a few decay times. An endpoint that has not answered yet is
// not known to be slow, and one that never gets a call can never show that
// it is fast; with nothing in flight anywhere, its cost must not stay above
// the measured endpoints' for good.
func TestEndToEndEveryBackendReachedAtLowLoad(t *testing.T) {
	const (
		backends = 4
		decay    = time.Second
		limit    = 5 * decay
	)
	ctx := fleet.Context(t, e2eTimeout)
	f := fleet.StartT(t, backends)
	e2eSpread(f.Backends, 5*time.Millisecond)
	c := fleet.DialT(t, f.Addrs(), e2eServiceConfig(peakewma.Name, fmt.Sprintf(`{"decayTime":%q}`, decay)))
	got := map[string]int{}
	calls, start := 0, time.Now()
	for len(got) < backends && time.Since(start) < limit {
		name, err := c.Call(ctx, grpc.WaitForReady(true))
		if err != nil {
			t.Fatalf("call %d: %v", calls, err)
		}
		got[name]++
		calls++
	}
	t.Logf("low load: %d calls, one at a time, over %v reached %d of %d backends: %v",
		calls, time.Since(start).Round(time.Millisecond), len(got), backends, got)
	for _, b := range f.Backends {
		if got[b.Name()] == 0 {
			t.Errorf("%s got none of %d calls made one at a time over %v (%d x decayTime)", b.Name(), calls, limit, int(limit/decay))
		}
	}
}
