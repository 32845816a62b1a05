package engine

import (
	"math"
	"sync/atomic"
	"unsafe"

	"github.com/pickwise/pickwise/orca"
	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/resolver"
)

// Endpoint is the state the engine keeps for one endpoint. It lives as long
// as the endpoint is in the resolver's list, across any number of pickers,
// so counters survive picker rebuilds. Every policy reads the same object;
// only the engine writes it.
type Endpoint struct {
	// The hot line: everything a pick reads and a Done writes, together, so
	// that a pick touches one cache line per candidate, not two. The line
	// is the start of the object and the object's size is a whole number
	// of lines, so the allocator, which places objects of one size class at
	// multiples of that size within a page-aligned span, puts each
	// endpoint's hot line on a line of its own: picks on neighbouring
	// endpoints never invalidate each other.
	endpointHot
	_ [cacheLine - unsafe.Sizeof(endpointHot{})]byte

	endpointCold
	_ [(cacheLine - unsafe.Sizeof(endpointCold{})%cacheLine) % cacheLine]byte
}

// endpointHot is the part of an Endpoint that picks and Dones touch. Atomic.
type endpointHot struct {
	inflight    atomic.Int64
	failureBits atomic.Uint64 // math.Float64bits of the failure EWMA
	rtt         rtt           // latency average; written only by latency-aware policies
	// picks counts the calls picked for the endpoint, by PickReason: a
	// pick writes this line anyway (inflight), so counting costs one
	// uncontended add, where a balancer-wide counter would be a line every
	// core fights over. 32 bits: see flushPicksLocked.
	picks [MaxPickReasons]atomic.Uint32
}

// endpointCold is the rest of an Endpoint.
type endpointCold struct {
	// Immutable after creation.
	addr   string
	shared *doneShared             // the balancer's state every Done reads
	done   func(balancer.DoneInfo) // built once, so Pick does not allocate

	// Guarded by the balancer's mu.
	state     connectivity.State
	coldReady bool            // its next READY starts a slow-start ramp: it joined late, or its connection failed
	ramping   bool            // in a slow-start ramp that began at rampStart
	rampStart int64           // Clock.Nanotime
	picker    balancer.Picker // the pickfirst child's latest picker
	weight    float64         // from the weight attribute, at least 1
	gen       uint64          // the balancer update that last reported this endpoint
	// Lazy policies only (Spec.Lazy): the endpoint as endpointsharding
	// reports it (its attributes carry the A76 hash key and the weight),
	// and the function that makes its child connect.
	resolved resolver.Endpoint
	exitIdle func()

	// Backend-reported weight, for policies with Settings.Weights; guarded
	// by the balancer's mu (the tracker synchronizes itself).
	orca       *orca.Tracker           // created on first use
	orcaDone   func(balancer.DoneInfo) // finish, then the tracker's per-call report hook
	orcaWeight float64                 // at the last weight update
	orcaStatus orca.Status             // at the last weight update
	orcaSC     balancer.SubConn        // the READY connection that carries the OOB stream
	stopOOB    func()                  // stops the OOB stream, if one is open

	// picks as of the last flush (flushPicksLocked); guarded by the
	// balancer's mu.
	flushedPicks [MaxPickReasons]uint32
}

// cacheLine is the coherence unit of the CPUs pickwise runs on (x86-64,
// arm64 servers).
const cacheLine = 64

// newEndpoint creates an endpoint's state; cold says whether its first
// READY starts a slow-start ramp.
func newEndpoint(addr string, shared *doneShared, cold bool) *Endpoint {
	e := &Endpoint{endpointCold: endpointCold{addr: addr, shared: shared, coldReady: cold, state: connectivity.Idle}}
	e.done = e.finish
	return e
}

// Addr is the endpoint's first address, for logs and metrics.
func (e *Endpoint) Addr() string { return e.addr }

// InFlight is the number of RPCs picked for this endpoint that have not
// finished.
func (e *Endpoint) InFlight() int64 { return e.inflight.Load() }

// FailureRatio is the failure EWMA in [0, 1]: roughly the share of
// server-side failures among the endpoint's recent outcomes.
func (e *Endpoint) FailureRatio() float64 {
	return math.Float64frombits(e.failureBits.Load())
}

