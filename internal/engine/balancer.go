package engine

import (
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/balancer/endpointsharding"
	"google.golang.org/grpc/balancer/pickfirst"
	"google.golang.org/grpc/balancer/weightedtarget"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/experimental/balancer/weight"
	estats "google.golang.org/grpc/experimental/stats"
	"google.golang.org/grpc/grpclog"
	"google.golang.org/grpc/resolver"
)

var logger = grpclog.Component("pickwise")

// engineBalancer is the balancer.Balancer behind every policy. It owns an
// endpointsharding child with one pickfirst per endpoint, intercepts the
// child's aggregated state, keeps the per-endpoint state and hands the
// policy a Snapshot of READY endpoints whenever something changes.
type engineBalancer struct {
	// Immutable after build.
	name  string
	mode  connectMode // eager, or onDemand under Spec.Lazy
	cc    balancer.ClientConn
	child balancer.Balancer
	clock Clock
	rand  Rand

	// Shared with every endpoint's Done callback; atomic inside.
	shared doneShared

	mu          sync.Mutex // guards everything below
	policy      Policy
	closed      bool
	endpoints   *resolver.EndpointMap[*Endpoint]
	byAddr      map[string]*Endpoint // single-address endpoints: a lookup without EndpointMap's key allocation
	byAnyAddr   map[string]*Endpoint // every address of every endpoint, to find a connection's endpoint
	order       []*Endpoint          // endpoints in resolver order, duplicates removed
	ramp        *ramp
	latency     *latency
	everReady   bool           // a READY picker has been published
	gen         uint64         // counts updates from endpointsharding
	children    int            // endpoints endpointsharding reported last
	aggregate   balancer.State // endpointsharding's last aggregate
	resolverErr error          // last resolver error, for messages
	rampTimer   Timer
	rampTimerAt int64           // UnixNano when rampTimer fires; 0 if none
	weights     *weightKeeper   // nil unless the policy asks for Settings.Weights
	locality    string          // the endpoints' xDS locality, if any: a metrics label
	picker      balancer.Picker // the policy's last picker; nil while none is published
	// Ejection counts since the last flush to the metrics.
	ejections, readmissions uint64

	// Immutable after construction.
	metrics           estats.MetricsRecorder
	policyMetrics     *Metrics // nil: the policy records none
	target            string   // the channel's target, the metrics' label
	unregisterMetrics func()   // stops grpc calling reportMetrics
}

func newBalancer(s Spec, cc balancer.ClientConn, bOpts balancer.BuildOptions, opts Options) *engineBalancer {
	b := &engineBalancer{
		name:              s.Name,
		mode:              eager{},
		cc:                cc,
		clock:             opts.Clock,
		rand:              opts.Rand,
		policy:            s.NewPolicy(),
		endpoints:         resolver.NewEndpointMap[*Endpoint](),
		metrics:           cc.MetricsRecorder(),
		target:            bOpts.Target.String(),
		policyMetrics:     s.Metrics,
		unregisterMetrics: func() {},
	}
	if b.metrics == nil {
		b.metrics = noMetrics{}
	}
	b.shared.work = doneWork{owner: b, clock: opts.Clock}
	if m := b.policyMetrics; m != nil && cc.MetricsRecorder() != nil {
		b.unregisterMetrics = b.metrics.RegisterAsyncReporter(estats.AsyncMetricReporterFunc(b.reportMetrics), m.ready, m.ramping, m.ejected)
		b.shared.work.recordsMetrics = true
	}
	b.shared.clock = opts.Clock
	if s.Lazy {
		b.mode = onDemand{}
	}
	childBuilder, esOpts := b.mode.children(balancer.Get(pickfirst.Name).Build)
	b.child = endpointsharding.NewBalancer(childCC{ClientConn: cc, b: b}, bOpts, childBuilder, esOpts)
	return b
}

