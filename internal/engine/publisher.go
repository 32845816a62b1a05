package engine

import (
	"fmt"
	"time"

	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/connectivity"
)

// publisher gives the parent the policy's pickers: it decides when a
// change is published (coalescing bursts, coalesce.go), keeps the READY
// and member lists between publishes (readylist.go), and builds each
// Snapshot. It reads the balancer's endpoints and owns the rest.
//
// Guarded by the balancer's mu.
type publisher struct {
	b          *engineBalancer
	coalesce   coalescer
	readyList  readyList       // the READY endpoints, between publishes
	memberList memberList      // all of them, between a lazy policy's publishes
	picker     balancer.Picker // the policy's last picker; nil while none is published
}

// publish gives the parent a picker for the current state.
func (p *publisher) publish(now int64) { p.b.mode.publishLocked(p.b, now) }

// publishReady gives the parent an eager policy's picker: one over
// the READY endpoints that are not ejected.
func (p *publisher) publishReady(now int64) {
	b := p.b
	ready, ejected := p.readyList.take(b.order)
	kept := &p.readyList.weights // what the list keeps of ready's weights
	if len(ready) == 0 {
		// The cap never ejects the last READY endpoint, but one may have
		// lost its connection since: placing on an ejected endpoint beats
		// failing every call.
		ready, ejected, kept = ejected, nil, nil
	}

	if len(ready) == 0 {
		p.publishNone()
		b.slowStart.republishAt(0, now)
		return
	}

	snap := p.snapshot(ready, now)
	snap.Ejected = ejected
	snap.ramp = b.slowStart.cfg
	var rampEnd int64
	snap.ramps, rampEnd = b.slowStart.spans(ready, now)
	if k := b.weights.keeper; k != nil {
		snap.Weights, snap.WeightsFallback = k.forPicker(ready, kept)
		if snap.WeightsFallback {
			b.rec.fallback()
		}
	}
	p.publishPicker(connectivity.Ready, snap)
	b.slowStart.republishAt(rampEnd, now)
}

// publishPicker gives the parent the policy's picker over snap, and
// keeps it for the metrics (CostReporter).
func (p *publisher) publishPicker(state connectivity.State, snap *Snapshot) {
	b := p.b
	p.picker = b.policy.NewPicker(snap)
	// The weights are the balancer's buffers (Snapshot.Weights): the
	// picker, which has read them, must not find them changed later.
	snap.Weights = nil
	b.rec.published(p.picker)
	p.updateState(state, p.picker)
}

// publishNone gives the parent a picker that explains why nothing
// can be picked, in the connectMode's aggregate state.
func (p *publisher) publishNone() {
	b := p.b
	p.picker = nil
	b.rec.published(nil)
	state := b.mode.aggregate(b.counts, len(b.order))
	p.updateState(state, p.noReadyPicker(state))
}

// snapshot is a Snapshot of ready with the engine's services.
func (p *publisher) snapshot(ready []Ready, now int64) *Snapshot {
	b := p.b
	return &Snapshot{
		Endpoints:  ready,
		Clock:      b.clock,
		Rand:       b.rand,
		penalty:    b.shared.penalty.Load(),
		ejector:    b.shared.ejector.Load(),
		shared:     &b.shared,
		latency:    b.latency,
		turns:      b.turns,
		loadProbes: b.loadProbes,
		Built:      now,
		unserved:   !b.shared.work.served.Load(),
	}
}

// noReadyPicker explains why nothing can be picked, the aggregate
// being state.
func (p *publisher) noReadyPicker(state connectivity.State) balancer.Picker {
	b := p.b
	if len(b.order) == 0 {
		err := fmt.Errorf("%s: no endpoints to pick from", b.name)
		if b.resolverErr != nil {
			err = fmt.Errorf("%s: no endpoints to pick from: resolver error: %v", b.name, b.resolverErr)
		}
		return errPicker{err: err}
	}
	// An endpoint in the aggregate state speaks for all: its picker wakes
	// it while IDLE and names its connection error once it failed. While
	// endpoints connect, calls wait for the next picker.
	var child balancer.Picker = queuePicker{}
	if state != connectivity.Connecting {
		if e := p.inState(state); e != nil && e.picker != nil {
			child = e.picker
		}
	}
	return &noReadyPicker{name: b.name, total: len(b.order), child: child, state: state}
}

// inState is an endpoint in state: the last one to enter it if it
// is still there (so that the error a call fails with is the latest), or
// else the first in resolver order. The scan is O(n), but it runs only
// when no endpoint is READY, once per publish.
func (p *publisher) inState(state connectivity.State) *Endpoint {
	b := p.b
	if e := b.lastIn[state]; e != nil && e.state == state && b.children[e] != nil {
		return e
	}
	for _, e := range b.order {
		if e.state == state {
			return e
		}
	}
	return nil
}

// soon publishes at the end of the window that began with the
// last publish: now if it has passed, else on a timer.
func (p *publisher) soon(now int64) {
	b := p.b
	c := &p.coalesce
	if c.timer != nil {
		return // a publish is due already, and will show this change
	}
	due := c.lastPublish + int64(window(len(b.order)))
	if due <= now {
		p.publish(now)
		return
	}
	c.due = due
	c.timer = b.clock.AfterFunc(time.Duration(due-now), func() {
		b.locked(func() {
			if c.due == due { // not published or stopped since
				c.timer, c.due = nil, 0
				p.publish(b.clock.Nanotime())
			}
		})
	})
}

// updateState gives the parent state and picker. Every publish ends
// here, so a deferred one is no longer needed.
func (p *publisher) updateState(state connectivity.State, picker balancer.Picker) {
	c := &p.coalesce
	c.stop()
	c.published, c.lastPublish = state, p.b.clock.Nanotime()
	p.b.cc.UpdateState(balancer.State{ConnectivityState: state, Picker: picker})
}

// publishLazy gives the parent a lazy policy's picker: one over every
// endpoint, published in every state (the picker must reach IDLE endpoints
// to wake them), with gRFC A61's aggregate state.
func (p *publisher) publishLazy(now int64) {
	b := p.b
	members, states, counts := p.memberList.take(b.order)
	ready, ejected := p.readyList.take(b.order)
	if len(members) == 0 {
		p.publishNone()
		return
	}
	state := lazyAggregate(counts, len(members))
	if (state == connectivity.Connecting || state == connectivity.TransientFailure) && counts[connectivity.Connecting] == 0 {
		// gRFC A61: while the channel is not READY, one endpoint must be
		// trying to connect, or a parent such as priority would never see
		// this child recover. The first IDLE one in resolver order, so that
		// repeated updates wake the same endpoint rather than a new one
		// each time.
		for i, st := range states {
			if m := &members[i]; st.State() == connectivity.Idle && m.ExitIdle != nil {
				m.ExitIdle()
				break
			}
		}
	}
	snap := p.snapshot(ready, now)
	snap.Members, snap.States = members, states
	// Calls without a key reach ejected endpoints only as probes
	// (Snapshot.Probe); keyed calls meet them on their walk.
	snap.Ejected = ejected
	p.publishPicker(state, snap)
}

// weightsChanged drops the weights the ready list keeps for pickers.
func (p *publisher) weightsChanged() { p.readyList.weights.drop() }

// ejectionChanged updates the lists for e, ejected or readmitted.
func (p *publisher) ejectionChanged(e *Endpoint) {
	p.readyList.invalidate()
	p.memberList.changed(e)
}
