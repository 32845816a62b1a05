package subset

import (
	"slices"
	"testing"
	"time"

	"github.com/pickwise/pickwise/internal/subsetting"
	"github.com/pickwise/pickwise/internal/testkit"
	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/resolver"
)

// TestRejoinHold: a backend of the subset that leaves is replaced; when it
// comes back it stays out for the hold, flaps included, and then takes its
// slot back on its own, by the timer. A newcomer joins at once.
func TestRejoinHold(t *testing.T) {
	addrs := testkit.Addrs(8)
	cfg := parse(t, childConfig(`"subsetSize": 3, "clientIndex": 0, "clientCount": 2, "rejoinHold": "30s", `))
	clock := testkit.NewFakeClock()
	b := newBalancer(testkit.NewClientConn(), balancer.BuildOptions{}, 1)
	b.clock = clock
	defer b.Close()
	update := func(as []string) {
		t.Helper()
		if err := b.UpdateClientConnState(balancer.ClientConnState{ResolverState: resolver.State{Endpoints: endpointsOf(as)}, BalancerConfig: cfg}); err != nil {
			t.Fatal(err)
		}
	}
	all := addrs[:7]
	update(all)
	first := b.currentSubset()
	x := first[0]
	without := slices.DeleteFunc(slices.Clone(all), func(a string) bool { return a == x })
	update(without)
	away := b.currentSubset()
	if slices.Contains(away, x) {
		t.Fatalf("%s left but is still in the subset %v", x, away)
	}
	update(all)
	if got := b.currentSubset(); !slices.Equal(got, away) {
		t.Fatalf("%s came back: subset %v at once, want %v kept for the hold", x, got, away)
	}
	clock.Advance(20 * time.Second)
	update(without) // a flap during the hold
	update(all)
	clock.Advance(20 * time.Second) // 40 s since it first came back, 20 s since the flap
	if got := b.currentSubset(); !slices.Equal(got, away) {
		t.Fatalf("20 s after a flap: subset %v, want %v (the hold starts over)", got, away)
	}
	clock.Advance(11 * time.Second) // the timer readmits it
	if got := b.currentSubset(); !slices.Equal(got, first) {
		t.Fatalf("after the hold: subset %v, want %v", got, first)
	}
	if got := lastChild().ids(); !slices.Equal(sorted(got), first) {
		t.Fatalf("after the hold the child has %v, want %v", got, first)
	}

	// A newcomer is not held: the subset is computed with it at once.
	update(addrs)
	want, err := subsetting.Balanced(addrs, 3, 0, 2)
	if err != nil {
		t.Fatal(err)
	}
	if got := b.currentSubset(); !slices.Equal(got, sorted(want)) {
		t.Fatalf("with a newcomer: subset %v, want %v", got, want)
	}
}

// TestRejoinHoldOff: "0s" readmits a returning backend at once.
func TestRejoinHoldOff(t *testing.T) {
	addrs := testkit.Addrs(7)
	cfg := parse(t, childConfig(`"subsetSize": 3, "clientIndex": 0, "clientCount": 2, "rejoinHold": "0s", `))
	b := newBalancer(testkit.NewClientConn(), balancer.BuildOptions{}, 1)
	b.clock = testkit.NewFakeClock()
	defer b.Close()
	update := func(as []string) {
		t.Helper()
		if err := b.UpdateClientConnState(balancer.ClientConnState{ResolverState: resolver.State{Endpoints: endpointsOf(as)}, BalancerConfig: cfg}); err != nil {
			t.Fatal(err)
		}
	}
	update(addrs)
	first := b.currentSubset()
	update(slices.DeleteFunc(slices.Clone(addrs), func(a string) bool { return a == first[0] }))
	update(addrs)
	if got := b.currentSubset(); !slices.Equal(got, first) {
		t.Fatalf("with the hold off: subset %v, want %v back at once", got, first)
	}
}

// TestRejoinHoldConfig: the default and the bounds.
func TestRejoinHoldConfig(t *testing.T) {
	cfg := parse(t, `{"subsetSize": 3}`)
	if got := time.Duration(cfg.RejoinHold); got != DefaultRejoinHold {
		t.Errorf("default rejoinHold %v, want %v", got, DefaultRejoinHold)
	}
	for js, want := range map[string]string{
		`{"subsetSize": 3, "rejoinHold": "-1s"}`: "pickwise_subset: rejoinHold -1s: must be in [0s, 1h0m0s]",
		`{"subsetSize": 3, "rejoinHold": "2h"}`:  "pickwise_subset: rejoinHold 2h0m0s: must be in [0s, 1h0m0s]",
	} {
		if _, err := ParseConfig([]byte(js)); err == nil || err.Error() != want {
			t.Errorf("ParseConfig(%s) = %v, want %q", js, err, want)
		}
	}
}

// TestRejoinHoldNeverStarves: after an update that emptied the list, every
// backend is a returner; the hold admits enough of them for a full subset
// at once rather than leave the client with none.
func TestRejoinHoldNeverStarves(t *testing.T) {
	addrs := testkit.Addrs(6)
	cfg := parse(t, childConfig(`"subsetSize": 3, "clientId": "c", `))
	b := newBalancer(testkit.NewClientConn(), balancer.BuildOptions{}, 1)
	b.clock = testkit.NewFakeClock()
	defer b.Close()
	if err := b.UpdateClientConnState(balancer.ClientConnState{ResolverState: resolver.State{Endpoints: endpointsOf(addrs)}, BalancerConfig: cfg}); err != nil {
		t.Fatal(err)
	}
	_ = b.UpdateClientConnState(balancer.ClientConnState{ResolverState: resolver.State{}, BalancerConfig: cfg})
	if err := b.UpdateClientConnState(balancer.ClientConnState{ResolverState: resolver.State{Endpoints: endpointsOf(addrs)}, BalancerConfig: cfg}); err != nil {
		t.Fatal(err)
	}
	if got := b.currentSubset(); len(got) != 3 {
		t.Fatalf("after the list came back: subset %v, want 3 backends at once", got)
	}
}
