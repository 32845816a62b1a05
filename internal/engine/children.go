package engine

import (
	"sync"
	"sync/atomic"

	"github.com/pickwise/pickwise/internal/evidence"
	"google.golang.org/grpc/attributes"
	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/connectivity"
	estats "google.golang.org/grpc/experimental/stats"
	"google.golang.org/grpc/resolver"
)

// This file is the balancer's sharding: one child balancer per endpoint (a
// pickfirst, under onDemand wrapped in grpc's lazy balancer), as grpc's
// endpointsharding does, but with each child reporting to its own
// Endpoint. endpointsharding rebuilds a list of every child on every
// child's update, so that bringing up n endpoints costs O(n²) before a
// policy even sees it; here a child's update costs O(1) and the balancer
// decides when a new picker is worth its O(n) (coalesce.go).

// child is one endpoint's child balancer and the balancer.ClientConn it
// sees: the channel's, except that its state goes to the engine and its
// connections are followed for ORCA streams.
type child struct {
	balancer.ClientConn
	// Immutable after creation.
	b *engineBalancer
	e *Endpoint

	mu     sync.Mutex // serializes calls into lb: ExitIdle comes from goroutines
	lb     balancer.Balancer
	closed bool

	// Guarded by the balancer's mu.
	removed bool // no longer in the resolver's list: its reports are stale
	// parkSeq numbers a removed child's parking, kept for its endpoint's
	// return (parked.go), 0 if it is not parked; parkedKey is its
	// endpoint's key in the parked list.
	parkSeq   uint64
	parkedKey string
	// What the child was last given: its endpoint and the resolver
	// state's attributes; unset until the first update.
	sent      resolver.Endpoint
	sentAttrs *attributes.Attributes
	updated   bool
}

// staleLocked says whether the child must be given its endpoint again,
// and if so notes it as sent. A READY child given the endpoint it has,
// with the same attributes, would do nothing with it (pickfirst keeps its
// connection): skipping it spares a resolver update over a large fleet
// most of its cost. Any other child gets every update, as grpc's own
// sharding does: one that is failing may take it as a cue to try again.
func (c *child) staleLocked(attrs *attributes.Attributes) bool {
	ep := c.e.resolved
	if c.updated && c.e.state == connectivity.Ready && attrs.Equal(c.sentAttrs) && sameEndpoint(ep, c.sent) {
		return false
	}
	c.sent, c.sentAttrs, c.updated = ep, attrs, true
	return true
}

// sameEndpoint says whether a and b have the same addresses, in the same
// order, and the same attributes.
func sameEndpoint(a, b resolver.Endpoint) bool {
	if len(a.Addresses) != len(b.Addresses) || !a.Attributes.Equal(b.Attributes) {
		return false
	}
	for i := range a.Addresses {
		if !a.Addresses[i].Equal(b.Addresses[i]) {
			return false
		}
	}
	return true
}

// newChild creates e's child; build must follow, outside the balancer's
// lock, since a child may report its state while being built.
func newChild(b *engineBalancer, e *Endpoint) *child {
	c := &child{ClientConn: b.cc, b: b, e: e}
	e.exitIdle = func() { b.wakes.Go(c.exitIdle) }
	return c
}

// build creates the child balancer.
func (c *child) build(build childBuilder, opts balancer.BuildOptions) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.closed {
		c.lb = build(c, opts)
	}
}

// update gives the child its endpoint.
func (c *child) update(s balancer.ClientConnState) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	return c.lb.UpdateClientConnState(s)
}

// resolverError passes a resolver error on.
func (c *child) resolverError(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.closed {
		c.lb.ResolverError(err)
	}
}

// exitIdle asks the child to connect.
func (c *child) exitIdle() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.closed && c.lb != nil {
		c.lb.ExitIdle()
	}
}

// close shuts the child down; later calls do nothing.
func (c *child) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.closed {
		c.closed = true
		if c.lb != nil {
			c.lb.Close()
		}
	}
}

