package shadow

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/pickwise/pickwise/internal/fakecc"
	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/resolver"
)

// recordingChild stands for a child's side of one view: the states and
// health reports it was told, in order.
type recordingChild struct {
	mu     sync.Mutex
	states []connectivity.State
	health []connectivity.State
}

func (r *recordingChild) listener(s balancer.SubConnState) {
	r.mu.Lock()
	r.states = append(r.states, s.ConnectivityState)
	r.mu.Unlock()
}

func (r *recordingChild) healthListener(s balancer.SubConnState) {
	r.mu.Lock()
	r.health = append(r.health, s.ConnectivityState)
	r.mu.Unlock()
}

func (r *recordingChild) told() ([]connectivity.State, []connectivity.State) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.states), slices.Clone(r.health)
}

// waitTold waits until the child was told want (states) and wantHealth.
func (r *recordingChild) waitTold(t *testing.T, what string, want, wantHealth []connectivity.State) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, gotHealth := r.told()
		if slices.Equal(got, want) && slices.Equal(gotHealth, wantHealth) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: told %v, health %v; want %v, health %v", what, got, gotHealth, want, wantHealth)
		}
		time.Sleep(time.Millisecond)
	}
}

type connsHarness struct {
	cc *fakecc.ClientConn
	q  *queue
	c  *conns
}

func newConnsHarness(t *testing.T) *connsHarness {
	h := &connsHarness{cc: fakecc.NewClientConn(), q: newQueue()}
	h.c = newConns(h.cc, h.q)
	t.Cleanup(func() { h.q.stop(true) })
	return h
}

// view makes child's view of addr, run under the queue's lock as a
// child's NewSubConn is.
func (h *connsHarness) view(t *testing.T, child int, addr string, r *recordingChild) balancer.SubConn {
	t.Helper()
	var sc balancer.SubConn
	var err error
	h.q.run(func() {
		sc, err = h.c.newSubConn(child, []resolver.Address{{Addr: addr}}, balancer.NewSubConnOptions{StateListener: r.listener})
	})
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

var (
	connecting = connectivity.Connecting
	ready      = connectivity.Ready
	idle       = connectivity.Idle
	tf         = connectivity.TransientFailure
	shutdown   = connectivity.Shutdown
)

func states(s ...connectivity.State) []connectivity.State { return s }

// TestSharedSubConn walks one address through the life the shadow gives
// it: two views, one real SubConn; only live's Connect connects it; a view
// that asks later is told CONNECTING and the current state; health is
// watched once and told to both; the real SubConn ends with its last view.
func TestSharedSubConn(t *testing.T) {
	h := newConnsHarness(t)
	var live, cand recordingChild
	lv := h.view(t, liveChild, "a:1", &live)
	cv := h.view(t, candidateChild, "a:1", &cand)
	if n := h.cc.NumSubConns(); n != 1 {
		t.Fatalf("%d real SubConns for one address, want 1", n)
	}
	real := h.cc.SubConnFor("a:1")

	cv.Connect()
	if got := real.Connects(); got != 0 {
		t.Fatalf("the candidate's Connect connected the real SubConn (%d): only live's may", got)
	}
	lv.Connect()
	if got := real.Connects(); got != 1 {
		t.Fatalf("live's Connect: %d connects, want 1", got)
	}
	real.UpdateState(balancer.SubConnState{ConnectivityState: connecting})
	// pickfirst registers its health listener when told READY.
	lv.(*view).listener = func(s balancer.SubConnState) {
		live.listener(s)
		if s.ConnectivityState == ready {
			lv.RegisterHealthListener(live.healthListener)
		}
	}
	real.UpdateState(balancer.SubConnState{ConnectivityState: ready})
	live.waitTold(t, "live", states(connecting, ready), states(ready))
	cand.waitTold(t, "candidate, which asked first", states(connecting, ready), nil)

	// A view that asks once the real SubConn is READY gets a replay, and
	// its health listener the latest report, without a second
	// registration on the real SubConn.
	var late recordingChild
	lateView := h.view(t, candidateChild, "a:1", &late)
	lateView.Connect()
	late.waitTold(t, "a late view", states(connecting, ready), nil)
	lateView.RegisterHealthListener(late.healthListener)
	late.waitTold(t, "a late view's health", states(connecting, ready), states(ready))
	real.SendHealth(balancer.SubConnState{ConnectivityState: tf})
	live.waitTold(t, "live's health", states(connecting, ready), states(ready, tf))
	late.waitTold(t, "the late view's health", states(connecting, ready), states(ready, tf))

	// IDLE is told to every follower, which must ask again.
	real.UpdateState(balancer.SubConnState{ConnectivityState: idle})
	live.waitTold(t, "live after IDLE", states(connecting, ready, idle), states(ready, tf))
	cand.waitTold(t, "candidate after IDLE", states(connecting, ready, idle), nil)

	cv.Shutdown()
	lateView.Shutdown()
	if real.IsShutdown() {
		t.Fatal("the real SubConn was shut down while live's view holds it")
	}
	cand.waitTold(t, "candidate shut down", states(connecting, ready, idle, shutdown), nil)
	lv.Shutdown()
	if !real.IsShutdown() {
		t.Fatal("the real SubConn outlived its last view")
	}
	// A new view of the address gets a new real SubConn.
	var again recordingChild
	h.view(t, liveChild, "a:1", &again)
	if n := h.cc.NumSubConns(); n != 2 {
		t.Fatalf("%d SubConns made, want 2: the second after the first was shut down", n)
	}
}

// TestCandidateDrivesDuringCanary checks that the candidate's pending
// requests are honoured once a canary lets it connect, and that a SubConn
// of several addresses is never shared.
func TestCandidateDrivesDuringCanary(t *testing.T) {
	h := newConnsHarness(t)
	var cand recordingChild
	cv := h.view(t, candidateChild, "b:1", &cand)
	cv.Connect()
	real := h.cc.SubConnFor("b:1")
	if real.Connects() != 0 {
		t.Fatal("connected before the canary")
	}
	h.c.letCandidateDrive(true)
	if real.Connects() != 1 {
		t.Fatalf("canary on: %d connects, want 1", real.Connects())
	}
	real.UpdateState(balancer.SubConnState{ConnectivityState: connecting})
	cand.waitTold(t, "candidate", states(connecting), nil)

	for range 2 {
		var r recordingChild
		h.q.run(func() {
			if _, err := h.c.newSubConn(liveChild, []resolver.Address{{Addr: "c:1"}, {Addr: "c:2"}}, balancer.NewSubConnOptions{StateListener: r.listener}); err != nil {
				t.Error(err)
			}
		})
	}
	if n := h.cc.NumSubConns(); n != 3 {
		t.Fatalf("%d SubConns, want 3: two of several addresses, never shared", n)
	}
}

// TestQueueStops checks that a stopped queue drops its work and that its
// goroutine ends (goleak checks the package).
func TestQueueStops(t *testing.T) {
	q := newQueue()
	ran := make(chan int, 10)
	for i := range 3 {
		q.schedule(func() { ran <- i })
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for want := range 3 {
		select {
		case got := <-ran:
			if got != want {
				t.Fatalf("ran %d, want %d: out of order", got, want)
			}
		case <-ctx.Done():
			t.Fatal(fmt.Sprint("scheduled work did not run: ", want))
		}
	}
	q.stop(true)
	q.schedule(func() { ran <- 99 })
	q.stop(true)
	if len(ran) != 0 {
		t.Fatal("work ran after stop")
	}
}
