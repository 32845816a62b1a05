package shadow

import (
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/pickwise/pickwise/internal/engine"
	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/balancer/weightedtarget"
	"google.golang.org/grpc/connectivity"
	estats "google.golang.org/grpc/experimental/stats"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/serviceconfig"
)

// Name is the policy's name in service configs.
const Name = "pickwise_shadow"

func init() {
	balancer.Register(builder{})
	engine.RegisterParent(Name, func(cc balancer.ClientConn, bOpts balancer.BuildOptions, opts engine.Options) balancer.Balancer {
		return newBalancer(cc, bOpts, opts)
	})
}

// builder builds pickwise_shadow balancers and parses their config.
type builder struct{}

func (builder) Name() string { return Name }

func (builder) ParseConfig(js json.RawMessage) (serviceconfig.LoadBalancingConfig, error) {
	return ParseConfig(js)
}

func (builder) Build(cc balancer.ClientConn, opts balancer.BuildOptions) balancer.Balancer {
	return newBalancer(cc, opts, engine.Options{})
}

// shadowBalancer runs two children over the same endpoints and the same
// connections: live places the calls, the candidate is asked on a sample
// of them and its answers recorded, and during a canary it places a share
// of them itself.
type shadowBalancer struct {
	// Immutable after build.
	cc    balancer.ClientConn
	opts  balancer.BuildOptions
	deps  engine.Options // the clock and source, passed on to pickwise children
	q     *queue
	conns *conns
	rec   *recorder

	// Guarded by q.mu: every call into a child runs under it.
	children [2]*child
	cfg      *Config
	closed   bool

	// pickMu orders the children's state reports, which arrive from their
	// own goroutines as well as from calls the shadow makes, and the
	// pickers published from them.
	pickMu  sync.Mutex
	states  [2]*balancer.State // the latest of each child; nil before its first
	rates   rates
	publish bool // false after Close
}

// rates are the config's shares as thresholds on a 32-bit draw.
type rates struct {
	sample, canary uint32
}

func ratesOf(cfg *Config) rates {
	return rates{sample: threshold(cfg.SampleRate), canary: threshold(cfg.CanaryPercent / 100)}
}

// threshold is the value below which a uniform 32-bit draw falls with
// probability p in [0, 1]; 1 is every draw but one in 2^32.
func threshold(p float64) uint32 {
	if p >= 1 {
		return ^uint32(0)
	}
	return uint32(p * (1 << 32))
}

// child is one of the two children and the ClientConn it was given.
type child struct {
	name   string
	config []byte // its parsed config marshalled, to tell a change
	b      balancer.Balancer
	cc     *childConn
}

// newBalancer builds a shadow balancer; deps left zero are the system
// clock and source.
func newBalancer(cc balancer.ClientConn, opts balancer.BuildOptions, deps engine.Options) *shadowBalancer {
	if deps.Clock == nil {
		deps.Clock = engine.SystemClock{}
	}
	if deps.Rand == nil {
		deps.Rand = engine.SystemRand{}
	}
	q := newQueue()
	b := &shadowBalancer{cc: cc, opts: opts, deps: deps, q: q, conns: newConns(cc, q), publish: true}
	b.rec = newRecorder(cc, opts.Target.String(), deps.Rand, deps.Clock, b.conns)
	register(b)
	return b
}

func (b *shadowBalancer) UpdateClientConnState(s balancer.ClientConnState) error {
	var err error
	b.q.run(func() { err = b.update(s) })
	return err
}

func (b *shadowBalancer) update(s balancer.ClientConnState) error {
	if b.closed {
		return nil
	}
	cfg, ok := s.BalancerConfig.(*Config)
	if !ok || cfg == nil {
		// Both children are required, so there is no default config to
		// fall back on when a parent builds us without one.
		return fmt.Errorf("%s: unexpected config type %T", Name, s.BalancerConfig)
	}
	loc := weightedtarget.LocalityFromResolverState(s.ResolverState)
	b.rec.setLocality(loc)
	changed := false
	for i, want := range [2]ChildPolicy{cfg.Live, cfg.Candidate} {
		js, err := json.Marshal(want)
		if err != nil {
			return fmt.Errorf("%s: %v", Name, err)
		}
		c := b.children[i]
		if c != nil && c.name == want.Name {
			if string(c.config) != string(js) {
				c.config, changed = js, true
			}
			continue
		}
		if balancer.Get(want.Name) == nil {
			return fmt.Errorf("%s: %s %q: not registered", Name, childField(i), want.Name)
		}
		b.closeChild(i)
		ccc := &childConn{ClientConn: b.cc, parent: b, which: i}
		cb, _ := engine.BuildChild(want.Name, ccc, b.opts, b.deps)
		b.children[i] = &child{name: want.Name, config: js, b: cb, cc: ccc}
		changed = true
	}
	if changed {
		// Counts of one pair of policies say nothing about another, and
		// predictions held for a replaced candidate go back to it now.
		b.rec.held.flush()
		b.rec.reset(cfg.Live.Name, cfg.Candidate.Name)
	}
	b.cfg = cfg
	b.rec.setRates(cfg.SampleRate, cfg.CanaryPercent)
	b.conns.letCandidateDrive(cfg.CanaryPercent > 0)
	b.pickMu.Lock()
	b.rates = ratesOf(cfg)
	b.pickMu.Unlock()
	b.republish()

	liveErr := b.children[liveChild].b.UpdateClientConnState(balancer.ClientConnState{ResolverState: s.ResolverState, BalancerConfig: cfg.Live.Config})
	// The candidate's verdict on the update is its own: it must not fail
	// the channel's resolver update.
	_ = b.children[candidateChild].b.UpdateClientConnState(balancer.ClientConnState{ResolverState: s.ResolverState, BalancerConfig: cfg.Candidate.Config})
	return liveErr
}

