package engine

import (
	"context"
	"math"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// LoadProber sends pickwise_prequal's load probes: a question to one
// endpoint's server about its requests in flight and latency.
type LoadProber interface {
	// Probe asks the server at the other end of sc, the endpoint addr's
	// READY connection, for its load, and calls answer exactly once, later,
	// from any goroutine. ctx ends the probe early: when the balancer
	// closes or the probe times out.
	Probe(ctx context.Context, sc balancer.SubConn, addr string, answer func(LoadAnswer))
}

// LoadAnswer is a server's answer to a load probe.
type LoadAnswer struct {
	// RIF is the server's requests in flight.
	RIF uint32
	// Latency is its estimate, in seconds, of a new call's latency; 0 if it
	// has none.
	Latency float64
	// Err is why there is no answer; an Unimplemented status says that the
	// server serves no probes.
	Err error
}

// LoadProbingConfig configures load probing and the pool of answers
// (pickwise_prequal). It must be validated by the policy's ParseConfig.
type LoadProbingConfig struct {
	// PoolSize is how many answers the pool holds, at most MaxLoadPool.
	PoolSize int
	// MaxAge is how old an answer may be and still place a call.
	MaxAge time.Duration
	// ReuseBudget is how many calls one answer may place.
	ReuseBudget int
	// HotQuantile sets the hot line: an answer whose RIF is above this
	// quantile of the pool's is hot.
	HotQuantile float64
	// MinProbeRate is the probes a pick asks for while the pool is full:
	// at most 1. An empty pool asks for one per pick.
	MinProbeRate float64
	// Timeout bounds a probe.
	Timeout time.Duration
}

// loadSettings are a config and the pool it made, as picks read them.
type loadSettings struct {
	cfg  LoadProbingConfig
	pool *loadPool
}

// loadProbes owns pickwise_prequal's probing: the pool of answers, the
// probes that fill it and the calls' reports that refresh it, and the
// tick that expires old answers. Picks ask for probes (want); Dones,
// answers and the tick send them (kick). Nothing here takes the
// balancer's lock.
type loadProbes struct {
	// Immutable after the balancer is built.
	clock  Clock
	rand   Rand
	prober LoadProber
	ctx    context.Context
	cancel context.CancelFunc
	logf   func(format string, args ...any)

	settings atomic.Pointer[loadSettings] // nil while the policy does not probe
	// targets are the endpoints of the newest Prequal picker, from which
	// probes draw theirs.
	targets atomic.Pointer[[]Ready]
	// chance is the share of picks that ask for a probe, scaled to 2^64:
	// picks compare a random draw with it.
	chance atomic.Uint64
	// unprobed is set when a probe run found no endpoint that serves
	// probes: picks stop asking until the next picker (use).
	unprobed atomic.Bool
	// local is how this client estimates the load of a server that serves
	// no probes, from the servers that do, as of the last settle: nil
	// while the pool holds no server's answer (localEstimate).
	local atomic.Pointer[localEstimate]
	// demand is the probes picks asked for that are not sent yet; wanted
	// says a Done should kick the prober.
	demand atomic.Int64
	wanted atomic.Bool
	// now is a recent Clock reading, for the calls' reports: taken by the
	// tick, every MaxAge/4, and by answers. A report's answer then looks
	// up to that much older than it is, and leaves the pool that much
	// sooner.
	now  atomic.Int64
	run  task // the prober's run, once however many kicks
	tick task // expiry, every MaxAge/2 while the pool holds answers

	// Probes' results since the recorder's last flush.
	answers, failures, unimplemented atomic.Uint64
}

func newLoadProbes(clock Clock, rand Rand, prober LoadProber, logf func(string, ...any)) *loadProbes {
	if prober == nil {
		prober = grpcLoadProber{}
	}
	lp := &loadProbes{clock: clock, rand: rand, prober: prober, logf: logf}
	lp.ctx, lp.cancel = context.WithCancel(context.Background())
	lp.chance.Store(math.MaxUint64)
	return lp
}

// configure applies cfg (nil: no probing), keeping the pool if its size
// is unchanged.
func (lp *loadProbes) configure(cfg *LoadProbingConfig) {
	if cfg == nil {
		lp.settings.Store(nil)
		return
	}
	s := &loadSettings{cfg: *cfg}
	if old := lp.settings.Load(); old != nil && int(old.pool.size) == min(max(cfg.PoolSize, 2), MaxLoadPool) {
		s.pool = old.pool
	} else {
		s.pool = newLoadPool(cfg.PoolSize)
	}
	lp.settings.Store(s)
}

// stop ends probing: the tick, the pending run and the probes out.
func (lp *loadProbes) stop() {
	lp.run.stop()
	lp.tick.stop()
	lp.cancel()
}

// use makes ready the endpoints probes go to, and readies each for
// Prequal's picks: its index, and the Done that folds in its calls'
// reports. Called while a Prequal picker is built, before it is
// published.
func (lp *loadProbes) use(ready []Ready) {
	for i := range ready {
		e := ready[i].Stats
		e.setIndex(i)
		if e.load.done == nil {
			e.load.done = lp.newDone(e)
		}
	}
	lp.targets.Store(&ready)
	if s := lp.settings.Load(); s != nil {
		s.pool.keep(ready)
	}
	lp.unprobed.Store(false)
	lp.chance.Store(math.MaxUint64)
	if s := lp.settings.Load(); s != nil && len(ready) > 0 {
		lp.now.Store(lp.clock.Nanotime())
		lp.ensureTick(s)
	}
}

// newDone builds e's Prequal Done: the engine's Done, then the call's
// report, which refreshes e's answer in the pool (or, for a server that
// serves no probes, this client's answer for it), and a kick of the
// prober if picks asked for probes.
func (lp *loadProbes) newDone(e *Endpoint) func(balancer.DoneInfo) {
	return func(info balancer.DoneInfo) {
		e.done(info)
		if info.ServerLoad != nil {
			lp.report(e, info.ServerLoad)
		} else if l := lp.local.Load(); l != nil && e.answer.Load()&answerLocal != 0 {
			l.answer(e, lp.now.Load())
		}
		if lp.wanted.Load() {
			lp.kick()
		}
	}
}

// report folds a call's report into e's answer. It refreshes e in the pool
// or takes a free slot, but evicts no one.
func (lp *loadProbes) report(e *Endpoint, load any) {
	s := lp.settings.Load()
	rif, latency, ok := reportOf(load)
	if s == nil || !ok {
		return
	}
	e.setAnswer(rif, latency, lp.now.Load(), e.inflight.Load())
	// A pooled endpoint, the common case, is current: keep took out the
	// others.
	if s.pool.holds(e) || lp.current(e) && s.pool.offer(e, false, s.cfg.ReuseBudget) {
		lp.ensureTick(s)
	}
}

// current reports whether e is in the newest picker's READY list. An
// answer that arrives for one that left it (a late report or probe
// answer of an endpoint removed, ejected or disconnected since) takes no
// pool slot: no pick of the newest picker could use it.
func (lp *loadProbes) current(e *Endpoint) bool {
	t := lp.targets.Load()
	return t != nil && isAt(*t, e)
}

// want is a pick's request for a probe, at chance; draw is its random
// bits. It writes a word every core shares only when it asks. The probes
// go out at once, with the next Done (docs/design/prequal.md: no
// batching).
func (lp *loadProbes) want(draw uint64) {
	if draw <= lp.chance.Load() {
		lp.demand.Add(1)
		if !lp.wanted.Load() {
			lp.wanted.Store(true)
		}
	}
}

// kick runs the prober soon, once however many ask.
func (lp *loadProbes) kick() {
	lp.wanted.Store(false)
	if lp.run.claim() {
		lp.run.arm(lp.clock, 0, lp.probe)
	}
}

// probe sends the probes picks asked for, each to an endpoint drawn at
// random among those not pooled, not being probed and serving probes.
func (lp *loadProbes) probe() {
	s, targets := lp.settings.Load(), lp.targets.Load()
	n := lp.demand.Swap(0)
	if s == nil || targets == nil || n <= 0 || lp.ctx.Err() != nil {
		return
	}
	ready := *targets
	n = min(n, int64(s.pool.size), int64(len(ready)))
	local := lp.local.Load()
	for sent := 0; n > 0; n-- {
		e, c := lp.draw(s, ready, local != nil)
		switch {
		case e == nil:
			if sent == 0 && !anyServes(ready) {
				lp.unprobed.Store(true)
				lp.chance.Store(0)
			}
			return
		case e.load.unserved.Load() == c:
			// Its server serves no probes: this client answers for it.
			local.answer(e, lp.clock.Nanotime())
			s.pool.offer(e, true, s.cfg.ReuseBudget)
		default:
			lp.send(s, e)
			sent++
		}
	}
}

// localEstimate is this client's answer for a server that serves no
// probes, so that a fleet where only some servers run serverload still
// spreads calls over all of them: its RIF is this client's calls in flight
// to it plus the calls other clients keep on an answering server, on
// average, and its latency is the answering servers' median.
type localEstimate struct {
	others  float64 // calls other clients keep on a server
	latency float64 // seconds
}

// answer gives e, whose server serves no probes, this client's answer.
func (l *localEstimate) answer(e *Endpoint, now int64) {
	inflight := e.inflight.Load()
	rif := min(l.others+float64(inflight), math.MaxUint16)
	e.setAnswerFlags(uint32(rif), l.latency, now, inflight, answerPresent|answerLocal)
}

// anyServes reports whether some connected endpoint of ready may serve
// probes: none has answered one with Unimplemented on its connection.
func anyServes(ready []Ready) bool {
	for i := range ready {
		e := ready[i].Stats
		if c := e.conn.Load(); c != nil && c.sc != nil && e.load.unserved.Load() != c {
			return true
		}
	}
	return false
}

// drawTries bounds the draws for one probe's endpoint.
const drawTries = 4

// draw is an endpoint to probe and its connection, or nil if a few draws
// found none: connected, not being probed, with no answer in the pool that
// picks can still use, and serving probes unless local, when this client
// can answer for those that do not (and whose calls bring no reports).
func (lp *loadProbes) draw(s *loadSettings, ready []Ready, local bool) (*Endpoint, *readyConn) {
	for range drawTries {
		e := ready[reduce(uint32(lp.rand.Uint64()), len(ready))].Stats
		c := e.conn.Load()
		if c == nil || c.sc == nil || e.load.probing.Load() {
			continue
		}
		if e.load.unserved.Load() == c && (!local || e.answer.Load()&answerFlags == answerPresent) {
			// No probe service; and this client cannot answer for it, or
			// its calls' reports do.
			continue
		}
		if s.pool.holds(e) && usesOf(e.spent.Load()) < s.cfg.ReuseBudget {
			continue
		}
		return e, c
	}
	return nil, nil
}

// send probes e.
func (lp *loadProbes) send(s *loadSettings, e *Endpoint) {
	c := e.conn.Load()
	e.load.probing.Store(true)
	ctx, cancel := context.WithTimeout(lp.ctx, s.cfg.Timeout)
	lp.prober.Probe(ctx, c.sc, e.addr, func(a LoadAnswer) {
		cancel()
		lp.answered(e, c, a)
	})
}

// answered takes a probe's answer: into the pool, evicting the oldest
// newcomer if it is full.
func (lp *loadProbes) answered(e *Endpoint, c *readyConn, a LoadAnswer) {
	defer e.load.probing.Store(false)
	s := lp.settings.Load()
	switch {
	case status.Code(a.Err) == codes.Unimplemented:
		if e.load.unserved.Swap(c) != c {
			lp.unimplemented.Add(1)
			lp.logf("endpoint %s serves no load probes (%v): it is compared by this client's own count of calls in flight", e.addr, a.Err)
		}
		return
	case a.Err != nil:
		lp.failures.Add(1)
		return
	case s == nil || lp.ctx.Err() != nil:
		return
	}
	lp.answers.Add(1)
	now := lp.clock.Nanotime()
	lp.now.Store(now)
	e.setAnswer(a.RIF, a.Latency, now, e.inflight.Load())
	if lp.current(e) {
		s.pool.offer(e, true, s.cfg.ReuseBudget)
	}
	lp.settle(s, now)
	lp.ensureTick(s)
}

// settle expires old answers, sets the hot line, and sets the chance
// that a pick asks for a probe from the share of the pool picks cannot
// use: empty, or spent.
func (lp *loadProbes) settle(s *loadSettings, now int64) {
	st := s.pool.expire(now, int64(s.cfg.MaxAge), s.cfg.HotQuantile, s.cfg.ReuseBudget)
	if st.served > 0 {
		lp.local.Store(&localEstimate{others: max(st.rif-st.base, 0) / float64(st.served), latency: float64(st.latency)})
	}
	if lp.unprobed.Load() {
		return
	}
	unusable := float64(int(s.pool.size)-st.usable) / float64(s.pool.size)
	lp.chance.Store(chanceOf(max(unusable, s.cfg.MinProbeRate)))
}

// poolAnswers records the age in seconds of each answer in the pool at
// now, and returns how many picks can still use.
func (lp *loadProbes) poolAnswers(now int64, age func(float64)) (usable int) {
	s := lp.settings.Load()
	if s == nil {
		return 0
	}
	for k := range s.pool.size {
		e := s.pool.slots[k].Load()
		if e == nil {
			continue
		}
		spent := e.spent.Load()
		a := answerAge(spent, now)
		age(float64(max(a, 0)) / 1e9)
		if a <= int64(s.cfg.MaxAge) && usesOf(spent) < s.cfg.ReuseBudget {
			usable++
		}
	}
	return usable
}

// chanceOf is a probability as the threshold of a 64-bit draw.
func chanceOf(p float64) uint64 {
	if p >= 1 {
		return math.MaxUint64
	}
	return uint64(max(p, 0) * 0x1p64)
}

// ensureTick makes sure the tick runs: it expires answers, and sends the
// probes picks asked for when no Done has.
func (lp *loadProbes) ensureTick(s *loadSettings) {
	if lp.tick.claim() {
		lp.tick.arm(lp.clock, s.cfg.MaxAge/4, lp.onTick)
	}
}

// onTick expires old answers and sends the probes picks asked for. It
// runs every MaxAge/4 while the balancer probes: a channel whose calls
// are all long still gets its probes.
func (lp *loadProbes) onTick() {
	s := lp.settings.Load()
	if s == nil || lp.ctx.Err() != nil {
		return
	}
	now := lp.clock.Nanotime()
	lp.now.Store(now)
	lp.settle(s, now)
	if lp.demand.Load() > 0 {
		lp.probe()
	}
	lp.ensureTick(s)
}
