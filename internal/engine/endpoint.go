package engine

import (
	"context"
	"encoding/binary"
	"math"
	"sync/atomic"
	"unsafe"

	v3orcapb "github.com/cncf/xds/go/xds/data/orca/v3"
	"github.com/pickwise/pickwise/internal/evidence"
	"github.com/pickwise/pickwise/internal/ramp"
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
	// is the start of the object and the object is two lines, so the
	// allocator, which places objects of one size class at multiples of
	// that size within a page-aligned span, puts each endpoint's hot line
	// on a line of its own: picks on neighbouring endpoints never
	// invalidate each other.
	endpointHot
	_ [cacheLine - unsafe.Sizeof(endpointHot{})]byte

	// The second line: the way to the child's connection, which every
	// pick reads (conn, or live under a lazy policy while the child is not
	// READY), what the rarer paths of a pick or a Done read (a probe, a
	// retry), the server's last answer that pickwise_prequal's picks
	// read, and the rest, behind a pointer. The rest is most of an
	// endpoint's state, used mostly with the balancer's lock held (its
	// atomics, the probe state, are the exceptions, on rare paths); kept
	// out of line, it leaves endpoints two lines apart in memory, not
	// five, so that a fleet's hot lines span fewer pages and a pick's two
	// random ones less often miss the TLB. It fills its line exactly
	// (TestEndpointLayout): no padding follows it, as a trailing empty one
	// would make the object a word longer.
	endpointWarm
}

// This fails to compile unless endpointWarm is one cache line: a field
// more must displace one, and one fewer needs padding back in Endpoint.
var _ = [1]struct{}{}[unsafe.Sizeof(endpointWarm{})-cacheLine]

// endpointWarm is an Endpoint's second line.
type endpointWarm struct {
	// Immutable after creation.
	shared        *doneShared // the balancer's state every Done reads
	*endpointCold             // never nil

	// live follows the child's picker; atomic. A lazy policy's every pick
	// goes through it (Member.Conn) while the child is not READY, beside
	// the hot line the pick then writes, rather than one more line away.
	live livePicker
	// conn is the child's connection as of its last READY picker, which
	// every pick through a snapshot's Ready takes (pickChild); nil before
	// the child's first READY and, under a lazy policy, whenever it is not
	// READY, when picks follow live instead. Atomic: the balancer sets it
	// as the child reports. Kept here, not in each snapshot's Ready, so
	// that the READY list a publish copies holds no picker: with one, it
	// was twice the bytes and three times the pointers, most of what a
	// change cost over a large fleet.
	conn atomic.Pointer[readyConn]

	// weightedDone is the Done of every call a WeightedRR picker places
	// (pickWeighted): the call's ORCA report into reportTo, if that is
	// set, then its outcome. Built with the endpoint and never changed.
	// It lives beside the hot line, not in an array beside the READY list,
	// which every publish after an edit would copy (80 KB over 10k
	// endpoints), and which would be one more line a pick reads.
	weightedDone func(balancer.DoneInfo)
	// reportTo is the tracker that per-call reports go to; nil while
	// weights are off or come out of band. Atomic: the keeper sets it
	// under the balancer's lock while Dones read it.
	reportTo atomic.Pointer[orcaweight.Tracker]

	// Two words a policy's picks read beside the hot line, whose meaning
	// is the policy's (no balancer runs two): pickwise_prequal's server
	// answer (reportedload.go) in both; WeightedRR's expected in-flight
	// count in answer (expectedWord, expected.go).
	answer atomic.Uint64
	spent  atomic.Uint64
}

// farPeaks are an endpoint's recent far peaks: samples over farPeak times
// its latency average (holdFarPeak).
type farPeaks struct {
	held atomic.Uint64 // math.Float64bits of the far peak waiting for the next answer; 0 if none
	last atomic.Int64  // Nanotime of the last far peak, held or taken; 0 before any
}

