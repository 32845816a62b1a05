package subset

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/pickwise/pickwise/internal/subsetting"
	"github.com/pickwise/pickwise/internal/testkit"
	"google.golang.org/grpc/attributes"
	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/serviceconfig"
)

// testTimeout bounds waits on the fake ClientConn; they end as soon as
// their condition holds, so it matters only when something is broken.
const testTimeout = 10 * time.Second

type attrKey struct{}

// parse parses a config or fails the test.
func parse(t testing.TB, js string) *Config {
	t.Helper()
	cfg, err := ParseConfig(json.RawMessage(js))
	if err != nil {
		t.Fatalf("ParseConfig(%s): %v", js, err)
	}
	return cfg.(*Config)
}

// withAttrs gives every endpoint and its address attributes that the
// parent must pass through untouched.
func withAttrs(addrs []string, tag string) []resolver.Endpoint {
	eps := endpointsOf(addrs)
	for i := range eps {
		eps[i].Attributes = attributes.New(attrKey{}, tag+"-ep-"+addrs[i])
		eps[i].Addresses[0].Attributes = attributes.New(attrKey{}, tag+"-addr-"+addrs[i])
	}
	return eps
}

// update sends eps with cfg, or fails the test.
func update(t *testing.T, b *subsetBalancer, cfg *Config, eps []resolver.Endpoint) {
	t.Helper()
	if err := b.UpdateClientConnState(balancer.ClientConnState{
		ResolverState:  resolver.State{Endpoints: eps},
		BalancerConfig: cfg,
	}); err != nil {
		t.Fatalf("UpdateClientConnState: %v", err)
	}
}

// sorted returns a sorted copy.
func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

func childConfig(extra string) string {
	return fmt.Sprintf(`{%s"childPolicy": [{%q: {}}]}`, extra, testChildName)
}