// connectMode is what sets the two kinds of policy apart: which endpoints
// connect and when, and what their pickers see. eager (below) connects
// every endpoint and publishes pickers over the READY ones; onDemand
// (lazy.go) connects an endpoint when a pick asks for it and publishes
// pickers over all of them. Everything else in the balancer is the same
// for both.
type connectMode interface {
	// children returns the builder of endpointsharding's children, given
	// pickfirst's, and endpointsharding's options.
	children(pickfirst childBuilder) (childBuilder, endpointsharding.Options)
	// exitIdle is the balancer's ExitIdle.
	exitIdle(child balancer.Balancer)
	// publishLocked gives the parent a picker for the balancer's current
	// state.
	publishLocked(b *engineBalancer, now int64)
}

// childBuilder builds one of endpointsharding's children.
type childBuilder = func(balancer.ClientConn, balancer.BuildOptions) balancer.Balancer

// eager is the connectMode of load-aware policies: every endpoint
// connects, and reconnects after it falls IDLE, and pickers see the READY
// ones.
type eager struct{}

func (eager) children(pf childBuilder) (childBuilder, endpointsharding.Options) {
	return pf, endpointsharding.Options{}
}

func (eager) exitIdle(child balancer.Balancer) { child.ExitIdle() }

func (eager) publishLocked(b *engineBalancer, now int64) { b.publishReadyLocked(now) }

// childCC is the ClientConn endpointsharding sees: everything passes
// through to the real ClientConn except UpdateState, which the engine turns
// into a policy picker.
type childCC struct {
	balancer.ClientConn
	b *engineBalancer
}

func (c childCC) UpdateState(s balancer.State) { c.b.updateFromChildren(s) }

// UpdateClientConnState applies the config and reconciles the endpoint set.
func (b *engineBalancer) UpdateClientConnState(ccs balancer.ClientConnState) error {
	b.mu.Lock()
	settings, err := b.policy.Configure(ccs.BalancerConfig)
	if err != nil {
		b.mu.Unlock()
		logger.Errorf("%s: %v", b.name, err)
		return balancer.ErrBadResolverState
	}
	b.ramp = newRamp(settings.SlowStart)
	b.latency = newLatency(settings.Latency)
	b.shared.latency.Store(b.latency)
	pen := newPenalty(settings.FailurePenalty)
	b.shared.penalty.Store(pen)
	b.shared.ejector.Store(newEjector(settings.Ejection, pen))
	if pen == nil {
		// Forget failures seen while the penalty was on, so that turning it
		// on again does not resurrect them, and readmit everyone.
		for _, e := range b.endpoints.All() {
			e.outcomeBits.Store(0)
			e.ejection.ejected = false
		}
	}
	b.resolverErr = nil
	b.locality = weightedtarget.LocalityFromResolverState(ccs.ResolverState)

	next := resolver.NewEndpointMap[*Endpoint]()
	b.byAddr = make(map[string]*Endpoint, len(ccs.ResolverState.Endpoints))
	b.byAnyAddr = make(map[string]*Endpoint, len(ccs.ResolverState.Endpoints))
	b.order = b.order[:0]
	for _, ep := range ccs.ResolverState.Endpoints {
		if _, dup := next.Get(ep); dup {
			continue
		}
		e, ok := b.endpoints.Get(ep)
		if !ok {
			// Endpoints known before the first READY picker are the initial
			// fleet: they are not cold newcomers, so they skip slow start.
			e = newEndpoint(firstAddr(ep), &b.shared, b.everReady)
			if b.weights != nil {
				b.weights.add(e)
			}
		}
		next.Set(ep, e)
		if len(ep.Addresses) == 1 {
			b.byAddr[ep.Addresses[0].Addr] = e
		}
		for _, a := range ep.Addresses {
			b.byAnyAddr[a.Addr] = e
		}
		b.order = append(b.order, e)
	}
	for ep, e := range b.endpoints.All() {
		if _, kept := next.Get(ep); !kept {
			e.weights.closeOOB()
			b.flushPicksLocked(e)
		}
	}
	b.endpoints = next
	b.configureWeightsLocked(settings.Weights)
	b.mu.Unlock()

	// endpointsharding calls back into updateFromChildren synchronously, so
	// the lock must not be held here.
	return b.child.UpdateClientConnState(balancer.ClientConnState{
		ResolverState: pickfirst.EnableHealthListener(ccs.ResolverState),
	})
}

