package testkit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/pickwise/pickwise/internal/engine"
	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/experimental/balancer/weight"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/serviceconfig"
)

// Timeout bounds every wait of a Harness.
const Timeout = 10 * time.Second

// Harness is one pickwise policy's balancer over the fake ClientConn, with
// a virtual clock and a seeded random source: the setting of every
// policy's picker tests.
type Harness struct {
	T     testing.TB
	Ctx   context.Context
	CC    *ClientConn
	B     balancer.Balancer
	Clock *FakeClock
	// Cfg is sent with every Update; tests may replace it.
	Cfg serviceconfig.LoadBalancingConfig
	// Metrics is CC.Metrics: what the balancer reports through grpc's
	// metrics registry, with the target label "test:///harness".
	Metrics *Metrics
	// lazy is the policy's Spec.Lazy: its endpoints connect only when a
	// pick asks for them, so Start wakes them with picks.
	lazy bool
}

// NewHarness builds policy (registered with the engine) with the config
// cfgJSON. The balancer is closed when the test ends.
func NewHarness(t testing.TB, policy, cfgJSON string) *Harness {
	t.Helper()
	return NewProbingHarness(t, policy, cfgJSON, nil)
}

// NewProbingHarness is NewHarness with prober sending pickwise_prequal's
// load probes (nil: grpc's, which the fake connections do not serve).
func NewProbingHarness(t testing.TB, policy, cfgJSON string, prober engine.LoadProber) *Harness {
	t.Helper()
	spec, ok := engine.Lookup(policy)
	if !ok {
		t.Fatalf("%s is not registered with the engine", policy)
	}
	cfg, err := spec.ParseConfig(json.RawMessage(cfgJSON))
	if err != nil {
		t.Fatalf("ParseConfig(%s): %v", cfgJSON, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	t.Cleanup(cancel)
	h := &Harness{T: t, Ctx: ctx, CC: NewClientConn(), Clock: NewFakeClock(), Cfg: cfg, lazy: spec.Lazy}
	h.Metrics = h.CC.Metrics
	bOpts := balancer.BuildOptions{Target: resolver.Target{URL: url.URL{Scheme: "test", Path: "/harness"}}}
	h.B = spec.Build(h.CC, bOpts, engine.Options{Clock: h.Clock, Rand: engine.NewSeededRand(1), LoadProber: prober})
	t.Cleanup(h.B.Close)
	return h
}

// Addrs names n fake endpoints. The fake ClientConn never dials them.
func Addrs(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("127.0.0.1:%d", 20000+i)
	}
	return out
}

// Endpoint is a single-address endpoint with weight w (0: no weight
// attribute).
func Endpoint(addr string, w uint32) resolver.Endpoint {
	ep := resolver.Endpoint{Addresses: []resolver.Address{{Addr: addr}}}
	if w != 0 {
		ep = weight.Set(ep, weight.EndpointInfo{Weight: w})
	}
	return ep
}

// Update sends the resolver's endpoints with the harness config.
func (h *Harness) Update(eps ...resolver.Endpoint) error {
	return h.B.UpdateClientConnState(balancer.ClientConnState{
		ResolverState:  resolver.State{Endpoints: eps},
		BalancerConfig: h.Cfg,
	})
}

// Start updates the balancer with equal-weight endpoints and makes them
// READY (through StartLazy for a lazy policy).
func (h *Harness) Start(as ...string) {
	h.T.Helper()
	if h.lazy {
		h.StartLazy(as...)
		return
	}
	var eps []resolver.Endpoint
	for _, a := range as {
		eps = append(eps, Endpoint(a, 0))
	}
	if err := h.Update(eps...); err != nil {
		h.T.Fatalf("UpdateClientConnState: %v", err)
	}
	h.Ready(as...)
}

// Serve picks once and ends the call with a success. A channel ramps the
// endpoints that join it once it has served a call (slow start), not
// those that join before: a test of a newcomer's ramp serves one first.
func (h *Harness) Serve() {
	h.T.Helper()
	_, done := h.Pick()
	serveOne(done)
}

// serveOne ends a call with a success.
func serveOne(done func(balancer.DoneInfo)) {
	if done != nil {
		done(balancer.DoneInfo{BytesSent: true, BytesReceived: true})
	}
}

// Ready drives the endpoints to READY and waits until the picker can pick
// each of them.
func (h *Harness) Ready(as ...string) {
	h.T.Helper()
	if err := h.CC.SetReady(h.Ctx, as...); err != nil {
		h.T.Fatal(err)
	}
}

// Pick picks once from the latest picker and returns the chosen address
// and the RPC's Done.
func (h *Harness) Pick() (string, func(balancer.DoneInfo)) {
	h.T.Helper()
	res, err := h.CC.State().Picker.Pick(balancer.PickInfo{})
	if err != nil {
		h.T.Fatalf("Pick: %v", err)
	}
	return res.SubConn.(*SubConn).Addr(), res.Done
}

// Count makes n picks. With hold, RPCs stay in flight (their Done is
// returned for the caller to run later); without, each finishes at once.
func (h *Harness) Count(n int, hold bool) (map[string]int, []func(balancer.DoneInfo)) {
	h.T.Helper()
	got := map[string]int{}
	var pending []func(balancer.DoneInfo)
	for i := 0; i < n; i++ {
		a, done := h.Pick()
		got[a]++
		if hold {
			pending = append(pending, done)
		} else {
			done(balancer.DoneInfo{})
		}
	}
	return got, pending
}

// Finish ends held RPCs with the given outcome.
func Finish(pending []func(balancer.DoneInfo), err error) {
	for _, d := range pending {
		d(Outcome(err))
	}
}

// Outcome is the DoneInfo of an RPC that reached its server and ended with
// err.
func Outcome(err error) balancer.DoneInfo {
	return balancer.DoneInfo{Err: err, BytesSent: true, BytesReceived: true}
}

// Endpoints makes equal-weight endpoints for addresses.
func Endpoints(as []string) []resolver.Endpoint {
	eps := make([]resolver.Endpoint, len(as))
	for i, a := range as {
		eps[i] = Endpoint(a, 0)
	}
	return eps
}

// Lose breaks addr's READY connection the way grpc reports it: the SubConn
// goes IDLE and the engine has its pickfirst reconnect on a goroutine of
// its own; Lose waits for that reconnect request.
func (h *Harness) Lose(addr string) *SubConn {
	h.T.Helper()
	sc := h.CC.SubConnFor(addr)
	before := sc.Connects()
	sc.UpdateState(balancer.SubConnState{ConnectivityState: connectivity.Idle})
	if err := h.CC.WaitFor(h.Ctx, func(balancer.State) error {
		if sc.Connects() == before {
			return fmt.Errorf("pickfirst never reconnected %s", addr)
		}
		return nil
	}); err != nil {
		h.T.Fatal(err)
	}
	return sc
}

// Down takes addr's backend away: the connection breaks and reconnecting
// fails.
func (h *Harness) Down(addr string, err error) {
	h.T.Helper()
	sc := h.Lose(addr)
	sc.UpdateState(balancer.SubConnState{ConnectivityState: connectivity.Connecting})
	sc.UpdateState(balancer.SubConnState{ConnectivityState: connectivity.TransientFailure, ConnectionError: err})
}

// Up brings a down backend back: after its backoff the SubConn goes IDLE,
// pickfirst connects again, and this time it succeeds.
func (h *Harness) Up(addr string) {
	h.T.Helper()
	sc := h.CC.SubConnFor(addr)
	sc.UpdateState(balancer.SubConnState{ConnectivityState: connectivity.Idle})
	sc.UpdateState(balancer.SubConnState{ConnectivityState: connectivity.Connecting})
	sc.UpdateState(balancer.SubConnState{ConnectivityState: connectivity.Ready})
}

// ReadyPicker builds the named policy through grpc's balancer registry, as
// a channel would, over n READY endpoints, and returns its picker and a
// function that closes the balancer. Benchmarks use it for ours and for
// grpc-go's peers alike.
func ReadyPicker(tb testing.TB, policy, cfg string, n int) (balancer.Picker, func()) {
	tb.Helper()
	cc, bal := readyBalancer(tb, policy, cfg, n)
	return cc.State().Picker, bal.Close
}

// RampingPicker is ReadyPicker over n READY endpoints and one more that
// joined after them and turned READY last, as a scale-out's newcomer
// does: under a policy with slow start, the picker of a fleet with one
// endpoint in its ramp.
func RampingPicker(tb testing.TB, policy, cfg string, n int) (balancer.Picker, func()) {
	tb.Helper()
	cc, bal := readyBalancer(tb, policy, cfg, n)
	res, err := cc.State().Picker.Pick(balancer.PickInfo{})
	if err != nil {
		tb.Fatal(err)
	}
	serveOne(res.Done)
	as := Addrs(n + 1)
	updateReady(tb, cc, bal, policy, cfg, as, as[n])
	Settle(cc, n+1)
	return cc.State().Picker, bal.Close
}

// WarmPicker is ReadyPicker for a policy whose picker changes with what
// the calls bring back (load reports): it first makes rounds of 2n picks,
// each finished by report of the SubConn picked, with warm of real time
// after each, three times, and returns the picker the balancer has
// published by then. With a weighted policy configured to take weights in
// sooner than warm (its blackout and update period), and reports that
// differ between endpoints, that picker follows the reported weights: the
// policy's steady state, where ReadyPicker's is its first one.
func WarmPicker(tb testing.TB, policy, cfg string, n int, report func(balancer.SubConn) balancer.DoneInfo, warm time.Duration) (balancer.Picker, func()) {
	tb.Helper()
	cc, bal := readyBalancer(tb, policy, cfg, n)
	for range 3 {
		p := cc.State().Picker
		for range 2 * n {
			res, err := p.Pick(balancer.PickInfo{})
			if err != nil {
				tb.Fatal(err)
			}
			if res.Done != nil {
				res.Done(report(res.SubConn))
			}
		}
		time.Sleep(warm)
	}
	Settle(cc, n)
	return cc.State().Picker, bal.Close
}

// readyBalancer builds the named policy over n endpoints, all READY.
func readyBalancer(tb testing.TB, policy, cfg string, n int) (*ClientConn, balancer.Balancer) {
	tb.Helper()
	builder := balancer.Get(policy)
	if builder == nil {
		tb.Fatalf("no balancer registered as %q", policy)
	}
	cc := NewClientConn()
	bal := builder.Build(cc, balancer.BuildOptions{})
	as := Addrs(n)
	updateReady(tb, cc, bal, policy, cfg, as, as...)
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	if err := cc.WaitForState(ctx, connectivity.Ready); err != nil {
		tb.Fatal(err)
	}
	Settle(cc, n)
	return cc, bal
}

// updateReady gives bal the endpoints as, under the named policy's config
// cfg, and makes the connections of ready READY.
func updateReady(tb testing.TB, cc *ClientConn, bal balancer.Balancer, policy, cfg string, as []string, ready ...string) {
	tb.Helper()
	if err := bal.UpdateClientConnState(balancer.ClientConnState{
		ResolverState:  resolver.State{Endpoints: Endpoints(as)},
		BalancerConfig: parsedConfig(tb, policy, cfg),
	}); err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	if err := cc.SetReady(ctx, ready...); err != nil {
		tb.Fatal(err)
	}
}

// parsedConfig is cfg parsed by the named policy's ConfigParser; nil for a
// policy without one.
func parsedConfig(tb testing.TB, policy, cfg string) serviceconfig.LoadBalancingConfig {
	tb.Helper()
	p, ok := balancer.Get(policy).(balancer.ConfigParser)
	if !ok {
		return nil
	}
	parsed, err := p.ParseConfig(json.RawMessage(cfg))
	if err != nil {
		tb.Fatal(err)
	}
	return parsed
}

// Settle waits until a balancer over n endpoints has published its last
// picker: pickwise's balancers publish the changes of a large fleet
// together, up to a window (about a microsecond per endpoint) after they
// happen, on a real clock unless one was injected. It returns once cc has
// seen no new state for longer than that window.
func Settle(cc *ClientConn, n int) {
	quiet := 5*time.Millisecond + time.Duration(2*n)*time.Microsecond
	for last := cc.Updates(); ; {
		time.Sleep(quiet)
		now := cc.Updates()
		if now == last {
			return
		}
		last = now
	}
}

// BenchmarkPick runs, for each fleet size and each policy (a registry name
// and its JSON config), one sub-benchmark "n=<size>/policy=<name>" that
// picks and runs Done from every benchmark goroutine at once, as a busy
// channel does. Sizes are the outer loop so that pickwise's policy and
// grpc-go's peer at one size run back to back: on a shared machine whose
// speed drifts over seconds, neighbours in time are measured under the same
// conditions. The key=value names let benchstat put policies side by side
// (benchstat -col /policy), with the first policy as the base.
func BenchmarkPick(b *testing.B, policies [][2]string, sizes []int) {
	BenchmarkPickDone(b, policies, sizes, Outcome(nil))
}

// BenchmarkPickDone is BenchmarkPick with every call finished by info, for
// policies whose Done reads something the call returned (a load report).
func BenchmarkPickDone(b *testing.B, policies [][2]string, sizes []int, info balancer.DoneInfo) {
	benchmarkPickFrom(b, policies, sizes, info, nil, func(b *testing.B, policy, cfg string, n int) (balancer.Picker, func()) {
		return ReadyPicker(b, policy, cfg, n)
	})
}

// BenchmarkPickRamping is BenchmarkPick over n endpoints and a newcomer
// in its slow-start ramp (RampingPicker), for policies with slow start on:
// what a pick costs while a scale-out's newcomer ramps.
func BenchmarkPickRamping(b *testing.B, policies [][2]string, sizes []int) {
	info := Outcome(nil)
	benchmarkPickFrom(b, policies, sizes, info, nil, func(b *testing.B, policy, cfg string, n int) (balancer.Picker, func()) {
		return RampingPicker(b, policy, cfg, n)
	})
}

// BenchmarkPickWarm is BenchmarkPickDone over the picker each policy has
// published once warmed up (WarmPicker, with warm between rounds), every
// call finished by report of the SubConn picked, in the warm-up and in
// the measured picks alike, so that the weights stay as they were warmed
// to.
func BenchmarkPickWarm(b *testing.B, policies [][2]string, sizes []int, report func(balancer.SubConn) balancer.DoneInfo, warm time.Duration) {
	benchmarkPickFrom(b, policies, sizes, balancer.DoneInfo{}, report, func(b *testing.B, policy, cfg string, n int) (balancer.Picker, func()) {
		return WarmPicker(b, policy, cfg, n, report, warm)
	})
}

// BenchmarkPickWarmHeld is BenchmarkPickWarm with each benchmark
// goroutine keeping hold calls in flight: a pick finishes, by report of
// its SubConn, the call that goroutine started hold picks before, as a
// client whose calls take longer than a pick does. A policy's Done then
// acts on its own state as it was hold picks ago, where BenchmarkPickWarm
// finishes every call before the next pick.
func BenchmarkPickWarmHeld(b *testing.B, policies [][2]string, sizes []int, report func(balancer.SubConn) balancer.DoneInfo, warm time.Duration, hold int) {
	type call struct {
		sc   balancer.SubConn
		done func(balancer.DoneInfo)
	}
	for _, n := range sizes {
		for _, pol := range policies {
			var p balancer.Picker
			closeFn := func() {}
			b.Run(fmt.Sprintf("n=%d/policy=%s", n, pol[0]), func(b *testing.B) {
				if p == nil {
					p, closeFn = WarmPicker(b, pol[0], pol[1], n, report, warm)
				}
				b.ReportAllocs()
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					held := make([]call, hold)
					k := 0
					for pb.Next() {
						res, err := p.Pick(balancer.PickInfo{})
						if err != nil {
							b.Error(err)
							return
						}
						if c := held[k]; c.done != nil {
							c.done(report(c.sc))
						}
						held[k] = call{res.SubConn, res.Done}
						k = (k + 1) % hold
					}
					for _, c := range held {
						if c.done != nil {
							c.done(report(c.sc))
						}
					}
				})
			})
			closeFn()
		}
	}
}