// TestChildGetsSubset checks that the child receives exactly this client's
// subset, as endpoints with their attributes, the state's attributes and
// service config, and its own parsed config.
func TestChildGetsSubset(t *testing.T) {
	addrs := testkit.Addrs(9)
	cfg := parse(t, childConfig(`"subsetSize": 3, "clientIndex": 1, "clientCount": 3, `))
	b := newBalancer(testkit.NewClientConn(), balancer.BuildOptions{}, 1)
	defer b.Close()

	eps := withAttrs(addrs, "a")
	// An endpoint without addresses is dropped; a repeated identity keeps
	// its first endpoint only.
	eps = append(eps, resolver.Endpoint{})
	dup := resolver.Endpoint{Addresses: []resolver.Address{{Addr: addrs[4]}, {Addr: "127.0.0.1:1"}}}
	eps = append(eps, dup)
	sc := &serviceconfig.ParseResult{}
	state := resolver.State{Endpoints: eps, Attributes: attributes.New(attrKey{}, "state"), ServiceConfig: sc}
	if err := b.UpdateClientConnState(balancer.ClientConnState{ResolverState: state, BalancerConfig: cfg}); err != nil {
		t.Fatal(err)
	}

	want, err := subsetting.Balanced(addrs, 3, 1, 3)
	if err != nil {
		t.Fatal(err)
	}
	child := lastChild()
	if child.name != testChildName {
		t.Fatalf("child %q, want %q", child.name, testChildName)
	}
	got := child.last()
	if diff := cmp.Diff(want, sorted(child.ids())); diff != "" {
		t.Fatalf("child's endpoints (-want +got):\n%s", diff)
	}
	var wantEps []resolver.Endpoint
	var wantAddrs []resolver.Address
	for _, ep := range eps[:9] {
		if slices.Contains(want, ep.Addresses[0].Addr) {
			wantEps = append(wantEps, ep)
			wantAddrs = append(wantAddrs, ep.Addresses...)
		}
	}
	if diff := cmp.Diff(wantEps, got.ResolverState.Endpoints); diff != "" {
		t.Errorf("endpoints differ from the resolver's (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(wantAddrs, got.ResolverState.Addresses); diff != "" {
		t.Errorf("flat addresses (-want +got):\n%s", diff)
	}
	if !got.ResolverState.Attributes.Equal(state.Attributes) || got.ResolverState.ServiceConfig != sc {
		t.Errorf("state attributes or service config not preserved: %+v", got.ResolverState)
	}
	if got.BalancerConfig != cfg.ChildPolicy.Config {
		t.Errorf("child config %v, want the parsed %v", got.BalancerConfig, cfg.ChildPolicy.Config)
	}
}

// TestRecompute checks that the subset is computed again only when the set
// of backends or the config's subset fields change, and that the child gets
// every update anyway (attributes and its own config may have changed).
func TestRecompute(t *testing.T) {
	addrs := testkit.Addrs(9)
	cfg := parse(t, childConfig(`"subsetSize": 3, "clientIndex": 0, "clientCount": 3, `))
	b := newBalancer(testkit.NewClientConn(), balancer.BuildOptions{}, 1)
	defer b.Close()
	child := func() *recChild { return lastChild() }

	update(t, b, cfg, withAttrs(addrs, "a"))
	first := b.currentSubset()
	if b.computed != 1 {
		t.Fatalf("computed %d times after the first update", b.computed)
	}

	// Order only: same subset, no computation, the child sees the new
	// order.
	shuffled := slices.Clone(addrs)
	rand.New(rand.NewPCG(3, 4)).Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	update(t, b, cfg, withAttrs(shuffled, "a"))
	if b.computed != 1 {
		t.Errorf("order change: computed %d times, want 1", b.computed)
	}
	var inOrder []string
	for _, a := range shuffled {
		if slices.Contains(first, a) {
			inOrder = append(inOrder, a)
		}
	}
	if diff := cmp.Diff(inOrder, child().ids()); diff != "" {
		t.Errorf("order change: child's endpoints (-want +got):\n%s", diff)
	}

	// Attributes only: no computation, new attributes forwarded.
	update(t, b, cfg, withAttrs(addrs, "b"))
	if b.computed != 1 {
		t.Errorf("attribute change: computed %d times, want 1", b.computed)
	}
	if v := child().last().ResolverState.Endpoints[0].Attributes.Value(attrKey{}); !strings.HasPrefix(v.(string), "b-") {
		t.Errorf("attribute change not forwarded: %v", v)
	}

	// The child's config only: no computation, new config forwarded.
	cfg2 := parse(t, fmt.Sprintf(`{"subsetSize": 3, "clientIndex": 0, "clientCount": 3, "childPolicy": [{%q: {"tag": "t2"}}]}`, testChildName))
	update(t, b, cfg2, withAttrs(addrs, "b"))
	if b.computed != 1 {
		t.Errorf("child config change: computed %d times, want 1", b.computed)
	}
	if got := child().last().BalancerConfig.(*recConfig).Tag; got != "t2" {
		t.Errorf("child config tag %q, want t2", got)
	}

	// A member of the subset leaves: recomputed, and the child's subset is
	// the algorithm's answer for the smaller list.
	removed := first[0]
	without := slices.DeleteFunc(slices.Clone(addrs), func(a string) bool { return a == removed })
	update(t, b, cfg2, withAttrs(without, "b"))
	if b.computed != 2 {
		t.Errorf("removal: computed %d times, want 2", b.computed)
	}
	want, _ := subsetting.Balanced(without, 3, 0, 3)
	if diff := cmp.Diff(want, sorted(child().ids())); diff != "" {
		t.Errorf("after removing %s (-want +got):\n%s", removed, diff)
	}
	if slices.Contains(child().ids(), removed) {
		t.Errorf("removed backend %s still in the child's list", removed)
	}

	// A subset field changes: recomputed.
	cfg3 := parse(t, childConfig(`"subsetSize": 4, "clientIndex": 0, "clientCount": 3, `))
	update(t, b, cfg3, withAttrs(without, "b"))
	if b.computed != 3 || len(child().ids()) != 4 {
		t.Errorf("subsetSize change: computed %d times, %d endpoints; want 3, 4", b.computed, len(child().ids()))
	}
}

// TestBalancedAcrossUpdates checks that the balancer always selects what
// a client computing from scratch selects: over a rolling replacement of
// backends, a change of index and a detour through stable mode.
func TestBalancedAcrossUpdates(t *testing.T) {
	addrs := testkit.Addrs(120)
	b := newBalancer(testkit.NewClientConn(), balancer.BuildOptions{}, 1)
	defer b.Close()
	r := rand.New(rand.NewPCG(5, 6))
	index, next := 37, 0
	for step := range 30 {
		mode := "balanced"
		switch step {
		case 10:
			index = 79
		case 20:
			mode = "stable"
		}
		// A rolling restart: one backend leaves, another takes a new
		// address.
		i := r.IntN(len(addrs))
		addrs[i] = fmt.Sprintf("127.0.0.2:%d", 30000+next)
		next++
		cfg := parse(t, childConfig(fmt.Sprintf(`"subsetSize": 6, "clientIndex": %d, "clientCount": 80, "mode": %q, `, index, mode)))
		update(t, b, cfg, endpointsOf(addrs))
		want, _ := subsetting.Balanced(addrs, 6, index, 80)
		if mode == "stable" {
			want, _ = subsetting.Stable(addrs, 6, index, 80)
		}
		if diff := cmp.Diff(want, sorted(lastChild().ids())); diff != "" {
			t.Fatalf("step %d (%s, index %d): (-from scratch +balancer):\n%s", step, mode, index, diff)
		}
	}
}

// TestModes checks which algorithm each config selects, and that the
// random identity is fixed for the balancer's lifetime.
func TestModes(t *testing.T) {
	addrs := testkit.Addrs(40)
	stable, _ := subsetting.Stable(addrs, 5, 3, 10)
	balanced, _ := subsetting.Balanced(addrs, 5, 3, 10)
	byID, _ := subsetting.Rendezvous(addrs, 5, "pod-a")
	for _, tc := range []struct {
		name, extra string
		want        []string
	}{
		{"balanced", `"subsetSize": 5, "clientIndex": 3, "clientCount": 10, `, balanced},
		{"stable", `"subsetSize": 5, "clientIndex": 3, "clientCount": 10, "mode": "stable", `, stable},
		{"index wins over clientId", `"subsetSize": 5, "clientIndex": 3, "clientCount": 10, "clientId": "pod-a", `, balanced},
		{"clientId", `"subsetSize": 5, "clientId": "pod-a", `, byID},
		{"all", `"subsetSize": 40, "clientId": "pod-a", `, addrs},
		{"more than all", `"subsetSize": 100, "clientIndex": 1, "clientCount": 2, `, addrs},
	} {
		b := newBalancer(testkit.NewClientConn(), balancer.BuildOptions{}, 1)
		update(t, b, parse(t, childConfig(tc.extra)), endpointsOf(addrs))
		if diff := cmp.Diff(sorted(tc.want), sorted(lastChild().ids())); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.name, diff)
		}
		b.Close()
	}

	// No index and no clientId: rendezvous on the seed drawn at build.
	cfg := parse(t, childConfig(`"subsetSize": 5, `))
	b1 := newBalancer(testkit.NewClientConn(), balancer.BuildOptions{}, 11)
	defer b1.Close()
	update(t, b1, cfg, endpointsOf(addrs))
	got1 := sorted(lastChild().ids())
	want1, _ := subsetting.Rendezvous(addrs, 5, b1.randomID)
	if diff := cmp.Diff(want1, got1); diff != "" {
		t.Errorf("random seed (-want +got):\n%s", diff)
	}
	// Later updates keep the seed: a shuffled list and a removed
	// non-member change nothing.
	var nonMember string
	for _, a := range addrs {
		if !slices.Contains(got1, a) {
			nonMember = a
			break
		}
	}
	smaller := slices.DeleteFunc(slices.Clone(addrs), func(a string) bool { return a == nonMember })
	slices.Reverse(smaller)
	update(t, b1, cfg, endpointsOf(smaller))
	if diff := cmp.Diff(got1, sorted(lastChild().ids())); diff != "" {
		t.Errorf("random seed, after removing non-member %s (-before +after):\n%s", nonMember, diff)
	}
	// Another balancer draws another seed, so clients spread.
	b2 := newBalancer(testkit.NewClientConn(), balancer.BuildOptions{}, 12)
	defer b2.Close()
	update(t, b2, cfg, endpointsOf(addrs))
	if slices.Equal(got1, sorted(lastChild().ids())) {
		t.Errorf("seeds 11 and 12 chose the same subset %v", got1)
	}
}