// UpdateState records the child's state in its endpoint. An eager policy's
// child that falls IDLE (its connection closed) is asked to reconnect, on
// a goroutine: the child may be calling from inside its own methods.
func (c *child) UpdateState(s balancer.State) {
	b := c.b
	b.mu.Lock()
	if b.closed || c.removed {
		closing := !b.closed && b.parking.childState(c, s.ConnectivityState)
		b.mu.Unlock()
		if closing {
			// Not on this goroutine: the child may be calling from
			// inside its own methods.
			b.wakes.Go(c.close)
		}
		return
	}
	b.childStateLocked(c.e, s)
	b.mu.Unlock()
	if s.ConnectivityState == connectivity.Idle && b.mode.reconnects() {
		b.wakes.Go(c.exitIdle)
	}
}

// MetricsRecorder is the channel's, never nil (ChildMetricsRecorder).
func (c *child) MetricsRecorder() estats.MetricsRecorder {
	return ChildMetricsRecorder(c.ClientConn)
}

// NewSubConn follows the connections the child creates, so that the one
// its endpoint uses can carry the endpoint's ORCA stream. The child knows
// its endpoint, so two endpoints sharing an address never get each other's
// stream.
func (c *child) NewSubConn(addrs []resolver.Address, opts balancer.NewSubConnOptions) (balancer.SubConn, error) {
	// The SubConn is known only once NewSubConn returns. grpc delivers no
	// state before that, but a fake ClientConn may (its waiters act the
	// moment it records the SubConn, and lazy children create SubConns on
	// goroutines), so the listener reads it atomically.
	var ref atomic.Pointer[balancer.SubConn]
	listener := opts.StateListener
	opts.StateListener = func(s balancer.SubConnState) {
		if p := ref.Load(); p != nil {
			c.b.subConnStateChanged(c.e, *p, s)
		}
		listener(s)
	}
	//lint:ignore SA1019 the deprecation is of multi-address SubConns; pickfirst creates one per address through this call, and the engine only passes it on
	sc, err := c.ClientConn.NewSubConn(addrs, opts)
	if err == nil {
		ref.Store(&sc)
		c.bindOutcomes(sc)
	}
	return sc, err
}

// bindOutcomes offers the parent the functions that feed e's evidence
// and, under Spec.ParentLoad, its in-flight count, when the parent wants
// them.
func (c *child) bindOutcomes(sc balancer.SubConn) {
	o, ok := c.ClientConn.(OutcomeObserver)
	if !ok {
		return
	}
	b, e := c.b, c.e
	feed := EndpointFeed{
		Outcome: func(info balancer.DoneInfo, took int64) {
			sh := &b.shared
			if lat := sh.latency.Load(); lat != nil && took > 0 {
				e.observe(info, took, sh.clock.Nanotime(), lat)
			}
			if info.Err != nil || e.outcomeBits.Load() != evidence.HealthyBits {
				e.record(info, sh)
			}
		},
	}
	if b.parentLoad {
		feed.Load = func(started bool) {
			// In flight only: not one of the engine's picks, whose
			// counts by reason stay its own.
			if started {
				e.inflight.Add(1)
			} else {
				e.inflight.Add(^uint32(0))
			}
		}
	}
	o.BindOutcomes(sc, feed)
}

// childStateLocked records a child's new state in its endpoint, and
// hands the change to the publisher.
func (b *engineBalancer) childStateLocked(e *Endpoint, s balancer.State) {
	now := b.clock.Nanotime()
	from, to := e.state, s.ConnectivityState
	b.slowStart.track(e, to, now)
	e.picker = s.Picker
	e.live.set(s.Picker)
	e.followChild(to, s.Picker, b.mode.followsChild())
	b.pub.readyList.changed(e)
	b.pub.memberList.changed(e)
	b.counts.move(from, to)
	if to <= connectivity.Shutdown {
		b.lastIn[to] = e
	}
	b.pub.childChanged(from, to, now)
}

// subConnStateChanged follows an endpoint's connections for its ORCA
// stream (reportedWeights.connection).
func (b *engineBalancer) subConnStateChanged(e *Endpoint, sc balancer.SubConn, s balancer.SubConnState) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed || b.children[e] == nil {
		return // closed, or e is no longer in the resolver's list
	}
	b.weights.connection(e, sc, s)
}
