package shadow

import (
	"errors"
	"sync"
	"sync/atomic"

	"github.com/pickwise/pickwise/internal/engine"
	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/resolver"
)

// This file is the layer that lets two children share the channel's
// connections: one real SubConn per address, and one view of it per child.
// A child asks its view to connect; only the live child's views (and the
// candidate's during a canary) make the real SubConn connect, so the shadow
// never opens a connection the live policy would not. A view that asks
// later, when the real SubConn is already connecting or connected, is told
// what a new SubConn would have told it: CONNECTING, then the current
// state. Health is watched once on the real SubConn and told to every view
// that asks for it.

// Which child a view belongs to.
const (
	liveChild = iota
	candidateChild
)

// conns is the table of real SubConns. Its lock guards the table, the
// realConn fields marked so and every view's bookkeeping; it is never held
// while a child's code runs, since a child may call back into the table.
type conns struct {
	cc balancer.ClientConn // the parent's: where real SubConns are made
	q  *queue              // delivers replays under the balancer's lock

	// candidateDrives is whether the candidate's views may make a real
	// SubConn connect: true while a canary sends it calls.
	candidateDrives atomic.Bool

	mu     sync.Mutex
	byAddr map[string]*realConn
	all    map[*realConn]struct{} // shared and unshared alike, for Summary
	made   uint64                 // the real SubConns made so far
	closed bool

	// countsMu guards every realConn's compared-pick counts and retired
	// flag, and the totals below. It is taken last, under mu or a
	// shard's lock, and nothing is called while it is held.
	countsMu sync.Mutex
	// The compared and agreed picks of realConns shut down since the
	// counts last started over, which Summary's totals still include.
	retiredCompared, retiredAgreed int64

	rec *recorder // set by newRecorder; for untracked calls' ends
}

func newConns(cc balancer.ClientConn, q *queue) *conns {
	return &conns{cc: cc, q: q, byAddr: make(map[string]*realConn), all: make(map[*realConn]struct{})}
}

// realConn is one of the channel's SubConns and the views that share it.
type realConn struct {
	owner *conns
	sc    balancer.SubConn
	key   string // in byAddr; "" for a SubConn of several addresses, never shared
	addr  string // the first address, for Summary
	seq   uint64 // c's SubConns in the order made, from 1: which one a Summary's counts are of

	// Guarded by owner.mu.
	state   balancer.SubConnState // the latest grpc reported; IDLE before any
	views   []*view
	watched bool                   // its health listener is registered for this READY
	health  *balancer.SubConnState // the latest health report since, if any
	gone    bool                   // shut down

	// labels are its metric labels (recorder.endpointLabelsFor).
	labels atomic.Pointer[endpointLabels]
	// candidateFeed feeds the candidate's evidence about this address
	// with live's calls on it (engine.OutcomeObserver); nil when the
	// candidate is not a pickwise policy or holds no view here.
	candidateFeed atomic.Pointer[childFeed]
	// liveFeed is live's, when live is a pickwise policy: while a canary
	// runs, it counts the canary's calls on this address in live's
	// in-flight calls, as candidateFeed counts live's in the candidate's.
	liveFeed atomic.Pointer[childFeed]

	// liveDone is the Done of a sampled live call on it that needs no
	// record of its own (recorder.compare), bound once.
	liveDone func(balancer.DoneInfo)

	// What timed calls' ends write, on a line of its own, apart from
	// what every sampled pick and call's end reads above: sharing one,
	// two cores took it from each other on every sampled call.
	_ [cacheLine]byte
	// latency is the recent duration of recorded calls on the address.
	latency latencyEstimate
	_       [cacheLine - 8]byte

	// Guarded by owner.countsMu, and counted from the shards' lists of
	// compared picks (conns.count): compared picks on which both
	// children chose it, on which only live did, and on which only the
	// candidate would have. An agreement is one count on one endpoint,
	// and the totals are summed from these when read. retired is set
	// when the realConn shuts down; its counts then go to the totals.
	agreed, liveOnly, candidateOnly int64
	retired                         bool
}

