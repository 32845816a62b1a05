package engine

import (
	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/balancer/lazy"
	"google.golang.org/grpc/connectivity"
)

// This file is the engine's side of affinity policies (Spec.Lazy), the
// ones gRFC A61 describes for ring hash: a key names one endpoint whatever
// its state, so the picker needs every endpoint, not only the READY ones,
// and connections open only where keys lead.

// onDemand is the connectMode of affinity policies.
type onDemand struct{}

// children wraps each pickfirst in grpc's lazy balancer: a child stays
// IDLE, without even a pickfirst, until asked to connect.
func (onDemand) children(pf childBuilder) childBuilder {
	return func(cc balancer.ClientConn, o balancer.BuildOptions) balancer.Balancer {
		return lazy.NewBalancer(cc, o, pf)
	}
}

// reconnects is false: a child that falls back to IDLE stays there until a
// pick wants it again.
func (onDemand) reconnects() bool { return false }

func (onDemand) followsChild() bool { return true }

// exitIdle wakes nobody: picks decide which endpoints connect, and waking
// all of them would open a connection to every backend of a large fleet
// for nothing. While the aggregate is CONNECTING or TRANSIENT_FAILURE and
// nothing is connecting, publisher.publishLazy wakes one IDLE endpoint.
func (onDemand) exitIdle(*engineBalancer) {}

func (onDemand) aggregate(counts stateCounts, total int) connectivity.State {
	return lazyAggregate(counts, total)
}

// readyLocked gives the parent the picker it has again: grpc retries the
// calls it queued, and those waiting for the endpoint that turned READY
// reach it through its READY connection (Endpoint.conn), before the
// snapshot that shows it is built.
func (onDemand) readyLocked(b *engineBalancer) {
	if b.pub.picker != nil {
		b.cc.UpdateState(balancer.State{ConnectivityState: b.pub.coalesce.published, Picker: b.pub.picker})
	}
}

func (onDemand) publishLocked(b *engineBalancer, now int64) { b.pub.publishLazy(now) }

// lazyAggregate is gRFC A61's aggregate state of a ring-hash-like policy:
// READY if any endpoint is; TRANSIENT_FAILURE if two or more failed, so
// that a parent fails over instead of waiting on a picker that would walk
// past them; CONNECTING if one is connecting or, among several endpoints,
// exactly one failed (a key walks past it); IDLE if one is idle; else
// TRANSIENT_FAILURE.
func lazyAggregate(counts stateCounts, total int) connectivity.State {
	switch {
	case counts[connectivity.Ready] > 0:
		return connectivity.Ready
	case counts[connectivity.TransientFailure] > 1:
		return connectivity.TransientFailure
	case counts[connectivity.Connecting] > 0:
		return connectivity.Connecting
	case counts[connectivity.TransientFailure] == 1 && total > 1:
		return connectivity.Connecting
	case counts[connectivity.Idle] > 0:
		return connectivity.Idle
	}
	return connectivity.TransientFailure
}