func childField(i int) string {
	if i == liveChild {
		return "live"
	}
	return "candidate"
}

// closeChild closes child i, first muting its state reports so that one
// sent while it closes cannot reach the channel.
func (b *shadowBalancer) closeChild(i int) {
	c := b.children[i]
	if c == nil {
		return
	}
	c.cc.closed.Store(true)
	b.pickMu.Lock()
	b.states[i] = nil
	b.pickMu.Unlock()
	c.b.Close()
	b.children[i] = nil
}

func (b *shadowBalancer) ResolverError(err error) {
	b.q.run(func() {
		if b.closed {
			return
		}
		for _, c := range b.children {
			if c != nil {
				c.b.ResolverError(err)
			}
		}
		if b.children[liveChild] == nil {
			b.cc.UpdateState(balancer.State{ConnectivityState: connectivity.TransientFailure, Picker: errPicker{fmt.Errorf("%s: resolver error: %w", Name, err)}})
		}
	})
}

// UpdateSubConnState is never called: every SubConn the shadow makes has a
// StateListener.
func (b *shadowBalancer) UpdateSubConnState(balancer.SubConn, balancer.SubConnState) {}

func (b *shadowBalancer) ExitIdle() {
	b.q.run(func() {
		if b.closed {
			return
		}
		for _, c := range b.children {
			if c != nil {
				c.b.ExitIdle()
			}
		}
	})
}

func (b *shadowBalancer) Close() {
	b.q.run(func() {
		if b.closed {
			return
		}
		b.closed = true
		b.pickMu.Lock()
		b.publish = false
		b.pickMu.Unlock()
		b.closeChild(candidateChild)
		b.closeChild(liveChild)
		b.conns.close()
	})
	b.q.stop(true)
	// Dones of predictions still held go back to the closed candidate,
	// which ignores them, so that nothing keeps them.
	b.rec.held.flush()
	unregister(b)
}

// childState is a child's report; the channel sees live's state and a
// picker over both children.
func (b *shadowBalancer) childState(c *childConn, s balancer.State) {
	b.pickMu.Lock()
	defer b.pickMu.Unlock()
	// Checked under pickMu, which closeChild takes after marking the
	// child closed: a report that raced with the close is dropped.
	if c.closed.Load() {
		return
	}
	b.states[c.which] = &s
	b.publishLocked()
}

// republish publishes a picker with the current rates.
func (b *shadowBalancer) republish() {
	b.pickMu.Lock()
	defer b.pickMu.Unlock()
	b.publishLocked()
}

func (b *shadowBalancer) publishLocked() {
	live := b.states[liveChild]
	if !b.publish || live == nil {
		return
	}
	p := &picker{live: live.Picker, rates: b.rates, rec: b.rec}
	if cand := b.states[candidateChild]; cand != nil {
		p.candidate = cand.Picker
		p.canaryRuns = b.rates.canary != 0
	}
	// Held across the channel's UpdateState, which never calls back, so
	// that pickers reach the channel in the order they were built.
	b.cc.UpdateState(balancer.State{ConnectivityState: live.ConnectivityState, Picker: p})
}

// childConn is the ClientConn a child sees: the parent's, with SubConns
// made through the shared table and states reported to the shadow.
type childConn struct {
	balancer.ClientConn
	parent *shadowBalancer
	which  int
	closed atomic.Bool // atomic: a child may report from its own goroutines
}

func (c *childConn) NewSubConn(addrs []resolver.Address, opts balancer.NewSubConnOptions) (balancer.SubConn, error) {
	return c.parent.conns.newSubConn(c.which, addrs, opts)
}

func (c *childConn) RemoveSubConn(sc balancer.SubConn) { sc.Shutdown() }

// MetricsRecorder is the channel's, never nil (engine.ChildMetricsRecorder).
func (c *childConn) MetricsRecorder() estats.MetricsRecorder {
	return engine.ChildMetricsRecorder(c.ClientConn)
}

// BindOutcomes is how a pickwise child learns of the calls the other one
// places (engine.OutcomeObserver). A candidate's feed takes the outcome
// of each recorded live call on the SubConn's address, and, while a
// canary runs, counts every live call there in the candidate's in-flight
// calls. Live's feed counts the canary's calls there in live's: live is
// told of no outcome, as it is being compared, not taught.
func (c *childConn) BindOutcomes(sc balancer.SubConn, feed engine.EndpointFeed) {
	if v, ok := sc.(*view); ok {
		v.bindOutcomes(feed)
	}
}

func (c *childConn) UpdateAddresses(sc balancer.SubConn, addrs []resolver.Address) {
	//lint:ignore SA1019 passed on for a child that still calls it.
	sc.UpdateAddresses(addrs)
}

func (c *childConn) UpdateState(s balancer.State) { c.parent.childState(c, s) }

// errPicker fails every pick with err.
type errPicker struct{ err error }

func (p errPicker) Pick(balancer.PickInfo) (balancer.PickResult, error) {
	return balancer.PickResult{}, p.err
}
