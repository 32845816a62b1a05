package engine

import (
	"slices"
	"sync/atomic"

	"google.golang.org/grpc/balancer"
)

// WeightedRR is the engine's smooth weighted round-robin picker: every
// pick takes the next position of a precomputed Schedule, so shares follow
// the weights exactly over a cycle and no endpoint gets a burst. The
// weights are the snapshot's backend-reported ones when it has them, the
// static weights otherwise, times slow start's factor and divided by the
// failure penalty, both as of the snapshot's time: the engine republishes
// at every weight update, so a ramp or a penalty moves in those steps.
type WeightedRR struct {
	// Atomic: every pick advances it. Its high half is the position in
	// the schedule; its low half counts the picker's picks (picks), with
	// the same add. On a line of its own, so that the immutable fields
	// every pick reads are not invalidated with it.
	next atomic.Uint64
	_    [cacheLine - 8]byte

	// Immutable after construction.
	snap     *Snapshot
	sched    *Schedule
	fallback bool // every pick is for ReasonRoundRobinFallback, not ReasonWeighted
}

// What a pick adds to next: one position and one count. A count that wraps
// carries into the position, which only moves the schedule on by one; a
// retry's further steps add positions only.
const (
	nextPosition = 1 << 32
	nextCount    = 1
	nextPick     = nextPosition | nextCount
)

// NewWeightedRR returns a WeightedRR picker over snap, starting at a random
// position so that many clients with the same weights do not move through
// the backends in step.
func NewWeightedRR(snap *Snapshot) *WeightedRR {
	// The schedule reads its weights and keeps none, so while neither slow
	// start nor avoidance changes one, it is given the snapshot's own: over
	// a large fleet their copy would be a good part of what a publish
	// allocates, and of the collections that follow.
	ws, own := snap.Weights, false
	if ws == nil {
		ws, own = make([]float64, len(snap.Endpoints)), true
	}
	// Avoidance reads each endpoint's counts, a cache miss apiece over a
	// large fleet: asked only when some endpoint may have failures.
	avoid := snap.mayAvoid()
	// With no ramps, no avoidance and the snapshot's own weights, every
	// weight is used as it is, and the loop would read each endpoint for
	// nothing.
	if own || avoid || snap.ramps != nil {
		for i := range snap.Endpoints {
			r := &snap.Endpoints[i]
			base := 1 / r.InvWeight
			if snap.Weights != nil {
				base = snap.Weights[i]
			}
			w := base * snap.RampFactor(i, snap.Built)
			if avoid {
				// Avoidance scales the share as it does a d-choice
				// picker's: an endpoint passed over with probability q
				// keeps 1-q of its picks.
				w *= 1 - snap.Avoidance(r.Stats)
			}
			if !own && w != base {
				ws, own = slices.Clone(ws), true
			}
			if own {
				ws[i] = w
			}
		}
	}
	p := &WeightedRR{snap: snap, sched: NewSchedule(ws), fallback: snap.WeightsFallback}
	p.next.Store(snap.Rand.Uint64() &^ (nextPosition - 1))
	return p
}

// picks is how many picks the picker has placed, mod 2^32, counting those
// under way that may yet be taken back (uncount).
func (p *WeightedRR) picks() uint32 { return uint32(p.next.Load()) }

// reason is what the picker's picks are counted for.
func (p *WeightedRR) reason() PickReason {
	if p.fallback {
		return ReasonRoundRobinFallback
	}
	return ReasonWeighted
}

// Schedule is the order the picker follows, for tests and tools.
func (p *WeightedRR) Schedule() *Schedule { return p.sched }

// Snapshot is what the picker was built from, for tests and tools; its
// Weights are nil once the balancer has built the picker
// (Snapshot.Weights).
func (p *WeightedRR) Snapshot() *Snapshot { return p.snap }

// Pick implements balancer.Picker. Like every engine picker it tracks the
// call's outcome; with per-call reports, the call's Done also reads its
// ORCA report (Endpoint.weightedDone).
//
// It writes nothing on the endpoint: the one atomic add that advances the
// position also counts the pick, and the balancer records the picker's
// count for its reason (pickerCounts). A count on the endpoint, and the
// in-flight count every other engine picker keeps there, which nothing
// this picker places by reads, were a second atomic add on every pick, on
// a line the other cores had written last: half of a pick's time.
// Probes are counted, in flight too, as every policy's are.
func (p *WeightedRR) Pick(info balancer.PickInfo) (balancer.PickResult, error) {
	a := AttemptsOf(info)
	pos := uint32(p.next.Add(nextPick) >> 32)
	if len(p.snap.Ejected) > 0 {
		if res, err, ok := p.snap.Probe(info, a, pos); ok {
			p.uncount() // counted as a probe instead
			return res, err
		}
	}
	i := p.sched.Next(pos)
	r := &p.snap.Endpoints[i]
	if a != nil && a.earlier() && a.Used(r.Stats) {
		// A retry: the next positions of the schedule, until one that no
		// earlier attempt used. The schedule interleaves endpoints, so
		// this takes a step or two; it gives up after as many steps as
		// there are endpoints.
		for k := 0; k < len(p.snap.Endpoints); k++ {
			j := p.sched.Next(uint32(p.next.Add(nextPosition) >> 32))
			if c := &p.snap.Endpoints[j]; !a.Used(c.Stats) {
				i, r = j, c
				break
			}
		}
	}
	res, err := pickWeighted(r, info)
	if err != nil {
		p.uncount() // nothing placed
	}
	if a != nil {
		return a.Record(r.Stats, res, err)
	}
	return res, err
}

// uncount takes back the count of a pick that placed no call of the
// picker's own: a borrow from the position only moves the schedule back one.
func (p *WeightedRR) uncount() { p.next.Add(^uint64(nextCount - 1)) }