// endpointHot is the part of an Endpoint that picks and Dones touch. Atomic,
// but for done, which is immutable.
type endpointHot struct {
	// inflight counts the calls picked for the endpoint, probes included,
	// and those a parent placed there and fed in (Spec.ParentLoad), that
	// have not finished; picks counts the calls picked, by
	// PickReason, on the endpoint's own line, where a balancer-wide counter
	// would be a line every core fights over. A WeightedRR picker's calls
	// are in inflight, which its picks compare (WeightedRR.shorterOf), but
	// not in picks: it counts its picks on the line it advances anyway
	// (pickerCounts). 32 bits: see recorder.takePicks; differences of them
	// are right across wraps.
	//
	// inflight and picks[0] are the low and high halves of one aligned
	// 64-bit word (fusedWord), so that a pick for reason 0, every policy's
	// commonest, counts both with one atomic add, as a Done uncounts the
	// first with one.
	inflight atomic.Uint32
	picks    [MaxPickReasons]atomic.Uint32
	// reports counts the per-call ORCA reports the endpoint's calls
	// brought since the last weight update, for sampleReport: written by
	// a WeightedRR call's Done (weightedDone) beside its in-flight count,
	// on a line the Done then holds when it reads the outcome counts.
	reports atomic.Uint32

	outcomeBits atomic.Uint64 // evidence.Counts.Pack of the endpoint's decayed failure and outcome counts
	rtt         rtt           // latency average, written only by latency-aware policies; under WeightedRR, the baseline (expected.go)

	// done is the Done of the endpoint's untimed calls, built once so that
	// Pick does not allocate; it carries the balancer's doneShared itself,
	// so that a Done reads no line of the endpoint but this one.
	done func(balancer.DoneInfo)
}

// endpointCold is the rest of an Endpoint.
type endpointCold struct {
	// Immutable after creation.
	addr string

	// farPeaks are the latency average's recent far peaks, which only
	// observe reads and writes (a timed call's Done, or an outcome a
	// parent fed in): out of line, as timed calls are few whenever calls
	// are many (sampleShare).
	farPeaks farPeaks
	// rampShare is what slow start's share has earned it and what it
	// took in its current ramp (ramp.Shares), written by the picks that
	// draw it while it ramps; set to zero as a ramp starts.
	rampShare ramp.Count
	// rampProof is the evidence, from its timed answers, that it is warm
	// and its ramp can end (ramp.Proof); set to zero as a ramp starts.
	rampProof ramp.Proof
	// load is what its server last reported of its load, for
	// pickwise_prequal (reportedload.go).
	load reportedLoad
	// baseDone is weightedDone for a call timed for the baseline latency
	// (expected.go). Built with the endpoint and never changed.
	baseDone func(balancer.DoneInfo)
	// baseFrom is when its baseline's warm-up began, and basePrev the
	// latency of its last sample, which a rise in the warm-up waits for a
	// second of (expected.go); written by timed calls' Dones.
	baseFrom atomic.Int64
	basePrev atomic.Int64

	// Guarded by the balancer's mu.
	pos    int // index in the balancer's resolver order
	member int // index in the balancer's memberList, when it is in it
	// fingerprint is its part of the membership's fingerprint, and the
	// weight it was taken at (membershipFingerprint).
	fingerprint struct {
		hash   uint64
		weight float64
	}
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

	// Backend-reported weight, kept by the balancer's weightKeeper.
	weights endpointWeight

	// picks as of the last flush (recorder.takePicks); guarded by the
	// balancer's mu.
	flushedPicks [MaxPickReasons]uint32

	// Local ejection (see EjectionConfig).
	ejection ejectionState // guarded by the balancer's mu
	probe    probeState    // atomic: probes are picked and finished without the lock

	// failures counts the endpoint's server-side failures, written by the
	// Dones of failed calls only; collected is what the per-endpoint
	// metrics recorded of it and of the picks (guarded by the balancer's
	// mu).
	failures  atomic.Uint64
	collected struct {
		picks    uint32
		failures uint64
	}
}

