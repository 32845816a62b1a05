package p2c_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/pickwise/pickwise/balancer/p2c"
	"github.com/pickwise/pickwise/internal/engine"
	"github.com/pickwise/pickwise/internal/testkit"
	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/experimental/balancer/weight"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/serviceconfig"
)

const testTimeout = 10 * time.Second

// harness is one pickwise_p2c balancer over the fake ClientConn, with a
// virtual clock and a seeded random source.
type harness struct {
	t     *testing.T
	ctx   context.Context
	cc    *testkit.ClientConn
	b     balancer.Balancer
	clock *testkit.FakeClock
	cfg   serviceconfig.LoadBalancingConfig
}

func newHarness(t *testing.T, cfgJSON string) *harness {
	t.Helper()
	spec, ok := engine.Lookup(p2c.Name)
	if !ok {
		t.Fatalf("%s is not registered with the engine", p2c.Name)
	}
	cfg, err := spec.ParseConfig(json.RawMessage(cfgJSON))
	if err != nil {
		t.Fatalf("ParseConfig(%s): %v", cfgJSON, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	h := &harness{t: t, ctx: ctx, cc: testkit.NewClientConn(), clock: testkit.NewFakeClock(), cfg: cfg}
	h.b = spec.Build(h.cc, balancer.BuildOptions{}, engine.Options{Clock: h.clock, Rand: engine.NewSeededRand(1)})
	t.Cleanup(h.b.Close)
	return h
}

// addrs names n fake endpoints. The fake ClientConn never dials them.
func addrs(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("127.0.0.1:%d", 20000+i)
	}
	return out
}

func endpoint(addr string, w uint32) resolver.Endpoint {
	ep := resolver.Endpoint{Addresses: []resolver.Address{{Addr: addr}}}
	if w != 0 {
		ep = weight.Set(ep, weight.EndpointInfo{Weight: w})
	}
	return ep
}

// update sends the resolver's endpoints with the harness config.
func (h *harness) update(eps ...resolver.Endpoint) error {
	return h.b.UpdateClientConnState(balancer.ClientConnState{
		ResolverState:  resolver.State{Endpoints: eps},
		BalancerConfig: h.cfg,
	})
}

// start updates the balancer with equal-weight endpoints and makes them
// READY.
func (h *harness) start(as ...string) {
	h.t.Helper()
	var eps []resolver.Endpoint
	for _, a := range as {
		eps = append(eps, endpoint(a, 0))
	}
	if err := h.update(eps...); err != nil {
		h.t.Fatalf("UpdateClientConnState: %v", err)
	}
	h.ready(as...)
}

// ready drives the endpoints to READY and waits until the picker can pick
// each of them.
func (h *harness) ready(as ...string) {
	h.t.Helper()
	if err := h.cc.SetReady(h.ctx, as...); err != nil {
		h.t.Fatal(err)
	}
}

// pick picks once from the latest picker and returns the chosen address
// and the RPC's Done.
func (h *harness) pick() (string, func(balancer.DoneInfo)) {
	h.t.Helper()
	res, err := h.cc.State().Picker.Pick(balancer.PickInfo{})
	if err != nil {
		h.t.Fatalf("Pick: %v", err)
	}
	return res.SubConn.(*testkit.SubConn).Addr(), res.Done
}

// count makes n picks. With hold, RPCs stay in flight (their Done is
// returned for the caller to run later); without, each finishes at once.
func (h *harness) count(n int, hold bool) (map[string]int, []func(balancer.DoneInfo)) {
	h.t.Helper()
	got := map[string]int{}
	var pending []func(balancer.DoneInfo)
	for i := 0; i < n; i++ {
		a, done := h.pick()
		got[a]++
		if hold {
			pending = append(pending, done)
		} else {
			done(balancer.DoneInfo{})
		}
	}
	return got, pending
}

// finish ends held RPCs with the given outcome.
func finish(pending []func(balancer.DoneInfo), err error) {
	for _, d := range pending {
		d(outcome(err))
	}
}

// outcome is the DoneInfo of an RPC that reached its server and ended with
// err.
func outcome(err error) balancer.DoneInfo {
	return balancer.DoneInfo{Err: err, BytesSent: true, BytesReceived: true}
}

// endpointsOf makes equal-weight endpoints for addresses.
func endpointsOf(as []string) []resolver.Endpoint {
	eps := make([]resolver.Endpoint, len(as))
	for i, a := range as {
		eps[i] = endpoint(a, 0)
	}
	return eps
}

// lose breaks addr's READY connection the way grpc reports it: the SubConn
// goes IDLE and endpointsharding has pickfirst reconnect on a goroutine of
// its own; lose waits for that reconnect request.
func (h *harness) lose(addr string) *testkit.SubConn {
	h.t.Helper()
	sc := h.cc.SubConnFor(addr)
	before := sc.Connects()
	sc.UpdateState(balancer.SubConnState{ConnectivityState: connectivity.Idle})
	for sc.Connects() == before {
		if h.ctx.Err() != nil {
			h.t.Fatalf("pickfirst never reconnected %s", addr)
		}
		time.Sleep(time.Millisecond)
	}
	return sc
}

// down takes addr's backend away: the connection breaks and reconnecting
// fails.
func (h *harness) down(addr string, err error) {
	h.t.Helper()
	sc := h.lose(addr)
	sc.UpdateState(balancer.SubConnState{ConnectivityState: connectivity.Connecting})
	sc.UpdateState(balancer.SubConnState{ConnectivityState: connectivity.TransientFailure, ConnectionError: err})
}

// up brings a down backend back: after its backoff the SubConn goes IDLE,
// pickfirst connects again, and this time it succeeds.
func (h *harness) up(addr string) {
	h.t.Helper()
	sc := h.cc.SubConnFor(addr)
	sc.UpdateState(balancer.SubConnState{ConnectivityState: connectivity.Idle})
	sc.UpdateState(balancer.SubConnState{ConnectivityState: connectivity.Connecting})
	sc.UpdateState(balancer.SubConnState{ConnectivityState: connectivity.Ready})
}
