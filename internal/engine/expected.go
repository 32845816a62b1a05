package engine

import (
	"math"
	"sync/atomic"
	"time"

	"github.com/pickwise/pickwise/orcaweight"
	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/connectivity"
)

// What a WeightedRR picker compares an endpoint's calls in flight with
// (WeightedRR.shorterOf): how many of this client's calls it is expected
// to hold under the weighted split. By Little's law that is its share of
// the calls times their latency, so endpoint i's expected count is
//
//	E_i = k × w_i × l_i
//
// with w_i its weight, l_i its baseline latency (observeBase), and k
// what makes the E_i add up to the calls this client has in flight,
// which the weight keeper samples at every update. Counts compared with
// one another, or with the weights alone, would move calls between
// healthy endpoints for good: older hardware (the same workers, longer
// calls) holds as many calls in flight at the weighted split as newer,
// which a comparison per weight takes for a queue; a larger machine (more
// workers, calls as long) holds more, which a plain comparison does.

// An endpoint's baseline latency is a low quantile of the latencies of
// its answered calls that WeightedRR pickers timed, kept in its rtt, which
// no latency-aware picker uses under a WeightedRR: bits holds it, stamp
// when it last moved, lastTimed when the call being timed for it started
// (one at a time). A sample below it pulls it down with a time constant
// of baseFall, one above pushes it up with baseRise, the pull of each
// scaled by the time since the last sample, so that dense and sparse
// samples move it alike. It follows a backend that turned faster within a
// second or two and one that turned slower over half a minute: a slowdown
// of a few seconds (a noisy neighbour) barely moves it and shows as calls
// in flight above the expected count, while a backend that is slower for
// good, once its weight has followed, is expected to hold its longer
// calls. A sample counts for at most twice the baseline, so that one late
// answer moves it little. Two Dones at once may lose one sample.
//
// For baseWarm after its first sample, and after a gap as long between
// two, two samples above it in a row pull it halfway up to the lesser of
// them, uncapped: an endpoint's first answers may come before its backend
// carries its load (a warm-up, an idle process), and held to the slow
// rise, answers far faster than the rest would keep its expected count
// near zero, and its calls on the other endpoints, for minutes. One late
// answer (a pause of either process) moves it not at all: a baseline too
// high is no safer than one too low, as k scales every other endpoint's
// expected count down with it, and their calls move to this one until it
// falls, a second or two later.
const (
	baseFall = float64(time.Second)
	baseRise = float64(30 * time.Second)
	baseWarm = 3 * time.Second
)

// observeBase folds an answered call's latency, taken at now, into e's
// baseline.
func (e *Endpoint) observeBase(latency, now int64) {
	if latency <= 0 {
		return
	}
	r := &e.rtt
	x := float64(latency)
	last := r.stamp.Swap(now)
	old := math.Float64frombits(r.bits.Load())
	if old == 0 {
		r.bits.Store(math.Float64bits(x))
		e.basePrev.Store(latency)
		e.baseFrom.Store(now)
		return
	}
	if now-last >= int64(baseWarm) {
		e.baseFrom.Store(now)
	}
	// 1 - e^(-dt/tau), to first order: samples come far more often than
	// either time constant, and a long gap takes the whole way.
	dt := float64(max(now-last, 0))
	prev := float64(e.basePrev.Swap(latency))
	var g float64
	switch {
	case x > old && now-e.baseFrom.Load() < int64(baseWarm):
		if x = min(x, prev); x > old {
			g = max(min(dt/baseRise, 1), 0.5)
		}
	case x > old:
		x = min(x, 2*old)
		g = min(dt/baseRise, 1)
	default:
		g = min(dt/baseFall, 1)
	}
	r.bits.Store(math.Float64bits(old + g*(x-old)))
}

// baseline is the baseline latency in ns, 0 before a sample.
func (r *rtt) baseline() float64 { return math.Float64frombits(r.bits.Load()) }

// resetBase forgets the baseline: a new connection may be a new process.
// A call being timed keeps its start, and its answer starts the new one.
func (e *Endpoint) resetBase() {
	e.rtt.bits.Store(0)
	e.rtt.stamp.Store(0)
}

// expectHalfLife is the half-life of the average of k over updates: a
// sample of the calls in flight at one instant is noisy, and k changes
// with the load, over seconds.
const expectHalfLife = 3 * time.Second

// expectation is the weight keeper's part: k, averaged over updates, and
// the sums of one update, which the keeper's pass over the endpoints
// feeds (add) before one more pass sets every expected count (finish).
// Guarded by the balancer's mu.
type expectation struct {
	k float64 // 0 until an update found an endpoint with a baseline

	// Of the READY endpoints: the sum and count of the usable weights,
	// and of those with a baseline, the calls in flight, the sum of
	// weight times baseline over those with a usable weight, and the sum
	// of baselines over the others.
	sumW, inFlight, wl, l float64
	nW                    int
}

func (x *expectation) start() {
	x.sumW, x.inFlight, x.wl, x.l, x.nW = 0, 0, 0, 0, 0
}