// ResolverError keeps the error for the no-endpoint message and lets the
// children decide whether to keep using their connections.
func (b *engineBalancer) ResolverError(err error) {
	b.mu.Lock()
	b.resolverErr = err
	b.mu.Unlock()
	b.child.ResolverError(err)
}

// UpdateSubConnState is never called: every SubConn is created by a
// pickfirst child with a StateListener.
func (b *engineBalancer) UpdateSubConnState(sc balancer.SubConn, _ balancer.SubConnState) {
	logger.Errorf("%s: unexpected UpdateSubConnState for %v", b.name, sc)
}

// ExitIdle wakes the children, as the connectMode says.
func (b *engineBalancer) ExitIdle() { b.mode.exitIdle(b.child) }

// Close shuts the children down and stops every timer: slow start, the
// work Dones asked for, and weight updates.
func (b *engineBalancer) Close() {
	b.mu.Lock()
	b.closed = true
	if b.rampTimer != nil {
		b.rampTimer.Stop()
		b.rampTimer = nil
	}
	b.shared.work.stop()
	if b.weights != nil {
		b.weights.stop(b.order)
	}
	for _, e := range b.order {
		b.flushPicksLocked(e)
	}
	b.flushOutcomesLocked()
	b.picker = nil
	b.mu.Unlock()
	// Outside the lock: a sink that is collecting holds its own lock while
	// it calls reportMetrics, which takes ours.
	b.unregisterMetrics()
	b.child.Close()
}

// updateFromChildren receives endpointsharding's aggregate state.
func (b *engineBalancer) updateFromChildren(s balancer.State) {
	children := endpointsharding.ChildStatesFromPicker(s.Picker)
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return
	}
	now := b.clock.Nanotime()
	b.gen++
	for _, c := range children {
		e := b.lookupLocked(c.Endpoint)
		if e == nil {
			continue
		}
		b.trackLocked(e, c.State.ConnectivityState, now)
		e.picker = c.State.Picker
		e.weight = float64(max(weight.FromEndpoint(c.Endpoint).Weight, 1))
		e.gen = b.gen
		e.resolved, e.exitIdle = c.Endpoint, c.ExitIdle
	}
	b.children = len(children)
	b.aggregate = s
	b.publishLocked(now)
}

// lookupLocked finds the engine's state for an endpoint endpointsharding
// reports. Every update reports every endpoint, so this runs n times per
// update; the address map keeps it free of allocations for the common
// single-address endpoint.
func (b *engineBalancer) lookupLocked(ep resolver.Endpoint) *Endpoint {
	if len(ep.Addresses) == 1 {
		return b.byAddr[ep.Addresses[0].Addr]
	}
	e, _ := b.endpoints.Get(ep)
	return e
}

// trackLocked follows one endpoint's connectivity to decide when it starts a
// slow-start ramp: on its first READY if it joined after the initial fleet,
// and on any READY that follows a connection failure, since a backend that
// was down is a new, cold process. A READY after a plain reconnect (a
// GOAWAY, an idle timeout) is the same warm process and does not ramp.
func (b *engineBalancer) trackLocked(e *Endpoint, st connectivity.State, now int64) {
	prev := e.state
	e.state = st
	switch {
	case st == connectivity.Ready && prev != connectivity.Ready:
		e.ramping, e.rampStart = e.coldReady, now
		e.coldReady = false
	case st == connectivity.TransientFailure:
		e.coldReady = true
	}
}

// publishLocked gives the parent a picker for the current state.
func (b *engineBalancer) publishLocked(now int64) { b.mode.publishLocked(b, now) }