// TestForwarding checks that ResolverError, ExitIdle and Close reach the
// child, and that a closed child can no longer update the channel.
func TestForwarding(t *testing.T) {
	cc := testkit.NewClientConn()
	b := newBalancer(cc, balancer.BuildOptions{}, 1)
	update(t, b, parse(t, childConfig(`"subsetSize": 2, `)), endpointsOf(testkit.Addrs(4)))
	child := lastChild()

	rerr := errors.New("resolver down")
	b.ResolverError(rerr)
	b.ExitIdle()
	b.ExitIdle()
	child.mu.Lock()
	gotErrs, idles := slices.Clone(child.resolverErrors), child.exitIdles
	child.mu.Unlock()
	if len(gotErrs) != 1 || gotErrs[0] != rerr {
		t.Errorf("child got resolver errors %v, want [%v]", gotErrs, rerr)
	}
	if idles != 2 {
		t.Errorf("child got %d ExitIdle calls, want 2", idles)
	}

	// The child's own state updates pass through while it is current.
	child.cc.UpdateState(balancer.State{ConnectivityState: connectivity.Connecting})
	if n := cc.Updates(); n != 1 {
		t.Fatalf("child's UpdateState: %d channel updates, want 1", n)
	}
	b.Close()
	child.mu.Lock()
	closed := child.closed
	child.mu.Unlock()
	if !closed {
		t.Error("Close not forwarded to the child")
	}
	child.cc.UpdateState(balancer.State{ConnectivityState: connectivity.Ready})
	if n := cc.Updates(); n != 1 {
		t.Errorf("a closed child updated the channel: %d updates, want 1", n)
	}
	// Calls after Close are ignored, not forwarded to a closed child.
	b.ResolverError(rerr)
	b.ExitIdle()
	if err := b.UpdateClientConnState(balancer.ClientConnState{BalancerConfig: parse(t, childConfig(`"subsetSize": 2, `))}); err != nil {
		t.Errorf("update after Close: %v", err)
	}
	if lastChild() != child {
		t.Error("an update after Close built a new child")
	}
}