// started records a picked RPC and why it was picked.
func (e *Endpoint) started(why PickReason) {
	e.inflight.Add(1)
	e.picks[why&(MaxPickReasons-1)].Add(1)
}

// finish is the Done callback of every RPC picked for this endpoint that
// is not timed (see pickTimed). A latency-aware policy does not time every
// call, but it must not miss a failure: a server-side failure still enters
// the latency average, priced without its duration, which the failure
// price (see observe) does not need.
func (e *Endpoint) finish(info balancer.DoneInfo) {
	if !e.settle(info) {
		return
	}
	if l := e.shared.latency.Load(); l != nil {
		e.observe(info, 0, e.shared.clock.Nanotime(), l)
	}
}

// settle ends a call: it is no longer in flight, and its outcome enters
// the failure average. It reports whether the call was a server-side
// failure.
func (e *Endpoint) settle(info balancer.DoneInfo) bool {
	e.inflight.Add(-1)
	e.shared.armFlush()
	if info.Err == nil {
		// The common case, decided without classifying: a success of a
		// healthy endpoint writes nothing more.
		if e.failureBits.Load() != 0 {
			if p := e.shared.penalty.Load(); p != nil {
				e.recordOutcome(false, p.alpha)
			}
		}
		return false
	}
	failed := serverFailed(info)
	if p := e.shared.penalty.Load(); p != nil {
		e.recordOutcome(failed, p.alpha)
		if failed {
			e.shared.startDecay()
		}
	}
	return failed
}

// recordOutcome folds one outcome into the failure EWMA.
func (e *Endpoint) recordOutcome(failed bool, alpha float64) {
	x := 0.0
	if failed {
		x = 1
	}
	for {
		old := e.failureBits.Load()
		f := math.Float64frombits(old)
		if f == 0 && !failed {
			// The common case: a healthy endpoint's success writes nothing,
			// so Done does not contend on a shared cache line.
			return
		}
		if e.failureBits.CompareAndSwap(old, math.Float64bits(ewmaStep(f, x, alpha))) {
			return
		}
	}
}

// decayFailure multiplies the failure average by factor and returns the
// new value.
func (e *Endpoint) decayFailure(factor float64) float64 {
	for {
		old := e.failureBits.Load()
		f := math.Float64frombits(old)
		if f == 0 {
			return 0
		}
		next := f * factor
		if next < minTrackedFailure {
			next = 0
		}
		if e.failureBits.CompareAndSwap(old, math.Float64bits(next)) {
			return next
		}
	}
}

// doneShared is the balancer-wide state that every endpoint's Done reads:
// the failure penalty and its decay timer, and what pricing a failure in
// the latency average needs.
type doneShared struct {
	penalty atomic.Pointer[penalty] // nil when the penalty is off
	latency atomic.Pointer[latency] // nil unless the policy is latency-aware
	clock   Clock                   // set once by the balancer
	// decaying is set while a decay tick is scheduled, so the Done of every
	// failure does not schedule one of its own.
	decaying atomic.Bool
	// schedule arms the decay timer; set once by the balancer.
	schedule func()
	// flushIdle is set while the balancer records metrics and no flush of
	// the pick counts is scheduled: the next Done schedules one, so calls
	// arm one per metricsFlushPeriod at most, and none while idle. The
	// zero value never schedules, for endpoints built without a balancer.
	flushIdle atomic.Bool
	// scheduleFlush arms the flush timer; set once by the balancer.
	scheduleFlush func()
}

// armFlush makes sure the pick counts are flushed within
// metricsFlushPeriod. Every Done calls it: a load of a flag that changes
// once a period, so it stays in every core's cache.
func (d *doneShared) armFlush() {
	if d.flushIdle.Load() && d.flushIdle.CompareAndSwap(true, false) {
		d.scheduleFlush()
	}
}

// startDecay makes sure a decay tick is scheduled.
func (d *doneShared) startDecay() {
	if !d.decaying.Load() && d.decaying.CompareAndSwap(false, true) {
		d.schedule()
	}
}