// cacheLine is the size of the lines realConn keeps its latency estimate
// apart on, and a shard fills.
const cacheLine = 64

// childFeed is what a child's engine bound to one of its views
// (engine.EndpointFeed), with the Done that ends a call counted in its
// in-flight calls, bound once: a call's end reaches the feed its start
// did, whatever is bound to the address by then.
type childFeed struct {
	engine.EndpointFeed
	loadDone func(balancer.DoneInfo)
}

func newChildFeed(f engine.EndpointFeed) *childFeed {
	cf := &childFeed{EndpointFeed: f}
	cf.loadDone = func(balancer.DoneInfo) { cf.Load(false) }
	return cf
}

// view is a child's handle on a realConn: what the child's NewSubConn
// returned.
type view struct {
	// Embedded for balancer.SubConn's unexported method; never called.
	balancer.SubConn

	real     *realConn
	child    int
	listener func(balancer.SubConnState)

	// Guarded by real.owner.mu.
	wants    bool // asked to connect and not yet told IDLE
	follows  bool // told a state other than IDLE: follows the real SubConn
	replay   bool // a replay is queued and will tell the current state
	healthFn func(balancer.SubConnState)
	shut     bool
	feed     *childFeed // bound by the child's engine, if any
}

// newSubConn returns child's view of the real SubConn for addrs, making
// the real SubConn if no other view holds one.
func (c *conns) newSubConn(child int, addrs []resolver.Address, opts balancer.NewSubConnOptions) (balancer.SubConn, error) {
	key := ""
	if len(addrs) == 1 {
		key = addrs[0].Addr + "\x00" + addrs[0].ServerName
	}
	v := &view{child: child, listener: opts.StateListener}
	// Held across the parent's NewSubConn, which never calls back, so that
	// two views asking at once get one real SubConn.
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, errClosed
	}
	if r := c.byAddr[key]; key != "" && r != nil {
		v.real = r
		r.views = append(r.views, v)
		return v, nil
	}
	c.made++
	r := &realConn{owner: c, key: key, seq: c.made, state: balancer.SubConnState{ConnectivityState: connectivity.Idle}}
	r.liveDone = r.finishLive
	if len(addrs) > 0 {
		r.addr = addrs[0].Addr
	}
	opts.StateListener = func(s balancer.SubConnState) { c.q.run(func() { r.onState(s) }) }
	//lint:ignore SA1019 the deprecation is of multi-address SubConns; pickfirst makes one per address through this call, and the shadow passes it on
	sc, err := c.cc.NewSubConn(addrs, opts)
	if err != nil {
		return nil, err
	}
	r.sc, v.real, r.views = sc, r, []*view{v}
	c.all[r] = struct{}{}
	if key != "" {
		c.byAddr[key] = r
	}
	return v, nil
}

// Connect is the child's request to connect: passed on to the real SubConn
// if this view may drive it and it is idle, answered with a replay if it is
// already on its way, and otherwise kept until the live child connects it.
func (v *view) Connect() {
	r := v.real
	c := r.owner
	c.mu.Lock()
	if v.shut || v.wants || r.gone {
		c.mu.Unlock()
		return
	}
	v.wants = true
	idle := r.state.ConnectivityState == connectivity.Idle
	drive := v.child == liveChild || c.candidateDrives.Load()
	if !idle {
		v.queueReplayLocked()
	}
	c.mu.Unlock()
	if idle && drive {
		r.sc.Connect()
	}
}

// queueReplayLocked queues the telling of the real SubConn's state to v,
// read when the replay runs, so that it is never older than what the view
// would have been told directly.
func (v *view) queueReplayLocked() {
	if v.replay {
		return
	}
	v.replay = true
	v.real.owner.q.schedule(v.runReplay)
}