// benchmarkPickFrom is BenchmarkPickDone over the pickers build returns,
// with each call finished by report of its SubConn if report is not nil,
// by info otherwise.
func benchmarkPickFrom(b *testing.B, policies [][2]string, sizes []int, info balancer.DoneInfo, report func(balancer.SubConn) balancer.DoneInfo, build func(b *testing.B, policy, cfg string, n int) (balancer.Picker, func())) {
	for _, n := range sizes {
		for _, pol := range policies {
			// Built once, not each time the benchmark grows b.N: a large
			// fleet of a peer that rebuilds its picker on every change takes
			// minutes to build.
			var p balancer.Picker
			closeFn := func() {}
			b.Run(fmt.Sprintf("n=%d/policy=%s", n, pol[0]), func(b *testing.B) {
				if p == nil {
					p, closeFn = build(b, pol[0], pol[1], n)
				}
				b.ReportAllocs()
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						res, err := p.Pick(balancer.PickInfo{})
						if err != nil {
							b.Error(err)
							return
						}
						switch {
						case res.Done == nil:
						case report != nil:
							res.Done(report(res.SubConn))
						default:
							res.Done(info)
						}
					}
				})
			})
			closeFn()
		}
	}
}

// BenchmarkPickBusy is BenchmarkPick with calls held in flight: before
// the timer starts, 2n picks are made and not finished, so that most
// endpoints are busy, as they are for a client that is most of its
// backends' load (for pickwise's d-choice pickers, the case where first
// candidates take turns). The held calls finish when it ends.
func BenchmarkPickBusy(b *testing.B, policies [][2]string, sizes []int) {
	info := Outcome(nil)
	for _, n := range sizes {
		for _, pol := range policies {
			var p balancer.Picker
			closeFn := func() {}
			var held []func(balancer.DoneInfo)
			b.Run(fmt.Sprintf("n=%d/policy=%s", n, pol[0]), func(b *testing.B) {
				if p == nil {
					p, closeFn = ReadyPicker(b, pol[0], pol[1], n)
					for range 2 * n {
						res, err := p.Pick(balancer.PickInfo{})
						if err != nil {
							b.Fatal(err)
						}
						held = append(held, res.Done)
					}
				}
				b.ReportAllocs()
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						res, err := p.Pick(balancer.PickInfo{})
						if err != nil {
							b.Error(err)
							return
						}
						if res.Done != nil {
							res.Done(info)
						}
					}
				})
			})
			for _, done := range held {
				if done != nil {
					done(info)
				}
			}
			closeFn()
		}
	}
}