// add counts e, READY, its weight and status as the update set them.
func (x *expectation) add(e *Endpoint) {
	usable := e.weights.status == orcaweight.Usable
	if usable {
		x.sumW += e.weights.weight
		x.nW++
	}
	l := e.rtt.baseline()
	if l <= 0 {
		return
	}
	x.inFlight += float64(e.inflight.Load())
	if usable {
		x.wl += e.weights.weight * l
	} else {
		x.l += l
	}
}

// finish sets the expected count of every READY endpoint in order,
// elapsed after the last update. Weights count relative to the mean of
// the usable ones, so that k keeps its scale when the weights change
// theirs (at the end of a blackout, say): an endpoint without a usable
// weight is expected at the mean (the schedule gives it the median), and
// with fewer than two usable weights every endpoint at the same, as in
// the schedule. One without a baseline yet has no expected count (0),
// and its picks compare bare counts.
func (x *expectation) finish(order []*Endpoint, elapsed time.Duration) {
	scale := 0.0 // a usable weight's factor, 1/mean; 0 in fallback
	sum := x.l
	switch {
	case x.nW >= 2:
		scale = float64(x.nW) / x.sumW
		sum += x.wl * scale
	case x.nW == 1:
		sum += x.wl / x.sumW // its baseline: in fallback every weight is 1
	}
	if sum > 0 {
		k := x.inFlight / sum
		if x.k == 0 {
			x.k = k
		} else {
			x.k += -math.Expm1(-math.Ln2*float64(elapsed)/float64(expectHalfLife)) * (k - x.k)
		}
	}
	for _, e := range order {
		if e.state != connectivity.Ready {
			continue
		}
		var want float64
		if l := e.rtt.baseline(); l > 0 {
			w := 1.0
			if scale > 0 && e.weights.status == orcaweight.Usable {
				w = e.weights.weight * scale
			}
			want = x.k * w * l
		}
		if e.expectedWord().Load() != math.Float64bits(want) {
			e.expectedWord().Store(math.Float64bits(want))
		}
	}
}

// expectedWord holds math.Float64bits of how many of this client's calls e
// is expected to hold in flight, which a WeightedRR pick compares its
// count with; 0 while unknown. The weight keeper sets it at every update.
func (e *Endpoint) expectedWord() *atomic.Uint64 { return &e.answer }

// expectedOf is e's expected count, 0 if it has none.
func expectedOf(e *Endpoint) float64 { return math.Float64frombits(e.expectedWord().Load()) }

// A WeightedRR picker times the calls of each endpoint for its baseline
// at about one every baseEvery, one at a time: the share of its picks it
// times is 2^-shift, by a hash of the schedule position (so that no cycle
// of the schedule aliases with it), and each timed call's Done moves
// shift by one to bring the time between samples into [baseEvery/2,
// 2*baseEvery]. A busy endpoint has one call in thousands timed, and one
// with few calls, as under many clients, one in two, with no clock read
// to decide: the pick reads the clock only for a call it times.
//
// rtt.lastTimed holds it: while a call is timed, its start<<4 | shift;
// otherwise -shift, or 0 before the first.
const (
	baseEvery    = 20 * time.Millisecond
	maxBaseShift = 12
)

// baseShift is the shift rtt.lastTimed holds while no call is timed; ok
// is false while one is.
func baseShift(v int64) (shift uint, ok bool) {
	switch {
	case v > 0:
		return 0, false
	case v == 0:
		return 1, true
	}
	return uint(-v), true
}

// pickPlaced is pickWeighted at schedule position pos, or, if the hash of
// pos falls in r's share of timed calls and none is being timed, the same
// pick timed for r's baseline.
func pickPlaced(r *Ready, info balancer.PickInfo, pos uint32) (balancer.PickResult, error) {
	e := r.Stats
	v := e.rtt.lastTimed.Load()
	shift, ok := baseShift(v)
	if !ok || (pos*0x9e3779b9)>>(32-shift) != 0 || e.shared.clock == nil {
		return pickWeighted(r, info)
	}
	now := max(e.shared.clock.Nanotime(), 1)
	if !e.rtt.lastTimed.CompareAndSwap(v, now<<4|int64(shift)) {
		return pickWeighted(r, info)
	}
	res, ok := e.readyResult()
	if !ok {
		var err error
		if res, err = e.askChild(info); err != nil {
			e.rtt.lastTimed.Store(-int64(shift))
			return res, err
		}
	}
	e.inflight.Add(1)
	return withDone(res, e.baseDone), nil
}

// newBaseDone builds e.baseDone: weightedDone, then an answer's latency
// into the baseline, and the share of calls timed set for the next.
// Not inlined, for newDone's reason.
//
//go:noinline
func (e *Endpoint) newBaseDone() func(balancer.DoneInfo) {
	return func(info balancer.DoneInfo) {
		e.weightedDone(info)
		v := e.rtt.lastTimed.Load()
		start, shift := v>>4, v&15
		now := e.shared.clock.Nanotime()
		switch since := now - e.rtt.stamp.Load(); {
		case since < int64(baseEvery/2):
			shift = min(shift+1, maxBaseShift)
		case since > int64(2*baseEvery):
			shift = max(shift-1, 1)
		}
		if info.Err == nil {
			e.observeBase(now-start, now)
		}
		e.rtt.lastTimed.Store(-shift)
	}
}