// publishReadyLocked gives the parent an eager policy's picker: one over
// the READY endpoints that are not ejected.
func (b *engineBalancer) publishReadyLocked(now int64) {
	// Resolver order keeps seeded runs reproducible (endpointsharding
	// reports children in map order) without sorting on every update.
	ready := make([]Ready, 0, len(b.order))
	var ejected []Ready
	var rampEnd int64 // earliest end of a running ramp
	for _, e := range b.order {
		if e.gen != b.gen || e.state != connectivity.Ready {
			continue
		}
		r := Ready{Picker: e.picker, Stats: e, InvWeight: 1 / e.weight}
		if end := b.rampEndLocked(e, now); end != 0 {
			r.RampStart, r.RampEnd = e.rampStart, end
			if rampEnd == 0 || end < rampEnd {
				rampEnd = end
			}
		}
		if e.ejection.ejected {
			ejected = append(ejected, r)
			continue
		}
		ready = append(ready, r)
	}
	if len(ready) == 0 {
		// The cap never ejects the last READY endpoint, but one may have
		// lost its connection since: placing on an ejected endpoint beats
		// failing every call.
		ready, ejected = ejected, nil
	}

	if len(ready) == 0 {
		b.publishNoneLocked()
		b.scheduleRampEndLocked(0, now)
		return
	}

	b.everReady = true
	snap := b.snapshotLocked(ready, now)
	snap.Ejected = ejected
	snap.ramp = b.ramp
	if b.weights != nil {
		snap.Weights, snap.WeightsFallback = b.weights.forPicker(ready)
		if snap.WeightsFallback {
			b.recordFallbackLocked()
		}
	}
	b.publishPickerLocked(connectivity.Ready, snap)
	b.scheduleRampEndLocked(rampEnd, now)
}

// rampEndLocked is when e's slow-start ramp ends, or 0 if e is not
// ramping at now.
func (b *engineBalancer) rampEndLocked(e *Endpoint, now int64) int64 {
	if b.ramp == nil || !e.ramping {
		return 0
	}
	if end := e.rampStart + b.ramp.window; end > now {
		return end
	}
	return 0
}

// publishPickerLocked gives the parent the policy's picker over snap, and
// keeps it for the metrics (CostReporter).
func (b *engineBalancer) publishPickerLocked(state connectivity.State, snap *Snapshot) {
	b.picker = b.policy.NewPicker(snap)
	b.cc.UpdateState(balancer.State{ConnectivityState: state, Picker: b.picker})
}

// publishNoneLocked gives the parent a picker that explains why nothing
// can be picked, in endpointsharding's aggregate state.
func (b *engineBalancer) publishNoneLocked() {
	b.picker = nil
	b.cc.UpdateState(balancer.State{
		ConnectivityState: b.aggregate.ConnectivityState,
		Picker:            b.noReadyPickerLocked(),
	})
}

// scheduleRampEndLocked arranges a republish when the earliest running ramp
// ends, so that pickers stop reading the clock for endpoints at full weight.
func (b *engineBalancer) scheduleRampEndLocked(at, now int64) {
	if at == b.rampTimerAt {
		return
	}
	if b.rampTimer != nil {
		b.rampTimer.Stop()
		b.rampTimer = nil
	}
	b.rampTimerAt = at
	if at == 0 {
		return
	}
	b.rampTimer = b.clock.AfterFunc(time.Duration(at-now), func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		if b.closed || b.rampTimerAt != at {
			return
		}
		b.rampTimer, b.rampTimerAt = nil, 0
		b.publishLocked(b.clock.Nanotime())
	})
}

// snapshotLocked is a Snapshot of ready with the engine's services.
func (b *engineBalancer) snapshotLocked(ready []Ready, now int64) *Snapshot {
	return &Snapshot{
		Endpoints: ready,
		Clock:     b.clock,
		Rand:      b.rand,
		penalty:   b.shared.penalty.Load(),
		ejector:   b.shared.ejector.Load(),
		shared:    &b.shared,
		latency:   b.latency,
		Built:     now,
	}
}

// noReadyPickerLocked explains why nothing can be picked.
func (b *engineBalancer) noReadyPickerLocked() balancer.Picker {
	if b.children == 0 {
		err := fmt.Errorf("%s: no endpoints to pick from", b.name)
		if b.resolverErr != nil {
			err = fmt.Errorf("%s: no endpoints to pick from: resolver error: %v", b.name, b.resolverErr)
		}
		return errPicker{err: err}
	}
	return &noReadyPicker{name: b.name, total: b.children, child: b.aggregate.Picker, state: b.aggregate.ConnectivityState}
}

// firstAddr names an endpoint by its first address.
func firstAddr(ep resolver.Endpoint) string {
	if len(ep.Addresses) == 0 {
		return ""
	}
	return ep.Addresses[0].Addr
}