// TestChildSwitch checks that naming another child closes the old one and
// builds the new one, which gets the subset; the old one is muted.
func TestChildSwitch(t *testing.T) {
	cc := testkit.NewClientConn()
	b := newBalancer(cc, balancer.BuildOptions{}, 1)
	defer b.Close()
	addrs := testkit.Addrs(6)
	update(t, b, parse(t, childConfig(`"subsetSize": 2, "clientId": "x", `)), endpointsOf(addrs))
	old := lastChild()
	update(t, b, parse(t, fmt.Sprintf(`{"subsetSize": 2, "clientId": "x", "childPolicy": [{%q: {}}]}`, testChildOther)), endpointsOf(addrs))
	cur := lastChild()
	if cur == old || cur.name != testChildOther {
		t.Fatalf("child after switch: %q (same as before: %v)", cur.name, cur == old)
	}
	old.mu.Lock()
	closed := old.closed
	old.mu.Unlock()
	if !closed {
		t.Error("old child not closed")
	}
	if b.computed != 1 {
		t.Errorf("child switch recomputed the subset: %d computations", b.computed)
	}
	want, _ := subsetting.Rendezvous(addrs, 2, "x")
	if diff := cmp.Diff(want, sorted(cur.ids())); diff != "" {
		t.Errorf("new child's endpoints (-want +got):\n%s", diff)
	}
	before := cc.Updates()
	old.cc.UpdateState(balancer.State{ConnectivityState: connectivity.Ready})
	if cc.Updates() != before {
		t.Error("the old child updated the channel after the switch")
	}
}

// TestResolverErrorBeforeConfig checks that with no child yet a resolver
// error fails RPCs with that error instead of leaving them queued.
func TestResolverErrorBeforeConfig(t *testing.T) {
	cc := testkit.NewClientConn()
	b := newBalancer(cc, balancer.BuildOptions{}, 1)
	defer b.Close()
	b.ResolverError(errors.New("no such host"))
	s := cc.State()
	if s.ConnectivityState != connectivity.TransientFailure {
		t.Fatalf("state %v, want TRANSIENT_FAILURE", s.ConnectivityState)
	}
	if _, err := s.Picker.Pick(balancer.PickInfo{}); err == nil || !strings.Contains(err.Error(), "pickwise_subset: resolver error: no such host") {
		t.Errorf("pick error %v", err)
	}
	b.ExitIdle() // no child: nothing to forward, must not panic
}

