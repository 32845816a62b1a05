package engine

import (
	"sync"
	"sync/atomic"
	"time"
)

// This file is how a call's Done hands work to the balancer. A Done runs on
// the call's goroutine, many at once, and must neither take the balancer's
// lock nor do a pass over the endpoints: it only notices that something is
// due (a failure that starts the health ticks, evidence that is complete,
// pick counts waiting to be recorded) and asks for it here. The work runs
// later on a timer, once however many Dones asked, with the balancer's lock.
// The one exception is readmission: it happens once per ejection, so the
// probe's Done that completes the evidence does it itself (readmit).
//
// The requests flow one way: Done -> doneWork -> doneWorkOwner, which
// sends each to the feature that does it (doneRoutes: ejection, recorder,
// slowStart); doneWork owns the timers and the flags that make a thousand
// requests one.

// doneWorkOwner does what Dones ask for. Each method takes the balancer's
// lock itself and does nothing once the balancer is closed.
type doneWorkOwner interface {
	// healthTick decays and assesses every endpoint's counts (healthTick
	// in ejection.go). It asks for the next tick itself while there is
	// anything to watch.
	healthTick()
	// assessNow assesses without decay, because an endpoint's evidence
	// just became enough to eject it.
	assessNow()
	// flushTick records the pick counts and the rare-event counters.
	flushTick()
	// readmitFromProbe readmits an ejected endpoint whose probes
	// succeeded, or makes sure a health tick will once its time is over.
	readmitFromProbe(*Endpoint)
	// rampsProven republishes after ramping endpoints proved warm.
	rampsProven()
}

// doneWork is the balancer's queue of work asked for by Dones: one
// deferred task per kind of work. The zero value asks for nothing, for
// endpoints built without a balancer.
type doneWork struct {
	// Immutable after the balancer is built.
	owner doneWorkOwner
	clock Clock
	// recordsMetrics is set when the balancer records metrics, so that a
	// Done arms a flush of the pick counts.
	recordsMetrics bool
	// pickProved is set by a pick that ended a ramp (doneShared.judge),
	// and cleared by the next Done, which asks for the republish
	// (pickProvedSoon): a pick takes no lock and arms no timer.
	// Beside recordsMetrics, which every Done reads already.
	pickProved atomic.Bool
	// served is set by the channel's first pick (Snapshot.notePlaced):
	// from then on an endpoint that joins is a newcomer to a fleet that
	// carries the channel's load, and ramps (slowStart.joinsCold).
	// On the line every Done reads, which every core keeps.
	served atomic.Bool

	health task // the decay-and-assess tick, every penalty.tick while needed
	assess task // an assessment now, asked for by the evidence of a failure
	flush  task // the pick counts' flush, within metricsFlushPeriod of a Done
	proven task // a republish, once ramping endpoints proved warm
	// provenLast is when the last republish for proven ramps ended
	// (Clock.Nanotime), 0 before the first, and provenCost how long it
	// took; provenRunning is set while one runs.
	provenLast, provenCost atomic.Int64
	provenRunning          atomic.Bool
}

// startHealth makes sure a health tick is scheduled after tick.
func (w *doneWork) startHealth(tick time.Duration) {
	if w.owner != nil && w.health.claim() {
		w.health.arm(w.clock, tick, w.owner.healthTick)
	}
}

// assessSoon asks for an assessment now. It runs on a timer of its own,
// not on the Done that asked, and requests that arrive while one is pending
// share it: in a fleet-wide outage every endpoint crosses the line at once,
// and each assessment is a pass over all of them.
func (w *doneWork) assessSoon() {
	if w.owner != nil && w.assess.claim() {
		w.assess.arm(w.clock, 0, w.owner.assessNow)
	}
}

// armFlush makes sure the pick counts are flushed within
// metricsFlushPeriod. Every Done calls it: while a flush is pending it is
// one load of a flag that changes once a period, so it stays in every
// core's cache; while nothing records metrics it is one load of an
// immutable field.
func (w *doneWork) armFlush() {
	if w.recordsMetrics && w.flush.claim() {
		w.flush.arm(w.clock, metricsFlushPeriod, w.owner.flushTick)
	}
}

// provenSoon asks for a republish, for an endpoint whose answers ended
// its ramp: every one that proves warm while it is pending shares it.
func (w *doneWork) provenSoon() {
	if w.owner != nil && w.proven.claim() {
		w.proven.arm(w.clock, max(w.provenWait(), provenBatch), w.republishProven)
	}
}

