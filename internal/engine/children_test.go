package engine

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/pickwise/pickwise/internal/fakecc"
	"google.golang.org/grpc/attributes"
	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/experimental/balancer/weight"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/serviceconfig"
)

func TestChildStaleOnlyWhenSomethingChanged(t *testing.T) {
	ep := resolver.Endpoint{Addresses: []resolver.Address{{Addr: "a"}, {Addr: "b"}}}
	attrs := attributes.New("k", "v")
	e := newEndpoint("a", &doneShared{}, false)
	c := &child{e: e}
	e.resolved = ep
	steps := []struct {
		what  string
		state connectivity.State
		ep    resolver.Endpoint
		attrs *attributes.Attributes
		want  bool
	}{
		{"first update", connectivity.Idle, ep, attrs, true},
		{"same, not READY", connectivity.Connecting, ep, attrs, true},
		{"same, READY", connectivity.Ready, ep, attrs, false},
		{"resolver attributes changed", connectivity.Ready, ep, attributes.New("k", "w"), true},
		{"same again", connectivity.Ready, ep, attributes.New("k", "w"), false},
		{"weight changed", connectivity.Ready, weight.Set(ep, weight.EndpointInfo{Weight: 3}), attributes.New("k", "w"), true},
		{"addresses reordered", connectivity.Ready, resolver.Endpoint{Addresses: []resolver.Address{{Addr: "b"}, {Addr: "a"}}}, attributes.New("k", "w"), true},
		{"failing child, same", connectivity.TransientFailure, resolver.Endpoint{Addresses: []resolver.Address{{Addr: "b"}, {Addr: "a"}}}, attributes.New("k", "w"), true},
	}
	for _, s := range steps {
		e.state, e.resolved = s.state, s.ep
		if got := c.staleLocked(s.attrs); got != s.want {
			t.Errorf("%s: stale = %v, want %v", s.what, got, s.want)
		}
	}
}

func TestEndpointKeyMatchesEndpointMap(t *testing.T) {
	ep := func(addrs ...string) resolver.Endpoint {
		var e resolver.Endpoint
		for _, a := range addrs {
			e.Addresses = append(e.Addresses, resolver.Address{Addr: a})
		}
		return e
	}
	eps := []resolver.Endpoint{
		ep("a"), ep("b"), ep("a", "b"), ep("b", "a"), ep("a", "b", "c"), ep("ab"), ep("a", "a"),
		ep("1:a"), ep("a", "1:a"), weight.Set(ep("a"), weight.EndpointInfo{Weight: 5}), ep(),
	}
	ref := resolver.NewEndpointMap[int]()
	for i, e := range eps {
		for j, f := range eps[:i] {
			_, refSame := func() (int, bool) {
				ref = resolver.NewEndpointMap[int]()
				ref.Set(f, j)
				return ref.Get(e)
			}()
			if same := endpointKey(e) == endpointKey(f); same != refSame {
				t.Errorf("endpoints %v and %v: same key = %v, EndpointMap says %v", e.Addresses, f.Addresses, same, refSame)
			}
		}
	}
}

// TestCloseShutsEveryChild: after resolver updates that add, drop and
// reorder endpoints, Close shuts down the SubConn of every endpoint still
// listed, and a second Close (a parent closing its child again) does
// nothing more.
func TestCloseShutsEveryChild(t *testing.T) {
	var last *Snapshot
	spec := Spec{
		Name:        "close_test",
		ParseConfig: func(json.RawMessage) (serviceconfig.LoadBalancingConfig, error) { return nil, nil },
		NewPolicy:   func() Policy { return recordingPolicy{last: &last} },
	}
	cc := fakecc.NewClientConn()
	b := newBalancer(spec, cc, balancer.BuildOptions{}, Options{Clock: SystemClock{}, Rand: NewSeededRand(1)})
	update := func(ports ...int) {
		var eps []resolver.Endpoint
		for _, p := range ports {
			eps = append(eps, resolver.Endpoint{Addresses: []resolver.Address{{Addr: fmt.Sprintf("127.0.0.1:%d", p)}}})
		}
		if err := b.UpdateClientConnState(balancer.ClientConnState{ResolverState: resolver.State{Endpoints: eps}}); err != nil {
			t.Fatal(err)
		}
	}
	update(1, 2, 3, 4)
	update(4, 2, 5)
	update(5, 6, 2, 4)
	if n := cc.NumSubConns(); n < 4 {
		t.Fatalf("%d SubConns live before Close, want the 4 endpoints' at least", n)
	}
	b.Close()
	b.Close()
	for _, sc := range cc.SubConns() {
		if !sc.IsShutdown() {
			t.Errorf("SubConn of %s still up after Close", sc.Addr())
		}
	}
}
