package engine

import (
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/attributes"
	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/balancer/pickfirst"
	"google.golang.org/grpc/balancer/weightedtarget"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/experimental/balancer/weight"
	estats "google.golang.org/grpc/experimental/stats"
	"google.golang.org/grpc/grpclog"
	"google.golang.org/grpc/resolver"
)

var logger = grpclog.Component("pickwise")

// engineBalancer is the balancer.Balancer behind every policy. It owns one
// child balancer per endpoint (children.go), keeps the per-endpoint state
// and hands the policy a Snapshot of READY endpoints when something
// changes, coalescing bursts of changes (coalesce.go).
type engineBalancer struct {
	// Immutable after build.
	name       string
	mode       connectMode // eager, or onDemand under Spec.Lazy
	parentLoad bool        // Spec.ParentLoad
	cc         balancer.ClientConn
	build      childBuilder // builds an endpoint's child
	bOpts      balancer.BuildOptions
	clock      Clock
	rand       Rand

	// Shared with every endpoint's Done callback; atomic inside.
	shared doneShared
	// Shared by the d-choice pickers the balancer publishes; atomic
	// inside, on a line of its own.
	turns *turns

	// wakes are the goroutines that ask children to connect (a child may
	// call back into the balancer, so never on the caller's). Nothing in
	// the balancer waits for them; tests that check what a publish shows
	// do, when a publish may have woken an endpoint. Wait only where no
	// wake can start uncounted meanwhile (a pick's ExitIdle, a child's
	// UpdateState on another goroutine): WaitGroup forbids an Add from
	// zero concurrent with a Wait.
	wakes sync.WaitGroup

	mu        sync.Mutex // guards everything below
	policy    Policy
	closed    bool
	endpoints map[string]*Endpoint // by endpointKey
	children  map[*Endpoint]*child
	order     []*Endpoint // endpoints in resolver order, duplicates removed
	counts    stateCounts // the endpoints in each connectivity state
	// lastIn is, for each state, the endpoint that entered it last: its
	// picker is what a call meets while no endpoint is READY.
	lastIn      [connectivity.Shutdown + 1]*Endpoint
	slowStart   slowStart
	latency     *latency
	resolverErr error // last resolver error, for messages
	parking     parking
	ejection    ejection
	weights     reportedWeights
	loadProbes  *loadProbes
	rec         recorder
	pub         publisher
	members     membership
	inspector   inspector
}

func newBalancer(s Spec, cc balancer.ClientConn, bOpts balancer.BuildOptions, opts Options) *engineBalancer {
	b := &engineBalancer{
		name:       s.Name,
		parentLoad: s.ParentLoad,
		mode:       eager{},
		cc:         cc,
		clock:      opts.Clock,
		rand:       opts.Rand,
		policy:     s.NewPolicy(),
		endpoints:  map[string]*Endpoint{},
		children:   map[*Endpoint]*child{},
		bOpts:      bOpts,
		turns:      newTurns(),
	}
	if s.Lazy {
		b.mode = onDemand{}
	}
	b.build = b.mode.children(balancer.Get(pickfirst.Name).Build)
	b.pub = publisher{b: b}
	b.pub.coalesce.published = noStateYet
	b.shared.clock = opts.Clock
	publish := b.pub.publish
	b.slowStart = slowStart{clock: opts.Clock, work: &b.shared.work, peers: &b.shared.peers, locked: b.locked, publish: publish}
	b.ejection = ejection{name: s.Name, clock: opts.Clock, shared: &b.shared, locked: b.locked, order: &b.order,
		changed: b.pub.ejectionChanged, publish: publish}
	b.parking = parking{clock: opts.Clock, locked: b.locked, enabled: b.mode.reconnects()}
	b.loadProbes = newLoadProbes(opts.Clock, opts.Rand, opts.LoadProber, logger.Infof)
	b.rec = newRecorder(cc, bOpts.Target.String(), s.Metrics, b)
	b.members = membership{name: s.Name, target: bOpts.Target.String()}
	b.inspector.built = opts.Clock.Nanotime()
	b.weights = reportedWeights{clock: opts.Clock, locked: b.locked, order: &b.order, rec: &b.rec,
		publish: publish, weightsChanged: b.pub.weightsChanged}
	b.shared.work = doneWork{owner: doneRoutes{&b.ejection, &b.rec, &b.slowStart}, clock: opts.Clock}
	// Last: the sink may call the reporter at once, from its own
	// goroutine; and it marks doneWork as recording.
	b.rec.register(cc, b.reportMetrics)
	return b
}

