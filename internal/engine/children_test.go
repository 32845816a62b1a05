package engine

import (
	"testing"

	"google.golang.org/grpc/attributes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/experimental/balancer/weight"
	"google.golang.org/grpc/resolver"
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