// newEndpoint creates an endpoint's state; cold says whether its first
// READY starts a slow-start ramp.
func newEndpoint(addr string, shared *doneShared, cold bool) *Endpoint {
	e := &Endpoint{endpointWarm: endpointWarm{shared: shared, endpointCold: &endpointCold{addr: addr, coldReady: cold, state: connectivity.Idle}}}
	e.done = e.newDone(shared)
	e.weightedDone = e.newWeightedDone()
	e.baseDone = e.newBaseDone()
	return e
}

// newDone builds the Done of e's untimed calls: settle, written out, since
// it is too large to inline and this is the Done of nearly every call. Not
// inlined itself: where newEndpoint was inlined, the copy of this closure
// it carried was compiled with no call in it inlined (Go 1.26), and its
// atomic adds and loads became calls.
//
//go:noinline
func (e *Endpoint) newDone(shared *doneShared) func(balancer.DoneInfo) {
	return func(info balancer.DoneInfo) {
		e.inflight.Add(^uint32(0))
		flushSoon(&shared.work)
		republishIfPickProved(&shared.work)
		if info.Err != nil || e.outcomeBits.Load() != evidence.HealthyBits {
			e.record(info, shared)
		}
	}
}

// newWeightedDone builds e.weightedDone: the call leaves the in-flight
// count, its report, if it has one, goes into the tracker reportTo holds
// at the time (none while reports come out of band or weights are not
// kept), then its outcome is recorded, as the engine's Done records it.
// The in-flight count comes first: it is a write to the hot line, which
// another core has usually written last, and a read of the line before it
// (the outcome's) would fetch the line twice, once to read and once to
// own it; the report's count after it finds the line held.
//
// Its outcome step is newDone's, written out again rather than shared
// through a helper, which would not inline: a call more on every Done.
// Not inlined itself, for newDone's reason: inlined into newEndpoint, its
// closure's atomic loads and adds became calls.
//
//go:noinline
func (e *Endpoint) newWeightedDone() func(balancer.DoneInfo) {
	shared := e.shared
	return func(info balancer.DoneInfo) {
		e.inflight.Add(^uint32(0))
		if r, ok := info.ServerLoad.(*v3orcapb.OrcaLoadReport); ok && r != nil {
			if t := e.reportTo.Load(); t != nil {
				t.RecordN(r, sampleReport(e.reports.Add(1)))
			}
		}
		flushSoon(&shared.work)
		republishIfPickProved(&shared.work)
		if info.Err != nil || e.outcomeBits.Load() != evidence.HealthyBits {
			e.record(info, shared)
		}
	}
}

// Per-call reports are sampled: an endpoint's first reportsInFull of each
// weight-update period are all recorded, then one in reportStride, as
// standing for reportStride reports (orcaweight.Tracker.RecordN), so that
// the period's means are still those of all its reports. Recording writes
// the tracker's sums, a cache line of their own; when calls to one
// endpoint finish on several cores at once, that line moving between them
// was half the cost of a call's pick and Done. The reports of one period
// describe one backend over a second or so, and 64 of them, plus an
// eighth of the rest spread over the period, give its means as well as
// all of them would; an endpoint with few calls has every report
// recorded, as before.
//
// The recorded report is the last of each run of reportStride. Reports
// whose values follow the order of the calls in a cycle that divides
// reportStride (a client alternating a cheap and a costly method on one
// endpoint, in step) would be recorded in one phase only: a known limit.
// Moving the position from run to run mends that, but at a hundred or so
// reports a period the three or four samples it takes then move a
// recovering backend's weight (sim TestSlowBackend), so it waits for a
// sampling that starts later or weighs the skipped reports exactly.
const (
	reportsInFull = 64
	reportStride  = 8
)