// runReplay tells v, as a new SubConn would be told, CONNECTING and then
// the real SubConn's current state. It runs under the balancer's lock.
func (v *view) runReplay() {
	r := v.real
	c := r.owner
	c.mu.Lock()
	if !v.replay || v.shut {
		c.mu.Unlock()
		return
	}
	v.replay = false
	st := r.state
	v.follows = st.ConnectivityState != connectivity.Idle
	if !v.follows {
		v.wants = false
	}
	c.mu.Unlock()
	if v.listener == nil {
		return
	}
	v.listener(balancer.SubConnState{ConnectivityState: connectivity.Connecting})
	if st.ConnectivityState != connectivity.Connecting {
		v.listener(st)
	}
}

// onState is the real SubConn's listener: the state is kept and told to the
// views that follow it or asked for it. It runs under the balancer's lock.
func (r *realConn) onState(s balancer.SubConnState) {
	c := r.owner
	var tell []*view
	c.mu.Lock()
	if r.gone {
		c.mu.Unlock()
		return
	}
	was := r.state.ConnectivityState
	r.state = s
	if was == connectivity.Ready && s.ConnectivityState != connectivity.Ready {
		// A new READY needs a new health listener.
		r.watched, r.health = false, nil
	}
	idle := s.ConnectivityState == connectivity.Idle
	for _, v := range r.views {
		if v.shut || v.replay || !(v.follows || v.wants) || (idle && !v.follows) {
			// A view that asked but was never told anything has nothing
			// to go back from: it follows the next attempt.
			continue
		}
		tell = append(tell, v)
		v.follows = !idle
		if idle {
			v.wants = false
		}
	}
	c.mu.Unlock()
	for _, v := range tell {
		if v.listener != nil {
			v.listener(s)
		}
	}
}

// RegisterHealthListener registers the real SubConn's health listener once
// per READY and tells every view that registered the latest report.
func (v *view) RegisterHealthListener(fn func(balancer.SubConnState)) {
	r := v.real
	c := r.owner
	c.mu.Lock()
	if v.shut || r.gone {
		c.mu.Unlock()
		return
	}
	v.healthFn = fn
	register := fn != nil && !r.watched && r.state.ConnectivityState == connectivity.Ready
	if register {
		r.watched = true
	}
	replay := fn != nil && r.health != nil
	c.mu.Unlock()
	if register {
		r.sc.RegisterHealthListener(func(s balancer.SubConnState) { c.q.run(func() { r.onHealth(s) }) })
	}
	if replay {
		// The report is read when the replay runs, so that it is the
		// latest: one that arrived meanwhile was told directly.
		c.q.schedule(func() {
			c.mu.Lock()
			fn, ok := v.healthFn, !v.shut && r.watched && r.health != nil
			var h balancer.SubConnState
			if ok {
				h = *r.health
			}
			c.mu.Unlock()
			if ok && fn != nil {
				fn(h)
			}
		})
	}
}

// onHealth is the real SubConn's health listener: the report is kept and
// told to every view that registered one. It runs under the balancer's
// lock.
func (r *realConn) onHealth(s balancer.SubConnState) {
	c := r.owner
	var fns []func(balancer.SubConnState)
	c.mu.Lock()
	if r.gone || !r.watched {
		c.mu.Unlock()
		return
	}
	r.health = &s
	for _, v := range r.views {
		if !v.shut && v.healthFn != nil {
			fns = append(fns, v.healthFn)
		}
	}
	c.mu.Unlock()
	for _, fn := range fns {
		fn(s)
	}
}

// bindOutcomes makes f the real SubConn's feed for v's child.
func (v *view) bindOutcomes(f engine.EndpointFeed) {
	c := v.real.owner
	c.mu.Lock()
	defer c.mu.Unlock()
	if v.shut {
		return
	}
	v.feed = newChildFeed(f)
	v.real.feedOf(v.child).Store(v.feed)
}

// feedOf is where child's feed for r is kept.
func (r *realConn) feedOf(child int) *atomic.Pointer[childFeed] {
	if child == liveChild {
		return &r.liveFeed
	}
	return &r.candidateFeed
}