// TestBadInput checks a missing config and an empty endpoint list.
func TestBadInput(t *testing.T) {
	b := newBalancer(testkit.NewClientConn(), balancer.BuildOptions{}, 1)
	defer b.Close()
	err := b.UpdateClientConnState(balancer.ClientConnState{ResolverState: resolver.State{Endpoints: endpointsOf(testkit.Addrs(2))}})
	if err == nil || !strings.Contains(err.Error(), "pickwise_subset: unexpected config type <nil>") {
		t.Errorf("no config: error %v", err)
	}
	// The child decides what an empty list means; its error is returned
	// (here ErrBadResolverState, so grpc re-resolves).
	err = b.UpdateClientConnState(balancer.ClientConnState{BalancerConfig: parse(t, childConfig(`"subsetSize": 2, `))})
	if !errors.Is(err, balancer.ErrBadResolverState) {
		t.Errorf("empty list: error %v, want ErrBadResolverState", err)
	}
	if n := len(lastChild().last().ResolverState.Endpoints); n != 0 {
		t.Errorf("empty list: child got %d endpoints", n)
	}
}

// TestRealChild builds the parent with the default child, pickwise_p2c,
// over the fake ClientConn: SubConns exist only for the subset, picks land
// only there, and a removed member's SubConn is shut down while its
// replacement gets one.
func TestRealChild(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	addrs := testkit.Addrs(9)
	cc := testkit.NewClientConn()
	b := newBalancer(cc, balancer.BuildOptions{}, 1)
	defer b.Close()
	// removalGrace 0s: the child closes a removed backend's connection at
	// once, rather than keep it for the backend's return.
	cfg := parse(t, `{"subsetSize": 3, "clientIndex": 2, "clientCount": 3, "childPolicy": [{"pickwise_p2c": {"removalGrace": "0s"}}]}`)
	update(t, b, cfg, endpointsOf(addrs))
	want, _ := subsetting.Balanced(addrs, 3, 2, 3)
	if err := cc.SetReady(ctx, want...); err != nil {
		t.Fatal(err)
	}
	if err := cc.WaitForState(ctx, connectivity.Ready); err != nil {
		t.Fatal(err)
	}
	checkSubConns := func(want []string) {
		t.Helper()
		var live []string
		for _, sc := range cc.SubConns() {
			if !slices.Contains(addrs, sc.Addr()) {
				t.Errorf("SubConn for unknown address %s", sc.Addr())
			}
			if !sc.IsShutdown() {
				live = append(live, sc.Addr())
			}
		}
		if diff := cmp.Diff(want, sorted(live)); diff != "" {
			t.Errorf("live SubConns (-subset +got):\n%s", diff)
		}
	}
	checkSubConns(want)
	inSubset := func(want []string) func(balancer.PickResult, error) error {
		return func(res balancer.PickResult, err error) error {
			if err != nil {
				return err
			}
			if a := res.SubConn.(*testkit.SubConn).Addr(); !slices.Contains(want, a) {
				return fmt.Errorf("picked %s, outside the subset %v", a, want)
			}
			return nil
		}
	}
	if _, err := cc.WaitForPicks(ctx, 50, inSubset(want)); err != nil {
		t.Fatal(err)
	}

	removed := want[1]
	without := slices.DeleteFunc(slices.Clone(addrs), func(a string) bool { return a == removed })
	update(t, b, cfg, endpointsOf(without))
	want2, _ := subsetting.Balanced(without, 3, 2, 3)
	var added []string
	for _, a := range want2 {
		if !slices.Contains(want, a) {
			added = append(added, a)
		}
	}
	if err := cc.SetReady(ctx, added...); err != nil {
		t.Fatal(err)
	}
	if _, err := cc.WaitForPicks(ctx, 50, inSubset(want2)); err != nil {
		t.Fatal(err)
	}
	checkSubConns(want2)
	for _, sc := range cc.SubConns() {
		if sc.Addr() == removed && !sc.IsShutdown() {
			t.Errorf("removed backend %s's SubConn is still live", removed)
		}
	}
	t.Logf("subset %v -> %v after removing %s", want, want2, removed)
}
