package subset

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pickwise/pickwise/internal/engine"
	"github.com/pickwise/pickwise/internal/subsetting"
	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/balancer/base"
	"google.golang.org/grpc/balancer/weightedtarget"
	"google.golang.org/grpc/connectivity"
	estats "google.golang.org/grpc/experimental/stats"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/serviceconfig"
)

// Name is the policy's name in service configs.
const Name = "pickwise_subset"

func init() {
	balancer.Register(builder{})
}

// builder builds pickwise_subset balancers and parses their config.
type builder struct{}

func (builder) Name() string { return Name }

func (builder) ParseConfig(js json.RawMessage) (serviceconfig.LoadBalancingConfig, error) {
	return ParseConfig(js)
}

// Build draws the random identity used when the config has neither an
// index nor a clientId: fixed for the balancer's lifetime, so resolver
// updates do not reshuffle the subset (gRFC A68).
func (builder) Build(cc balancer.ClientConn, opts balancer.BuildOptions) balancer.Balancer {
	return newBalancer(cc, opts, rand.Uint64())
}

func newBalancer(cc balancer.ClientConn, opts balancer.BuildOptions, seed uint64) *subsetBalancer {
	b := &subsetBalancer{
		clock:             engine.SystemClock{},
		cc:                cc,
		opts:              opts,
		randomID:          "pickwise-subset-random:" + strconv.FormatUint(seed, 16),
		target:            opts.Target.String(),
		unregisterMetrics: func() {},
	}
	if m := engine.MetricsRecorderOf(cc); m != nil {
		b.metrics = m
		b.unregisterMetrics = m.RegisterAsyncReporter(estats.AsyncMetricReporterFunc(b.report), sizeMetric, endpointsMetric)
	}
	return b
}

// subsetBalancer filters the resolver's endpoints down to this client's
// subset and hands them to the child policy, which alone creates SubConns
// and pickers; the parent never touches a SubConn.
//
// grpc calls a balancer's methods one at a time; the rejoin hold's timer
// is the other caller, so every method holds mu.
type subsetBalancer struct {
	// Immutable after build (clock: tests set it before the first update).
	clock             engine.Clock
	cc                balancer.ClientConn
	opts              balancer.BuildOptions
	randomID          string
	target            string                 // the channel's, a metrics label
	metrics           estats.MetricsRecorder // nil: none recorded
	unregisterMetrics func()

	// Atomic: the metrics reporter reads them.
	gauges subsetGauges

	mu sync.Mutex // guards the fields below, and every call into the child

	// last is the last good update, which the rejoin timer applies again
	// when a held backend's hold ends.
	last       balancer.ClientConnState
	rejoin     rejoinTracker
	rejoinAt   int64        // Clock.Nanotime the timer fires; 0: none
	rejoinTime engine.Timer // nil: none

	child     balancer.Balancer
	childName string
	childCC   *childConn
	key       subsetKey       // inputs of the last computation
	subset    map[string]bool // its result, by identity
	computed  int             // computations so far, for tests
	closed    bool
}

// subsetKey is everything a subset depends on: the sorted distinct backend
// identities and the config fields that choose the algorithm. Equal keys
// give equal subsets, so an update that changes only the resolver's order,
// attributes or the child's config skips the computation.
type subsetKey struct {
	ids        string // identities joined by "\n"
	size       int
	index      int // -1 without an index
	count      int
	clientID   string
	mode       Mode
	hasSubsets bool // false before the first computation
}

// identity is what subsets are computed over: the endpoint's first address,
// as in gRFC A68. It does not depend on the resolver's order, and an
// endpoint that gains a second address keeps its place.
func identity(ep resolver.Endpoint) (string, bool) {
	if len(ep.Addresses) == 0 {
		return "", false // nothing to connect to; children ignore it too
	}
	return ep.Addresses[0].Addr, true
}

func (b *subsetBalancer) UpdateClientConnState(s balancer.ClientConnState) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.updateLocked(s)
}

func (b *subsetBalancer) updateLocked(s balancer.ClientConnState) error {
	if b.closed {
		return nil
	}
	cfg, ok := s.BalancerConfig.(*Config)
	if !ok || cfg == nil {
		// subsetSize is required, so there is no default config to fall
		// back on when a parent builds us without one.
		return fmt.Errorf("%s: unexpected config type %T", Name, s.BalancerConfig)
	}
	loc := weightedtarget.LocalityFromResolverState(s.ResolverState)
	b.gauges.locality.Store(&loc)
	if err := b.updateSubset(cfg, s.ResolverState.Endpoints); err != nil {
		return err
	}
	if b.child == nil || b.childName != cfg.ChildPolicy.Name {
		if err := b.switchChild(cfg.ChildPolicy.Name); err != nil {
			return err
		}
	}
	b.last = s
	return b.child.UpdateClientConnState(balancer.ClientConnState{
		ResolverState:  b.filter(s.ResolverState),
		BalancerConfig: cfg.ChildPolicy.Config,
	})
}