// doneRoutes sends the work a Done asks for to the feature that does it.
type doneRoutes struct {
	*ejection
	*recorder
	*slowStart
}

// connectMode is what sets the two kinds of policy apart: which endpoints
// connect and when, and what their pickers see. eager (below) connects
// every endpoint and publishes pickers over the READY ones; onDemand
// (lazy.go) connects an endpoint when a pick asks for it and publishes
// pickers over all of them. Everything else in the balancer is the same
// for both.
type connectMode interface {
	// children returns the builder of an endpoint's child, given
	// pickfirst's.
	children(pickfirst childBuilder) childBuilder
	// reconnects says whether a child that falls IDLE is asked to connect
	// again at once.
	reconnects() bool
	// followsChild says whether picks on an endpoint that is no longer
	// READY follow its child's latest picker (Endpoint.followChild), as a
	// lazy policy's must, to wake it and queue on it, rather than its
	// last READY one.
	followsChild() bool
	// exitIdle is the balancer's ExitIdle.
	exitIdle(b *engineBalancer)
	// aggregate is the state of the channel given how many endpoints are
	// in each state.
	aggregate(counts stateCounts, total int) connectivity.State
	// publishLocked gives the parent a picker for the balancer's current
	// state.
	publishLocked(b *engineBalancer, now int64)
	// readyLocked is told that an endpoint turned READY and the new picker
	// that shows it is deferred (coalesce.go).
	readyLocked(b *engineBalancer)
}

// childBuilder builds an endpoint's child.
type childBuilder = func(balancer.ClientConn, balancer.BuildOptions) balancer.Balancer

// eager is the connectMode of load-aware policies: every endpoint
// connects, and reconnects after it falls IDLE, and pickers see the READY
// ones.
type eager struct{}

func (eager) children(pf childBuilder) childBuilder { return pf }

func (eager) reconnects() bool { return true }

func (eager) followsChild() bool { return false }

func (eager) exitIdle(b *engineBalancer) { b.exitIdleAll() }

// aggregate is endpointsharding's rule: the best state any endpoint is in,
// READY over CONNECTING over IDLE over TRANSIENT_FAILURE.
func (eager) aggregate(counts stateCounts, _ int) connectivity.State {
	for _, st := range [...]connectivity.State{connectivity.Ready, connectivity.Connecting, connectivity.Idle} {
		if counts[st] > 0 {
			return st
		}
	}
	return connectivity.TransientFailure
}

func (eager) publishLocked(b *engineBalancer, now int64) { b.pub.publishReady(now) }

// readyLocked does nothing: an eager policy's calls do not wait for a
// particular endpoint, and the READY ones already published take them.
func (eager) readyLocked(*engineBalancer) {}

// UpdateClientConnState applies the config and reconciles the endpoint set.
func (b *engineBalancer) UpdateClientConnState(ccs balancer.ClientConnState) error {
	b.mu.Lock()
	settings, err := b.policy.Configure(ccs.BalancerConfig)
	if err != nil {
		b.mu.Unlock()
		logger.Errorf("%s: %v", b.name, err)
		return balancer.ErrBadResolverState
	}
	b.configureLocked(settings, ccs.ResolverState)
	rs := pickfirst.EnableHealthListener(ccs.ResolverState)
	added, removed, stale := b.reconcileLocked(ccs.ResolverState.Endpoints, settings, rs.Attributes)
	b.members.update(b.order, ccs.BalancerConfig, b.clock.Nanotime())
	b.pub.coalesce.hold = true
	b.mu.Unlock()

	// Children report their state synchronously while being built and
	// updated, so the lock is not held here; hold makes their reports wait
	// for the one publish below.
	for _, c := range added {
		c.build(b.build, b.bOpts)
	}
	for _, c := range removed {
		c.close()
	}
	err = b.updateChildren(stale, rs)

	b.mu.Lock()
	defer b.mu.Unlock()
	b.pub.coalesce.hold = false
	if !b.closed {
		b.pub.publish(b.clock.Nanotime())
	}
	if len(b.order) == 0 {
		return balancer.ErrBadResolverState
	}
	return err
}

// configureLocked hands each feature its part of a policy's settings.
func (b *engineBalancer) configureLocked(settings Settings, state resolver.State) {
	b.slowStart.configure(settings.SlowStart)
	b.latency = newLatency(settings.Latency)
	b.loadProbes.configure(settings.LoadProbing)
	b.shared.latency.Store(b.latency)
	pen := newPenalty(settings.FailurePenalty)
	b.shared.penalty.Store(pen)
	b.shared.ejector.Store(newEjector(settings.Ejection, pen))
	if pen == nil {
		b.ejection.penaltyOff(b.order)
		b.ejection.penaltyOff(b.parking.endpoints())
	}
	b.resolverErr = nil
	b.rec.setLocality(weightedtarget.LocalityFromResolverState(state))
}