// pickProvedSoon asks for the republish a pick that ended a ramp set
// pickProved for, once. Every Done checks pickProved
// (republishIfPickProved) and calls it, not inlined: the Dones are kept
// small.
//
//go:noinline
func (w *doneWork) pickProvedSoon() {
	if w.pickProved.Swap(false) {
		w.provenSoon()
	}
}

// provenWait is how long from now the next republish for proven ramps
// must wait to keep to provenCostRatio, at most provenMaxWait.
func (w *doneWork) provenWait() time.Duration {
	last := w.provenLast.Load()
	if last == 0 {
		return 0
	}
	return min(time.Duration(last+provenCostRatio*w.provenCost.Load()-w.clock.Nanotime()), provenMaxWait)
}

// republishProven is the proven task's run. One asked for while the last
// ran was armed before that one's cost was known, and may come due while
// it still runs: it then waits for what the bound asks.
func (w *doneWork) republishProven() {
	if w.provenWait() > 0 || !w.provenRunning.CompareAndSwap(false, true) {
		w.provenSoon()
		return
	}
	defer w.provenRunning.Store(false)
	start := w.clock.Nanotime()
	w.owner.rampsProven()
	end := w.clock.Nanotime()
	w.provenLast.Store(end)
	w.provenCost.Store(end - start)
}

// provenBatch is how long even the first republish for proven ramps
// waits, so that endpoints proving warm in the same moment (their opening
// calls went out together, ramp.Proof.Opening) share one publish. d-choice
// pickers stop ramping a proven endpoint as soon as it proves warm; a
// weighted schedule gives it its full weight only at the republish, so
// the wait is short: 5 ms left four returning backends of twelve at their
// ramped share for 4 ms more on average, and the other eight's p99 about
// 4 ms higher (warm-rejoin, twelve seeds). Where publishes are dear,
// provenCostRatio spaces them, not this.
const provenBatch = time.Millisecond

// provenCostRatio bounds the channel's time the republishes for proven
// ramps take: after one that took d, the next waits until provenCostRatio
// times d has passed since it ended. A publish is a pass over the fleet,
// and a ramp that proves late should not wait long for its republish
// where a pass is cheap (microseconds over tens of endpoints), nor, where
// one is dear (milliseconds over tens of thousands), take more than a
// tenth of the queue while a mass return proves warm over a second.
const provenCostRatio = 10

// provenMaxWait caps the wait provenCostRatio asks for: the cost measured
// includes the wait for the balancer's lock, which other work can make
// long, and a weighted schedule gives a proven endpoint its full weight
// only at the republish. Past 25 ms a republish, the cap wins over the
// ratio; a proof that comes while one runs can wait twice the cap.
const provenMaxWait = 250 * time.Millisecond

// readmit passes on a probe's request to readmit e. It is rare (once per
// ejection) and needs no coalescing.
func (w *doneWork) readmit(e *Endpoint) {
	if w.owner != nil {
		w.owner.readmitFromProbe(e)
	}
}

// stop cancels every pending task and refuses new ones; the balancer calls
// it when it closes.
func (w *doneWork) stop() {
	w.health.stop()
	w.assess.stop()
	w.flush.stop()
	w.proven.stop()
}

// task is one kind of deferred work: at most one is pending at a time, and
// a request while one is pending costs one atomic load.
type task struct {
	pending atomic.Bool // set from the first request until the work starts
	mu      sync.Mutex  // guards the fields below; never held while the work runs
	timer   Timer
	stopped bool
}

// claim reports whether the caller is the one to arm the task: false
// while a run is pending. The caller builds the run function only then, so
// that a request while one is pending allocates nothing.
func (t *task) claim() bool {
	return !t.pending.Load() && t.pending.CompareAndSwap(false, true)
}

// arm schedules run after d, for the caller whose claim succeeded. The
// flag is cleared just before run starts, so that run, or a Done meanwhile,
// can ask for the next one.
func (t *task) arm(clock Clock, d time.Duration, run func()) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped {
		return
	}
	t.timer = clock.AfterFunc(d, func() {
		t.mu.Lock()
		stopped := t.stopped
		if !stopped {
			t.timer = nil
			t.pending.Store(false)
		}
		t.mu.Unlock()
		if !stopped {
			run()
		}
	})
}

// stop cancels the pending run, if any, and every later request.
func (t *task) stop() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.stopped = true
	// Pending stays set, so that requests stop at the atomic load.
	t.pending.Store(true)
	if t.timer != nil {
		t.timer.Stop()
		t.timer = nil
	}
}

// metricsFlushPeriod bounds how long a pick count waits to be recorded
// when the sink does not collect through reportMetrics: grpc's
// OpenTelemetry plugin calls it only if one of the policy's gauges is
// enabled, and a user may enable the picks counter alone.
const metricsFlushPeriod = time.Second
