package engine

import (
	"math"
	"sync/atomic"

	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/connectivity"
)

// Endpoint is the state the engine keeps for one endpoint. It lives as long
// as the endpoint is in the resolver's list, across any number of pickers,
// so counters survive picker rebuilds. Every policy reads the same object;
// only the engine writes it.
type Endpoint struct {
	// Atomic: written by Pick and Done on many goroutines. They fill a cache
	// line of their own so that picks on neighbouring endpoints, allocated
	// next to each other, do not invalidate each other's lines.
	inflight    atomic.Int64
	failureBits atomic.Uint64 // math.Float64bits of the failure EWMA
	_           [cacheLine - 16]byte

	// Latency average for latency-aware policies; its own line, since it is
	// written on every Done of those policies.
	rtt rtt
	_   [cacheLine - 16]byte

	// Immutable after creation.
	addr     string
	failures *failureTracker         // the balancer's failure accounting
	done     func(balancer.DoneInfo) // built once, so Pick does not allocate

	// Guarded by the balancer's mu.
	state     connectivity.State
	coldReady bool            // its next READY starts a slow-start ramp: it joined late, or its connection failed
	ramping   bool            // in a slow-start ramp that began at rampStart
	rampStart int64           // Clock.Nanotime
	picker    balancer.Picker // the pickfirst child's latest picker
	weight    float64         // from the weight attribute, at least 1
	gen       uint64          // the balancer update that last reported this endpoint
}

// cacheLine is the coherence unit of the CPUs pickwise runs on (x86-64,
// arm64 servers).
const cacheLine = 64

// newEndpoint creates an endpoint's state; cold says whether its first
// READY starts a slow-start ramp.
func newEndpoint(addr string, ft *failureTracker, cold bool) *Endpoint {
	e := &Endpoint{addr: addr, failures: ft, coldReady: cold, state: connectivity.Idle}
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

// started records a picked RPC.
func (e *Endpoint) started() { e.inflight.Add(1) }

// finish is the Done callback of every RPC picked for this endpoint.
func (e *Endpoint) finish(info balancer.DoneInfo) {
	e.inflight.Add(-1)
	p := e.failures.penalty.Load()
	if p == nil {
		return
	}
	failed := serverFailed(info)
	e.recordOutcome(failed, p.alpha)
	if failed {
		e.failures.startDecay()
	}
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

// failureTracker is the balancer-wide half of failure accounting, shared by
// all its endpoints: the current penalty and the decay timer's state.
type failureTracker struct {
	penalty atomic.Pointer[penalty] // nil when the penalty is off
	// decaying is set while a decay tick is scheduled, so the Done of every
	// failure does not schedule one of its own.
	decaying atomic.Bool
	// schedule arms the decay timer; set once by the balancer.
	schedule func()
}

// startDecay makes sure a decay tick is scheduled.
func (ft *failureTracker) startDecay() {
	if !ft.decaying.Load() && ft.decaying.CompareAndSwap(false, true) {
		ft.schedule()
	}
}