// reconcileLocked makes the endpoint set the resolver's list eps: it
// returns the children to build (newcomers), to close (removed and not
// parked), and to update (stale: whose endpoint or attributes changed).
// An endpoint back from parking returns on the connection it left with.
func (b *engineBalancer) reconcileLocked(eps []resolver.Endpoint, settings Settings, attrs *attributes.Attributes) (added, removed, stale []*child) {
	b.pub.readyList.invalidate()
	b.pub.memberList.invalidate()
	next := make(map[string]*Endpoint, len(eps))
	b.order = b.order[:0]
	var returned []*Endpoint
	for _, ep := range eps {
		key := endpointKey(ep)
		if _, dup := next[key]; dup {
			continue
		}
		e, ok := b.endpoints[key]
		if !ok {
			c := b.parking.unpark(key)
			if c != nil {
				e = c.e
				returned = append(returned, e)
			} else {
				e = newEndpoint(firstAddr(ep), &b.shared, b.slowStart.joinsCold())
				b.weights.add(e)
				c = newChild(b, e)
				added = append(added, c)
			}
			b.children[e] = c
			b.counts.move(noStateYet, e.state)
		}
		e.resolved = ep
		e.weight = float64(max(weight.FromEndpoint(ep).Weight, 1))
		e.pos = len(b.order)
		next[key] = e
		b.order = append(b.order, e)
	}
	var picks pickCounts // of the removed endpoints, which no later flush sees
	now := b.clock.Nanotime()
	removed = b.parking.setGrace(settings.RemovalGrace, now)
	for key, e := range b.endpoints {
		if _, kept := next[key]; !kept {
			e.weights.closeOOB()
			b.rec.takePicks(e, &picks)
			c := b.children[e]
			c.removed = true
			delete(b.children, e)
			b.counts.move(e.state, noStateYet)
			if !b.parking.park(key, c, now) {
				removed = append(removed, c)
			}
		}
	}
	b.rec.recordPicks(&picks)
	b.endpoints = next
	b.weights.configure(settings.Weights, b.parking.endpoints)
	// What changed while a returning endpoint was out, once the config is
	// applied: its weight's tracker and ORCA stream, and an ejection that
	// nothing would end otherwise (the health ticks skipped it).
	for _, e := range returned {
		b.weights.rejoined(e)
		b.ejection.rejoined(e, now)
	}
	for _, c := range b.childrenInOrderLocked() {
		if c.staleLocked(attrs) {
			stale = append(stale, c)
		}
	}
	return added, removed, stale
}

// childrenInOrderLocked is every endpoint's child in resolver order,
// rotated to start at a random endpoint: clients that share a resolver
// then do not all connect to the same backend first. The draw is not the
// injected Rand's, whose sequence seeded runs keep for the pickers, and
// the order it changes is only the order of connection attempts.
func (b *engineBalancer) childrenInOrderLocked() []*child {
	if len(b.order) == 0 {
		return nil
	}
	return b.childrenFromLocked(rand.IntN(len(b.order)))
}

// childrenFromLocked is every endpoint's child in resolver order, from
// the endpoint at start round to the one before it. order lists every
// child: UpdateClientConnState deletes a child from the map when its
// endpoint leaves order.
func (b *engineBalancer) childrenFromLocked(start int) []*child {
	kids := make([]*child, len(b.order))
	for i := range kids {
		kids[i] = b.children[b.order[(start+i)%len(kids)]]
	}
	return kids
}

// updateChildren gives each child its endpoint as of the last
// staleLocked, and returns the first error a child returned.
func (b *engineBalancer) updateChildren(kids []*child, rs resolver.State) error {
	var first error
	for _, c := range kids {
		err := c.update(balancer.ClientConnState{ResolverState: resolver.State{
			Endpoints:  []resolver.Endpoint{c.sent},
			Attributes: rs.Attributes,
		}})
		if err != nil && first == nil {
			first = err
		}
	}
	return first
}