// sampleReport is how many reports the n-th per-call report of an
// endpoint's period stands for when recorded (n counts from 1): 1 for the
// first reportsInFull, then reportStride for every reportStride-th, 0 (not
// recorded) for the others.
func sampleReport(n uint32) uint64 {
	switch {
	case n <= reportsInFull:
		return 1
	case n%reportStride == 0:
		return reportStride
	}
	return 0
}

// Addr is the endpoint's first address, for logs and metrics.
func (e *Endpoint) Addr() string { return e.addr }

// InFlight is the number of RPCs picked for this endpoint that have not
// finished, probes included. Under Spec.ParentLoad it also
// counts the calls a parent placed on the endpoint and told the engine of
// (EndpointFeed.Load).
func (e *Endpoint) InFlight() int64 { return e.inFlight() }

// inFlight is InFlight, small enough to inline: pickers call it for every
// candidate.
func (e *Endpoint) inFlight() int64 { return int64(e.inflight.Load()) }

// FailureRatio is the share of server-side failures among the endpoint's
// recent outcomes (decayed counts, see FailurePenaltyConfig); 0 without
// any.
func (e *Endpoint) FailureRatio() float64 {
	o := e.outcomes()
	if o.Failures == 0 || o.Total == 0 {
		return 0
	}
	return float64(o.Failures / o.Total)
}

// outcomes reads the endpoint's decayed counts.
func (e *Endpoint) outcomes() evidence.Counts { return evidence.Unpack(e.outcomeBits.Load()) }

// started records a picked RPC and why it was picked.
func (e *Endpoint) started(why PickReason) {
	if why == 0 && fused {
		// Adding one to both halves: the low one, inflight, is far from
		// wrapping, so nothing carries into picks[0], whose own wrap
		// carries out of the word.
		e.fusedWord().Add(1<<32 | 1)
		return
	}
	e.inflight.Add(1)
	e.picks[why&(MaxPickReasons-1)].Add(1)
}

// fusedWord is inflight and picks[0] as one 64-bit word, for started.
// Where fused is true, a 64-bit atomic add is one instruction, or one
// exclusive load and store, over an aligned word (unsafe.Offsetof below),
// and the 32-bit loads and adds of its halves are atomic against it, as
// they are against each other.
func (e *Endpoint) fusedWord() *atomic.Uint64 {
	return (*atomic.Uint64)(unsafe.Pointer(&e.inflight))
}

// fused says that fusedWord's low half is inflight: a 64-bit
// little-endian platform. Elsewhere (32-bit platforms may emulate 64-bit
// atomics with a lock the 32-bit ones do not take) a pick for reason 0
// counts with two adds, as others do.
var fused = unsafe.Sizeof(uintptr(0)) == 8 && binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// fusedWord's layout: inflight at an 8-aligned offset (endpointHot starts
// the Endpoint) with picks[0] right after it.
var (
	_ = [1]struct{}{}[unsafe.Offsetof(endpointHot{}.inflight)%8]
	_ = [1]struct{}{}[unsafe.Offsetof(endpointHot{}.picks)-unsafe.Offsetof(endpointHot{}.inflight)-4]
)

// finish is what the Done of every RPC picked for this endpoint that is
// not timed (see pickTimed) does. An untimed call says nothing about
// latency; its outcome enters the failure counts.
func (e *Endpoint) finish(info balancer.DoneInfo) { e.settle(info, e.shared) }

// settle ends a call: it is no longer in flight, and its outcome enters
// the endpoint's counts. shared is e.shared, which the caller has at hand.
// It reports whether the call was a server-side failure. The Done of
// every untimed call (newDone) is settle written out.
func (e *Endpoint) settle(info balancer.DoneInfo, shared *doneShared) bool {
	e.inflight.Add(^uint32(0))
	flushSoon(&shared.work)
	republishIfPickProved(&shared.work)
	if info.Err == nil && e.outcomeBits.Load() == evidence.HealthyBits {
		// Decided with one load: a healthy endpoint's success writes
		// nothing.
		return false
	}
	return e.record(info, shared)
}