// scheduleRejoinLocked arms the timer that readmits the first held
// backend at at (Clock.Nanotime; 0: none held).
func (b *subsetBalancer) scheduleRejoinLocked(at, now int64) {
	if at == b.rejoinAt {
		return
	}
	if b.rejoinTime != nil {
		b.rejoinTime.Stop()
		b.rejoinTime = nil
	}
	b.rejoinAt = at
	if at == 0 {
		return
	}
	b.rejoinTime = b.clock.AfterFunc(time.Duration(at-now), func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		if b.closed || b.rejoinAt != at {
			return
		}
		b.rejoinTime, b.rejoinAt = nil, 0
		// The same update, at a later time: the held backend is due.
		_ = b.updateLocked(b.last)
	})
}

// updateSubset recomputes the subset if its inputs changed.
func (b *subsetBalancer) updateSubset(cfg *Config, eps []resolver.Endpoint) error {
	var ids []string
	for _, ep := range eps {
		if id, ok := identity(ep); ok {
			ids = append(ids, id)
		}
	}
	ids = subsetting.Normalize(ids)
	b.gauges.endpoints.Store(int64(len(ids)))
	if hold := int64(cfg.RejoinHold); hold > 0 {
		now := b.clock.Nanotime()
		var next int64
		ids, next = b.rejoin.admit(ids, cfg.SubsetSize, now, hold)
		b.scheduleRejoinLocked(next, now)
	} else {
		b.rejoin = rejoinTracker{}
		b.scheduleRejoinLocked(0, 0)
	}
	key := subsetKey{ids: strings.Join(ids, "\n"), size: cfg.SubsetSize, index: -1, mode: cfg.Mode, hasSubsets: true}
	if cfg.ClientIndex != nil {
		key.index, key.count = *cfg.ClientIndex, *cfg.ClientCount
	} else {
		key.clientID = cfg.ClientID
		if key.clientID == "" {
			key.clientID = b.randomID
		}
	}
	if key == b.key {
		return nil
	}
	var subset []string
	var err error
	switch {
	case key.index < 0:
		subset, err = subsetting.Rendezvous(ids, key.size, key.clientID)
	case key.mode == ModeStable:
		subset, err = subsetting.Stable(ids, key.size, key.index, key.count)
	default:
		subset, err = subsetting.Balanced(ids, key.size, key.index, key.count)
	}
	if err != nil {
		// Unreachable after ParseConfig; a parent that hand-builds a
		// Config gets the algorithm's message.
		return fmt.Errorf("%s: %v", Name, err)
	}
	next := make(map[string]bool, len(subset))
	entered := 0
	for _, id := range subset {
		next[id] = true
		if !b.subset[id] {
			entered++
		}
	}
	if b.key.hasSubsets && entered > 0 && b.metrics != nil {
		churnMetric.Record(b.metrics, int64(entered), b.target, b.locality())
	}
	b.subset = next
	b.gauges.size.Store(int64(len(subset)))
	b.key = key
	b.computed++
	return nil
}

// filter returns s with only the subset's endpoints, in the resolver's
// order (a child such as pick_first reads order as preference), each with
// its attributes untouched. A repeated identity keeps its first endpoint
// only, so it does not get a double share.
func (b *subsetBalancer) filter(s resolver.State) resolver.State {
	out := s
	out.Endpoints = nil
	out.Addresses = nil
	seen := make(map[string]bool, len(b.subset))
	for _, ep := range s.Endpoints {
		id, ok := identity(ep)
		if !ok || !b.subset[id] || seen[id] {
			continue
		}
		seen[id] = true
		out.Endpoints = append(out.Endpoints, ep)
		// Kept consistent for children that still read the deprecated
		// flat list.
		out.Addresses = append(out.Addresses, ep.Addresses...)
	}
	return out
}

// switchChild replaces the child with a new one of policy name. The old
// child is closed first (grpc's graceful switch is internal to grpc), so
// RPCs queue until the new child reports READY; a policy change is rare.
func (b *subsetBalancer) switchChild(name string) error {
	builder := balancer.Get(name)
	if builder == nil {
		return fmt.Errorf("%s: childPolicy %q: not registered", Name, name)
	}
	b.closeChild()
	b.childCC = &childConn{ClientConn: b.cc, mu: &b.mu}
	b.child = builder.Build(b.childCC, b.opts)
	b.childName = name
	return nil
}

