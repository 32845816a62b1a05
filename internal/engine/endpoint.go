package engine

import (
	"math"
	"sync/atomic"
	"unsafe"

	"github.com/pickwise/pickwise/orcaweight"
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
	// Never zero-sized: Go pads a struct that ends in a zero-size field, which
	// would break the whole-lines rule whenever endpointCold happens to be
	// whole lines itself.
	_ [cacheLine - unsafe.Sizeof(endpointCold{})%cacheLine]byte
}

// endpointHot is the part of an Endpoint that picks and Dones touch. Atomic.
type endpointHot struct {
	inflight    atomic.Int64
	outcomeBits atomic.Uint64 // outcomes.pack of the endpoint's decayed failure and outcome counts
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
	picker    balancer.Picker // the child's latest picker; nil until it reports
	weight    float64         // from the weight attribute, at least 1
	// The endpoint as the resolver gave it (its attributes carry the A76
	// hash key and the weight), and the function that makes its child
	// connect: what an affinity policy's Members carry.
	resolved resolver.Endpoint
	exitIdle func()

	// live follows the child's picker between snapshots; atomic.
	live livePicker

	// Backend-reported weight, kept by the balancer's weightKeeper.
	weights endpointWeight

	// picks as of the last flush (flushPicksLocked); guarded by the
	// balancer's mu.
	flushedPicks [MaxPickReasons]uint32

	// Local ejection (see EjectionConfig).
	ejection ejectionState // guarded by the balancer's mu
	probe    probeState    // atomic: probes are picked and finished without the lock
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

// FailureRatio is the share of server-side failures among the endpoint's
// recent outcomes (decayed counts, see FailurePenaltyConfig); 0 without
// any.
func (e *Endpoint) FailureRatio() float64 {
	o := e.outcomes()
	if o.failures == 0 || o.total == 0 {
		return 0
	}
	return float64(o.failures / o.total)
}

// outcomes reads the endpoint's decayed counts.
func (e *Endpoint) outcomes() outcomes { return unpackOutcomes(e.outcomeBits.Load()) }

// started records a picked RPC and why it was picked.
func (e *Endpoint) started(why PickReason) {
	e.inflight.Add(1)
	e.picks[why&(MaxPickReasons-1)].Add(1)
}

// finish is the Done callback of every RPC picked for this endpoint that
// is not timed (see pickTimed). An untimed call says nothing about
// latency; its outcome enters the failure counts.
func (e *Endpoint) finish(info balancer.DoneInfo) { e.settle(info) }

// settle ends a call: it is no longer in flight, and its outcome enters
// the endpoint's counts. It reports whether the call was a server-side
// failure.
func (e *Endpoint) settle(info balancer.DoneInfo) bool {
	e.inflight.Add(-1)
	e.shared.work.armFlush()
	if info.Err == nil && e.outcomeBits.Load() == healthyBits {
		// The common case, decided with one load: a healthy endpoint's
		// success writes nothing.
		return false
	}
	if !info.BytesSent && !info.BytesReceived {
		// The attempt never reached the server (grpc ends a pick whose
		// connection was not ready with an empty DoneInfo): no evidence
		// either way.
		return false
	}
	failed := IsServerFailure(info.Err) // the attempt reached the server: serverFailed
	if p := e.shared.penalty.Load(); p != nil {
		o := e.recordOutcome(failed, p)
		if failed {
			e.shared.work.startHealth(p.tick)
			if ej := e.shared.ejector.Load(); ej != nil && o.failures >= float32(ej.minFailures) && o.failures-1 < float32(ej.minFailures) {
				// The evidence ejection needs is just complete.
				e.shared.work.assessSoon()
			}
		}
	}
	return failed
}

// recordOutcome folds one outcome into the endpoint's counts and returns
// them.
func (e *Endpoint) recordOutcome(failed bool, p *penalty) outcomes {
	for {
		old := e.outcomeBits.Load()
		if old == healthyBits && !failed {
			return healthy
		}
		o := unpackOutcomes(old).counted(p)
		next := o.step(failed, p.keep)
		if next.failures == 0 && next.total >= p.full {
			// Full of successes: from now on a success writes nothing,
			// so Done does not contend on a shared cache line.
			next = healthy
		}
		if e.outcomeBits.CompareAndSwap(old, next.pack()) {
			return next
		}
	}
}

// decayOutcomes multiplies both counts by factor and returns the new
// counts.
func (e *Endpoint) decayOutcomes(factor float32) outcomes {
	for {
		old := e.outcomeBits.Load()
		o := unpackOutcomes(old)
		if o.failures == 0 {
			// A healthy endpoint's successes keep their weight: they are
			// the evidence against a later lone failure.
			return o
		}
		next := o.scaled(factor)
		if e.outcomeBits.CompareAndSwap(old, next.pack()) {
			return next
		}
	}
}

// doneShared is the balancer-wide state that every endpoint's Done reads:
// the failure penalty and ejection settings, the fleet's failure rate, the
// latency settings, and the queue of work Dones hand to the balancer.
type doneShared struct {
	penalty atomic.Pointer[penalty] // nil when the penalty is off
	ejector atomic.Pointer[ejector] // nil when ejection is off
	latency atomic.Pointer[latency] // nil unless the policy is latency-aware
	clock   Clock                   // set once by the balancer
	// fleetBits is math.Float64bits of the fleet's failure rate, as of the
	// last health tick: the rate every endpoint's own is judged against.
	fleetBits atomic.Uint64
	// work is what Dones ask the balancer to do later (donework.go).
	work doneWork

	// Counters of rare events, flushed to the metrics with the pick
	// counts: a balancer-wide line is fine for events that are not per
	// call.
	probes       atomic.Uint64 // probe picks of ejected endpoints
	avoidedRetry atomic.Uint64 // attempts placed away from an endpoint an earlier attempt used
}

// fleetRate is the fleet's failure rate as of the last health tick.
func (d *doneShared) fleetRate() float64 { return math.Float64frombits(d.fleetBits.Load()) }

// endpointWeight is one endpoint's part of the weight keeping, in its
// Endpoint. Guarded by the balancer's mu (the tracker synchronizes itself).
type endpointWeight struct {
	tracker *orcaweight.Tracker     // nil while weights are off
	done    func(balancer.DoneInfo) // finish, then the tracker's per-call report hook
	weight  float64                 // at the last weight update
	status  orcaweight.Status       // at the last weight update
	// sc is the READY connection that carries the OOB stream. It is
	// followed even while weights are off, so that turning them on finds
	// it.
	sc      balancer.SubConn
	stopOOB func() // stops the OOB stream, if one is open
}

// closeOOB closes the endpoint's ORCA stream, if any.
func (w *endpointWeight) closeOOB() {
	if w.stopOOB != nil {
		w.stopOOB()
		w.stopOOB = nil
	}
}

// livePicker is a picker that follows an endpoint's child: it picks with
// whatever picker the child reported last. A lazy policy's snapshot gives
// it for endpoints that are not READY, so that a call whose endpoint
// turned READY after the snapshot was taken goes out at once instead of
// waiting for the next snapshot.
type livePicker struct {
	p atomic.Pointer[pickerBox]
}

// pickerBox holds a picker for an atomic pointer: pickers of different
// types cannot share an atomic.Value.
type pickerBox struct{ balancer.Picker }

func (l *livePicker) set(p balancer.Picker) { l.p.Store(&pickerBox{p}) }

// Pick picks with the child's latest picker, or queues the call if the
// child has reported none.
func (l *livePicker) Pick(info balancer.PickInfo) (balancer.PickResult, error) {
	if b := l.p.Load(); b != nil && b.Picker != nil {
		return b.Pick(info)
	}
	return balancer.PickResult{}, balancer.ErrNoSubConnAvailable
}