// flushSoon is w.armFlush for a Done: while a flush is pending, as one is
// for all but a moment of each period, it costs one load, inline, and no
// call.
func flushSoon(w *doneWork) {
	if w.recordsMetrics && !w.flush.pending.Load() {
		w.armFlush()
	}
}

// republishIfPickProved is w.pickProvedSoon for a Done: while no ramp a
// pick ended waits for its republish, one load, inline, of the line
// flushSoon reads.
func republishIfPickProved(w *doneWork) {
	if w.pickProved.Load() {
		w.pickProvedSoon()
	}
}

// record enters a finished call's outcome in the endpoint's counts, for
// settle, and reports whether it was a server-side failure.
func (e *Endpoint) record(info balancer.DoneInfo, shared *doneShared) bool {
	if !reached(info) {
		// The attempt never reached the server (grpc ends a pick whose
		// connection was not ready with an empty DoneInfo, and retries a
		// stream a draining server refused): no evidence either way.
		return false
	}
	p := shared.penalty.Load()
	failed := p.counts(info.Err) // the attempt reached the server: serverFailed
	if failed {
		e.failures.Add(1)
	}
	if p != nil {
		o := e.recordOutcome(failed, p)
		if failed {
			if !shared.failing.Load() { // set once, read by every Done after
				shared.failing.Store(true)
			}
			shared.work.startHealth(p.tick)
			if ej := shared.ejector.Load(); ej != nil && o.Failures >= float32(ej.minFailures) && o.Failures-1 < float32(ej.minFailures) {
				// The evidence ejection needs is just complete.
				shared.work.assessSoon()
			}
		}
	}
	return failed
}

// recordOutcome folds one outcome into the endpoint's counts and returns
// them.
func (e *Endpoint) recordOutcome(failed bool, p *penalty) evidence.Counts {
	for {
		old := e.outcomeBits.Load()
		if old == evidence.HealthyBits && !failed {
			return evidence.Healthy
		}
		o := evidence.Unpack(old).Counted(p.full)
		next := o.Step(failed, p.keep)
		if next.Failures == 0 && next.Total >= p.full {
			// Full of successes: from now on a success writes nothing,
			// so Done does not contend on a shared cache line.
			next = evidence.Healthy
		}
		if e.outcomeBits.CompareAndSwap(old, next.Pack()) {
			return next
		}
	}
}