func (b *subsetBalancer) closeChild() {
	if b.child == nil {
		return
	}
	// Muted first, so a state the old child reports while closing cannot
	// overwrite the new child's picker.
	b.childCC.closed.Store(true)
	b.child.Close()
	b.child, b.childCC, b.childName = nil, nil, ""
}

func (b *subsetBalancer) ResolverError(err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return
	}
	if b.child != nil {
		b.child.ResolverError(err)
		return
	}
	// No good update yet, so there is nothing to keep using: fail RPCs
	// with the resolver's error rather than leave them queued.
	b.cc.UpdateState(balancer.State{
		ConnectivityState: connectivity.TransientFailure,
		Picker:            base.NewErrPicker(fmt.Errorf("%s: resolver error: %w", Name, err)),
	})
}

// UpdateSubConnState is never called for SubConns created with a
// StateListener, which every modern child uses; it is forwarded for the
// others.
func (b *subsetBalancer) UpdateSubConnState(sc balancer.SubConn, s balancer.SubConnState) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.child != nil && !b.closed {
		//lint:ignore SA1019 forwarding is what a parent must do for a child that still relies on it.
		b.child.UpdateSubConnState(sc, s)
	}
}

func (b *subsetBalancer) ExitIdle() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.child != nil && !b.closed {
		b.child.ExitIdle()
	}
}

func (b *subsetBalancer) Close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.scheduleRejoinLocked(0, 0)
	b.closed = true
	b.unregisterMetrics()
	b.closeChild()
}

// childConn is the ClientConn the child sees: the parent's own, except that
// a closed child's state updates are dropped, and that the child's SubConn
// and health listeners run under the parent's mu. grpc calls them on its
// own goroutine, one at a time with its calls into the balancer; the
// rejoin timer calls the child from another goroutine, and takes mu, so
// the listeners must too.
type childConn struct {
	balancer.ClientConn
	mu *sync.Mutex // the parent's
	// closed is atomic because a child may report state from its own
	// goroutines.
	closed atomic.Bool
}

func (c *childConn) NewSubConn(addrs []resolver.Address, opts balancer.NewSubConnOptions) (balancer.SubConn, error) {
	if l := opts.StateListener; l != nil {
		opts.StateListener = func(s balancer.SubConnState) {
			c.mu.Lock()
			defer c.mu.Unlock()
			l(s)
		}
	}
	//lint:ignore SA1019 the deprecation is of multi-address SubConns; pickfirst makes one per address through this call, and the parent passes it on
	sc, err := c.ClientConn.NewSubConn(addrs, opts)
	if err != nil {
		return nil, err
	}
	return &lockedSubConn{SubConn: sc, mu: c.mu}, nil
}

func (c *childConn) RemoveSubConn(sc balancer.SubConn) { sc.Shutdown() }

// MetricsRecorder is the channel's, never nil (engine.ChildMetricsRecorder).
func (c *childConn) MetricsRecorder() estats.MetricsRecorder {
	return engine.ChildMetricsRecorder(c.ClientConn)
}

func (c *childConn) UpdateAddresses(sc balancer.SubConn, addrs []resolver.Address) {
	//lint:ignore SA1019 passed on for a child that still calls it.
	sc.UpdateAddresses(addrs)
}

func (c *childConn) UpdateState(s balancer.State) {
	if !c.closed.Load() {
		s.Picker = unwrapPicker{s.Picker}
		c.ClientConn.UpdateState(s)
	}
}

// lockedSubConn is a child's SubConn, whose health listener runs under
// the parent's mu (see childConn).
type lockedSubConn struct {
	balancer.SubConn
	mu *sync.Mutex
}

func (s *lockedSubConn) RegisterHealthListener(fn func(balancer.SubConnState)) {
	if fn == nil {
		s.SubConn.RegisterHealthListener(nil)
		return
	}
	s.SubConn.RegisterHealthListener(func(st balancer.SubConnState) {
		s.mu.Lock()
		defer s.mu.Unlock()
		fn(st)
	})
}

// unwrapPicker gives grpc the channel's own SubConn behind a child's pick.
type unwrapPicker struct{ p balancer.Picker }

func (u unwrapPicker) Pick(info balancer.PickInfo) (balancer.PickResult, error) {
	res, err := u.p.Pick(info)
	if sc, ok := res.SubConn.(*lockedSubConn); ok {
		res.SubConn = sc.SubConn
	}
	return res, err
}

// currentSubset returns the subset's identities, sorted, for tests.
func (b *subsetBalancer) currentSubset() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]string, 0, len(b.subset))
	for id := range b.subset {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}
