package p2c_test

import (
	"errors"
	"testing"
	"time"

	"github.com/pickwise/pickwise/internal/testkit"
	"github.com/pickwise/pickwise/lbconfig"
	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/connectivity"
)

// The tests below are the engine's parking of removed endpoints
// (removalGrace), seen through pickwise_p2c: a removed endpoint that
// returns on the connection it left with is the same process, and comes
// back with its state and no ramp; any other return is a newcomer's.
// Slow start is by time alone in each, so that only the ramp's start, not
// the evidence that could end it, tells them apart.

const timeOnly = `{"slowStart": {"timeOnly": true}}`

// rampedShare is the share of a ramping endpoint among three of weight 1
// at the start of its ramp (10% of its weight): 0.1 / 2.1.
const rampedShare = 0.1 / 2.1

// waitWakes lets the balancer's goroutines that close and reconnect
// children return.
func waitWakes(h *harness) {
	h.B.(interface{ WaitWakes() }).WaitWakes()
}

func TestRemovedEndpointReturnsOnItsConnection(t *testing.T) {
	h := newHarness(t, timeOnly)
	as := addrs(3)
	h.Start(as...)
	sc := h.CC.SubConnFor(as[2])

	if err := h.Update(endpointsOf(as[:2])...); err != nil {
		t.Fatal(err)
	}
	got, _ := h.Count(300, false)
	if got[as[2]] != 0 {
		t.Fatalf("removed endpoint got %d of 300 picks", got[as[2]])
	}
	h.Clock.Advance(lbconfig.DefaultRemovalGrace - time.Second)
	if err := h.Update(endpointsOf(as)...); err != nil {
		t.Fatal(err)
	}
	if sc.IsShutdown() || h.CC.SubConnFor(as[2]) != sc {
		t.Fatal("the returning endpoint did not keep its connection")
	}
	// Not a newcomer: its full share at once, with no new connection.
	got, _ = h.Count(3000, false)
	within(t, "share of the endpoint back on its connection", float64(got[as[2]])/3000, 1.0/3, 0.03)
	// Nothing is left to close it later.
	h.Clock.Advance(2 * lbconfig.DefaultRemovalGrace)
	if sc.IsShutdown() {
		t.Fatal("the returned endpoint's connection was closed by the removal's grace")
	}
}

func TestRemovedEndpointKeepsItsEvidence(t *testing.T) {
	// Without slow start, which would hold a newcomer to a small share
	// too.
	h := newHarness(t, `{"slowStart": {"enabled": false}}`)
	as := addrs(3)
	h.Start(as...)
	// as[2] fails every call it gets, until the penalty all but stops
	// sending it any.
	for range 2000 {
		a, done := h.Pick()
		var err error
		if a == as[2] {
			err = errors.New("unavailable")
		}
		done(outcome(err))
	}
	before, _ := h.Count(3000, false)
	if share := float64(before[as[2]]) / 3000; share > 0.1 {
		t.Fatalf("failing endpoint's share %.3f before its removal: the setup did not penalize it", share)
	}
	sc := h.CC.SubConnFor(as[2])
	if err := h.Update(endpointsOf(as[:2])...); err != nil {
		t.Fatal(err)
	}
	if err := h.Update(endpointsOf(as)...); err != nil {
		t.Fatal(err)
	}
	if h.CC.SubConnFor(as[2]) != sc {
		// Not kept (removalGrace 0s): a new connection comes up.
		h.Ready(as[2])
	}
	after, _ := h.Count(3000, false)
	if share := float64(after[as[2]]) / 3000; share > 0.1 {
		t.Errorf("failing endpoint's share %.3f after it returned on its connection: its failures were forgotten", share)
	}
}

func TestRemovedEndpointReturnsAsNewcomer(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  string
		// away is what happens while the endpoint is out of the list.
		away func(t *testing.T, h *harness, sc *testkit.SubConn)
	}{
		{"its connection dropped", timeOnly, func(t *testing.T, h *harness, sc *testkit.SubConn) {
			sc.UpdateState(idle)
			waitWakes(h)
			if !sc.IsShutdown() {
				t.Fatal("a parked endpoint's connection that dropped was not closed")
			}
		}},
		{"after its grace", timeOnly, func(t *testing.T, h *harness, sc *testkit.SubConn) {
			h.Clock.Advance(lbconfig.DefaultRemovalGrace)
			if !sc.IsShutdown() {
				t.Fatal("a parked endpoint's connection outlived removalGrace")
			}
		}},
		{"removalGrace 0s", `{"slowStart": {"timeOnly": true}, "removalGrace": "0s"}`, func(t *testing.T, h *harness, sc *testkit.SubConn) {
			if !sc.IsShutdown() {
				t.Fatal("with removalGrace 0s, a removed endpoint's connection was not closed at once")
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, tc.cfg)
			as := addrs(3)
			h.Start(as...)
			h.Serve()
			old := h.CC.SubConnFor(as[2])
			if err := h.Update(endpointsOf(as[:2])...); err != nil {
				t.Fatal(err)
			}
			tc.away(t, h, old)
			if err := h.Update(endpointsOf(as)...); err != nil {
				t.Fatal(err)
			}
			if h.CC.SubConnFor(as[2]) == old {
				t.Fatal("the returning endpoint reused a closed connection")
			}
			h.Ready(as[2])
			got, _ := h.Count(3000, false)
			within(t, "share of the endpoint back as a newcomer", float64(got[as[2]])/3000, rampedShare, 0.015)
		})
	}
}

func TestCloseClosesParkedEndpoints(t *testing.T) {
	h := newHarness(t, `{}`)
	as := addrs(3)
	h.Start(as...)
	sc := h.CC.SubConnFor(as[2])
	if err := h.Update(endpointsOf(as[:2])...); err != nil {
		t.Fatal(err)
	}
	h.B.Close()
	if !sc.IsShutdown() {
		t.Fatal("Close left a parked endpoint's connection open")
	}
	if n := h.Clock.Pending(); n != 0 {
		t.Fatalf("%d timers pending after Close", n)
	}
}

// idle is a connection's end, as grpc reports it.
var idle = balancer.SubConnState{ConnectivityState: connectivity.Idle}

// TestEmptyListKeepsConnections: a resolver that returns no endpoints for
// a moment (a DNS answer lost) and then all of them again finds every
// connection where it was: nothing reconnects, and nothing ramps.
func TestEmptyListKeepsConnections(t *testing.T) {
	h := newHarness(t, timeOnly)
	as := addrs(3)
	h.Start(as...)
	before := map[string]*testkit.SubConn{}
	for _, a := range as {
		before[a] = h.CC.SubConnFor(a)
	}
	if err := h.Update(); !errors.Is(err, balancer.ErrBadResolverState) {
		t.Fatalf("UpdateClientConnState with no endpoints = %v, want ErrBadResolverState", err)
	}
	if err := h.Update(endpointsOf(as)...); err != nil {
		t.Fatal(err)
	}
	for _, a := range as {
		if sc := h.CC.SubConnFor(a); sc != before[a] || sc.IsShutdown() {
			t.Fatalf("%s: a new connection after the empty list", a)
		}
	}
	got, _ := h.Count(3000, false)
	for _, a := range as {
		within(t, "share after the empty list", float64(got[a])/3000, 1.0/3, 0.03)
	}
}