// BenchmarkPickSerial is BenchmarkPick from one goroutine: each pick and
// its Done, back to back, as a channel with one caller at a time sees
// them. Without other cores writing the same counters, what it measures is
// the pick path itself: its instructions and its cache misses, the latter
// dominant at the larger sizes. Put Floor among the policies to measure
// how far each is from the least a pick can cost.
func BenchmarkPickSerial(b *testing.B, policies [][2]string, sizes []int) {
	info := Outcome(nil)
	for _, n := range sizes {
		for _, pol := range policies {
			b.Run(fmt.Sprintf("n=%d/policy=%s", n, pol[0]), func(b *testing.B) {
				p, closeFn := ReadyPicker(b, pol[0], pol[1], n)
				defer closeFn()
				b.ReportAllocs()
				for b.Loop() {
					res, err := p.Pick(balancer.PickInfo{})
					if err != nil {
						b.Fatal(err)
					}
					if res.Done != nil {
						res.Done(info)
					}
				}
			})
		}
	}
}

// CheckEmptyEndpointList checks what every policy owes an empty endpoint
// list: the update is refused as a bad resolver state, the channel goes
// TRANSIENT_FAILURE with a picker whose error names the policy (and, after
// a resolver error, carries it), and the balancer recovers when endpoints
// arrive.
func CheckEmptyEndpointList(t *testing.T, policy string) {
	t.Helper()
	h := NewHarness(t, policy, `{}`)
	if err := h.Update(); !errors.Is(err, balancer.ErrBadResolverState) {
		t.Errorf("UpdateClientConnState with no endpoints = %v, want ErrBadResolverState", err)
	}
	if err := h.CC.WaitForState(h.Ctx, connectivity.TransientFailure); err != nil {
		t.Fatal(err)
	}
	_, err := h.CC.State().Picker.Pick(balancer.PickInfo{})
	if want := policy + ": no endpoints to pick from"; err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("Pick error = %v, want one containing %q", err, want)
	}

	h.B.ResolverError(errors.New("dns: no such host"))
	_, err = h.CC.State().Picker.Pick(balancer.PickInfo{})
	if err == nil || !strings.Contains(err.Error(), "dns: no such host") {
		t.Fatalf("Pick error after a resolver error = %v, want it to carry the resolver error", err)
	}

	as := Addrs(2)
	h.Start(as...)
	if got, _ := h.Count(10, false); got[as[0]]+got[as[1]] != 10 {
		t.Fatalf("picks after endpoints arrived: %v, want 10 on %v", got, as)
	}
}

// PickApart makes n attempts of one call, whose context ctx carries an
// attempt record (engine.WithAttempts), all held in flight at once, so
// that placement alone keeps them apart; it fails the test if one goes
// back to an endpoint an earlier one used, and returns their Dones.
func (h *Harness) PickApart(ctx context.Context, n int) []func(balancer.DoneInfo) {
	h.T.Helper()
	used := map[string]bool{}
	var held []func(balancer.DoneInfo)
	for attempt := range n {
		res, err := h.CC.State().Picker.Pick(balancer.PickInfo{Ctx: ctx})
		if err != nil {
			h.T.Fatal(err)
		}
		a := res.SubConn.(*SubConn).Addr()
		if used[a] {
			h.T.Fatalf("attempt %d went back to %s, used by an earlier attempt: %v", attempt, a, used)
		}
		used[a] = true
		held = append(held, res.Done)
	}
	return held
}