// decayOutcomes multiplies both counts by factor and returns the new
// counts.
func (e *Endpoint) decayOutcomes(factor float32) evidence.Counts {
	for {
		old := e.outcomeBits.Load()
		o := evidence.Unpack(old)
		if o.Failures == 0 {
			// A healthy endpoint's successes keep their weight: they are
			// the evidence against a later lone failure.
			return o
		}
		next := o.Scaled(factor)
		if e.outcomeBits.CompareAndSwap(old, next.Pack()) {
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
	// failing says that some endpoint may have failures counted: set by a
	// Done that counts one (after counting it), cleared by an assessment
	// that finds none (before it looks). While it is false every
	// endpoint's Avoidance is 0, and a publish need not read each
	// endpoint's counts to learn it. Only a reader holding the balancer's
	// lock may rely on it: an assessment clears it for the length of its
	// walk.
	failing atomic.Bool

	// Counters of rare events, flushed to the metrics with the pick
	// counts: a balancer-wide line is fine for events that are not per
	// call.
	probes       atomic.Uint64 // probe picks of ejected endpoints
	avoidedRetry atomic.Uint64 // attempts placed away from an endpoint an earlier attempt used
	// retries counts the picks of a call's second, third, and fourth or
	// later attempts (with the attempts interceptor); never reset.
	retries [3]atomic.Uint64

	// peers is the average answer of the endpoints compared with a
	// ramping one, that a ramping endpoint's own answers are judged
	// against (ramp.Proof).
	peers ramp.Peers
}

// fleetRate is the fleet's failure rate as of the last health tick.
func (d *doneShared) fleetRate() float64 { return math.Float64frombits(d.fleetBits.Load()) }

// endpointWeight is one endpoint's part of the weight keeping, in its
// Endpoint. Guarded by the balancer's mu (the tracker synchronizes itself).
type endpointWeight struct {
	tracker *orcaweight.Tracker // nil while weights are off
	weight  float64             // at the last weight update
	status  orcaweight.Status   // at the last weight update
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
// it for every member, so that a member need not change when its state
// does, and a call whose endpoint turned READY after the snapshot was
// taken goes out at once instead of waiting for the next snapshot.
type livePicker struct {
	p atomic.Pointer[pickerBox]
}

// pickerBox holds a picker for an atomic pointer: pickers of different
// types cannot share an atomic.Value.
type pickerBox struct{ balancer.Picker }

func (l *livePicker) set(p balancer.Picker) { l.p.Store(&pickerBox{p}) }

// readyConn is a child's READY picker and, when that picker answers a
// pick with a SubConn and nothing more, that answer: pickfirst's READY
// picker answers every pick with its one SubConn, so a pick reads it here
// rather than make an indirect call into the picker. Immutable.
type readyConn struct {
	picker balancer.Picker
	sc     balancer.SubConn // nil: ask picker on every pick
}

// newReadyConn asks p, a child's READY picker, once, under the
// balancer's lock: a READY pickfirst picker neither blocks nor calls
// back.
func newReadyConn(p balancer.Picker) *readyConn {
	c := &readyConn{picker: p}
	if res, err := p.Pick(balancer.PickInfo{Ctx: context.Background()}); err == nil && res.Done == nil && res.Metadata.Len() == 0 {
		c.sc = res.SubConn
	}
	return c
}

// followChild notes the child's new state and picker: a READY picker
// becomes conn; any other state leaves conn as it was (eager policies:
// a snapshot's picks go to the last READY connection until the next
// snapshot drops the endpoint, as they would through that picker), or
// clears it when followsChild says picks follow the child's latest
// picker (live) whenever it is not READY, as a lazy policy's do.
func (e *Endpoint) followChild(st connectivity.State, p balancer.Picker, followsChild bool) {
	switch {
	case st == connectivity.Ready && p != nil:
		e.conn.Store(newReadyConn(p))
	case followsChild:
		e.conn.Store(nil)
	}
}

// pickChild is e's child's answer for a call being picked for e: its
// last READY picker's (conn), or under a lazy policy while it is not
// READY, its latest picker's.
func (e *Endpoint) pickChild(info balancer.PickInfo) (balancer.PickResult, error) {
	if res, ok := e.readyResult(); ok {
		return res, nil
	}
	return e.askChild(info)
}

// readyResult is pickChild's answer when it needs no picker asked (the
// common case: a READY pickfirst child), and false otherwise, when the
// caller asks the child (askChild). Small enough to inline into the
// pickers, where pickChild, with its call, is not.
func (e *Endpoint) readyResult() (balancer.PickResult, bool) {
	c := e.conn.Load()
	if c == nil || c.sc == nil {
		return balancer.PickResult{}, false
	}
	return balancer.PickResult{SubConn: c.sc}, true
}

// askChild is pickChild when the child's picker must be asked.
func (e *Endpoint) askChild(info balancer.PickInfo) (balancer.PickResult, error) {
	if c := e.conn.Load(); c != nil {
		return c.picker.Pick(info)
	}
	return e.live.Pick(info)
}

// Pick picks with the child's latest picker, or queues the call if the
// child has reported none.
func (l *livePicker) Pick(info balancer.PickInfo) (balancer.PickResult, error) {
	if b := l.p.Load(); b != nil && b.Picker != nil {
		return b.Pick(info)
	}
	return balancer.PickResult{}, balancer.ErrNoSubConnAvailable
}