// ResolverError keeps the error for the no-endpoint message and lets the
// children decide whether to keep using their connections.
func (b *engineBalancer) ResolverError(err error) {
	b.mu.Lock()
	b.resolverErr = err
	kids := b.childrenInOrderLocked()
	b.pub.coalesce.hold = true
	b.mu.Unlock()
	for _, c := range kids {
		c.resolverError(err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.pub.coalesce.hold = false
	if !b.closed {
		b.pub.publish(b.clock.Nanotime())
	}
}

// UpdateSubConnState is never called: every SubConn is created by a
// pickfirst child with a StateListener.
func (b *engineBalancer) UpdateSubConnState(sc balancer.SubConn, _ balancer.SubConnState) {
	logger.Errorf("%s: unexpected UpdateSubConnState for %v", b.name, sc)
}

// ExitIdle wakes the children, as the connectMode says.
func (b *engineBalancer) ExitIdle() { b.mode.exitIdle(b) }

// WaitWakes returns once the goroutines that ask children to connect have
// returned, for a caller that runs the balancer on one goroutine of its
// own (the simulator, whose virtual clock only that goroutine may read)
// and calls it only while no pick or child update is under way elsewhere
// (see wakes).
func (b *engineBalancer) WaitWakes() { b.wakes.Wait() }

// exitIdleAll asks every child to connect, and publishes once after.
func (b *engineBalancer) exitIdleAll() {
	b.mu.Lock()
	kids := b.childrenInOrderLocked()
	b.pub.coalesce.hold = true
	b.mu.Unlock()
	for _, c := range kids {
		c.exitIdle()
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.pub.coalesce.hold = false
	if !b.closed {
		b.pub.publish(b.clock.Nanotime())
	}
}

// Close shuts the children down and stops every timer: slow start, the
// work Dones asked for, and weight updates.
func (b *engineBalancer) Close() {
	b.mu.Lock()
	if b.closed {
		// A parent may close a child twice; the children are gone.
		b.mu.Unlock()
		return
	}
	b.closed = true
	unregisterLive(b)
	b.slowStart.stop()
	b.shared.work.stop()
	b.pub.coalesce.stop()
	b.weights.stop()
	b.loadProbes.stop()
	b.rec.stop(b.order)
	b.pub.picker = nil
	// In resolver order, the order the children were made in, which is
	// about the order they lie in memory: over a large fleet, closing them
	// in a map's order instead waits on a cache miss per child.
	kids := append(b.childrenFromLocked(0), b.parking.takeAll()...)
	b.children = map[*Endpoint]*child{}
	b.mu.Unlock()
	// Outside the lock: a sink that is collecting holds its own lock while
	// it calls reportMetrics, which takes ours; and children call back.
	b.rec.unregister()
	for _, c := range kids {
		c.close()
	}
}

// runLocked runs f under the balancer's lock unless the balancer is
// closed: the shape of every timer's work (engineBalancer.locked).
type runLocked = func(f func())

// locked runs f under the lock unless the balancer is closed.
func (b *engineBalancer) locked(f func()) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.closed {
		f()
	}
}

// endpointKey identifies an endpoint as grpc's resolver.EndpointMap does,
// by its addresses, order and attributes aside, but without
// EndpointMap's encoding: a single-address endpoint, the common case, is
// keyed by its address as it is. A multi-address key starts with a NUL
// byte, which no address does, and length-prefixes each sorted address.
func endpointKey(ep resolver.Endpoint) string {
	switch len(ep.Addresses) {
	case 0:
		return "\x00"
	case 1:
		return ep.Addresses[0].Addr
	}
	addrs := make([]string, len(ep.Addresses))
	for i, a := range ep.Addresses {
		addrs[i] = a.Addr
	}
	slices.Sort(addrs)
	var k strings.Builder
	k.WriteByte(0)
	for _, a := range addrs {
		k.WriteString(strconv.Itoa(len(a)))
		k.WriteByte(':')
		k.WriteString(a)
	}
	return k.String()
}

// firstAddr names an endpoint by its first address.
func firstAddr(ep resolver.Endpoint) string {
	if len(ep.Addresses) == 0 {
		return ""
	}
	return ep.Addresses[0].Addr
}

// reportMetrics is the balancer's async reporter (recorder.report).
func (b *engineBalancer) reportMetrics(r estats.AsyncMetricsRecorder) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil
	}
	now := b.clock.Nanotime()
	b.rec.report(r, b.order, b.pub.picker, func(e *Endpoint) bool { return b.slowStart.end(e, now) != 0 }, now)
	if b.rec.policy != nil {
		b.rec.reportMembership(r, &b.members)
		rows, _ := b.rowsLocked(now, func(int64) time.Time { return time.Time{} })
		b.rec.reportEndpoints(r, b.order, rows)
	}
	return nil
}