// UpdateAddresses is deprecated in grpc; it reaches the real SubConn only
// when no other view shares it.
func (v *view) UpdateAddresses(addrs []resolver.Address) {
	c := v.real.owner
	c.mu.Lock()
	alone := len(v.real.views) == 1
	c.mu.Unlock()
	if alone {
		//lint:ignore SA1019 passed on for a child that still calls it.
		v.real.sc.UpdateAddresses(addrs)
	}
}

// GetOrBuildProducer builds producers on the real SubConn, which counts
// its users: two children asking for ORCA reports share one stream.
func (v *view) GetOrBuildProducer(b balancer.ProducerBuilder) (balancer.Producer, func()) {
	return v.real.sc.GetOrBuildProducer(b)
}

// Shutdown drops the view; the real SubConn is shut down with its last
// view. The view is then told SHUTDOWN, as grpc tells a SubConn.
func (v *view) Shutdown() {
	r := v.real
	c := r.owner
	c.mu.Lock()
	if v.shut {
		c.mu.Unlock()
		return
	}
	v.shut = true
	if v.feed != nil {
		r.feedOf(v.child).CompareAndSwap(v.feed, nil)
	}
	for i, o := range r.views {
		if o == v {
			r.views = append(r.views[:i], r.views[i+1:]...)
			break
		}
	}
	last := len(r.views) == 0 && !r.gone
	if last {
		r.gone = true
		delete(c.all, r)
		// Compared picks on r still in a shard's list are counted into
		// the totals when the list is (count); until then the list keeps
		// r in memory, for at most compareLog picks a shard.
		c.countsMu.Lock()
		r.retired = true
		c.retiredAgreed += r.agreed
		c.retiredCompared += r.agreed + r.liveOnly
		c.countsMu.Unlock()
		if r.key != "" && c.byAddr[r.key] == r {
			delete(c.byAddr, r.key)
		}
	}
	c.mu.Unlock()
	if last {
		r.sc.Shutdown()
	}
	if v.listener != nil {
		c.q.schedule(func() { v.listener(balancer.SubConnState{ConnectivityState: connectivity.Shutdown}) })
	}
}

// letCandidateDrive turns the candidate's connecting on or off; on, it
// connects the idle real SubConns the candidate asked for.
func (c *conns) letCandidateDrive(on bool) {
	if c.candidateDrives.Swap(on) == on || !on {
		return
	}
	var idle []balancer.SubConn
	c.mu.Lock()
	for r := range c.all {
		if r.gone || r.state.ConnectivityState != connectivity.Idle {
			continue
		}
		for _, v := range r.views {
			if v.wants && !v.shut && v.child == candidateChild {
				idle = append(idle, r.sc)
				break
			}
		}
	}
	c.mu.Unlock()
	for _, sc := range idle {
		sc.Connect()
	}
}

// errClosed is NewSubConn's error after the balancer closed.
var errClosed = errors.New(Name + ": balancer closed")

// close marks the table closed; the children shut their views down
// themselves when they close.
func (c *conns) close() {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
}

// count adds a shard's compared picks to their endpoints' counts, or to
// the retired totals for an endpoint since shut down. The caller holds
// the shard's lock, so that Summary, which counts every shard's list
// under its lock, misses none.
func (c *conns) count(compared []comparison) {
	c.countsMu.Lock()
	for _, cmp := range compared {
		live, cand := cmp.live, cmp.cand
		agreed := live == cand
		switch {
		case live.retired:
			c.retiredCompared++
			if agreed {
				c.retiredAgreed++
			}
		case agreed:
			live.agreed++
		default:
			live.liveOnly++
		}
		if !agreed && !cand.retired {
			cand.candidateOnly++
		}
	}
	c.countsMu.Unlock()
}

// comparison is one compared pick: the endpoints live and the candidate
// chose.
type comparison struct{ live, cand *realConn }

// realOf returns the channel's SubConn behind a child's pick, and its
// realConn; ok is false for a SubConn this table did not make.
func realOf(sc balancer.SubConn) (*realConn, bool) {
	v, ok := sc.(*view)
	if !ok {
		return nil, false
	}
	return v.real, true
}
