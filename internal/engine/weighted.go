package engine

import (
	"math/bits"
	"runtime"
	"slices"
	"sync/atomic"

	"github.com/pickwise/pickwise/internal/procid"
	"google.golang.org/grpc/balancer"
)

// WeightedRR is the engine's smooth weighted round-robin picker: every
// pick takes the next position of a precomputed Schedule, so shares follow
// the weights exactly over a cycle and no endpoint gets a burst. (Picks on
// different Ps advance different positions, as many as GOMAXPROCS when
// the picker was built, up to 64; see cursorsFor.) The weights are the
// snapshot's backend-reported ones when it has them, the static weights
// otherwise, times slow start's factor and divided by the
// failure penalty, both as of the snapshot's time: the engine republishes
// at every weight update, so a ramp or a penalty moves in those steps.
type WeightedRR struct {
	// Immutable after construction.
	snap     *Snapshot
	sched    *Schedule
	fallback bool // every pick is for ReasonRoundRobinFallback, not ReasonWeighted
	// cursors are where the picker is in its schedule: one per P, each
	// walking the whole schedule from a random position of its own (see
	// cursorsFor), or one alone. mask is len(cursors)-1, a power of two
	// less one, so that any P's id selects one.
	cursors []cursor
	mask    uint32
}

// cursor is one position in a WeightedRR picker's schedule. Atomic: every
// pick advances one. Its high half is the position in the schedule; its
// low half counts the picks it placed (picks), with the same add. On a
// line of its own: a P's picks write its cursor's line, which it wrote
// last itself, while one cursor shared by all would move its line between
// the cores on nearly every pick.
type cursor struct {
	next atomic.Uint64
	_    [cacheLine - 8]byte
}

// maxCursors caps a picker's cursors (a cache line each, allocated with
// every picker): past it, Ps share them.
const maxCursors = 64

// What a pick adds to next: one position and one count. A count that wraps
// carries into the position, which only moves the schedule on by one; a
// retry's further steps add positions only.
const (
	nextPosition = 1 << 32
	nextCount    = 1
	nextPick     = nextPosition | nextCount
)

// NewWeightedRR returns a WeightedRR picker over snap.
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
	return newWeightedRR(snap, NewSchedule(ws), cursorsFor(snap))
}

// newWeightedRR is the picker over snap that follows sched with n cursors,
// a power of two, each starting at a random position, so that many
// clients with the same weights do not move through the backends in step.
func newWeightedRR(snap *Snapshot, sched *Schedule, n int) *WeightedRR {
	p := &WeightedRR{snap: snap, sched: sched, fallback: snap.WeightsFallback, cursors: make([]cursor, n), mask: uint32(n - 1)}
	for i := range p.cursors {
		p.cursors[i].next.Store(snap.Rand.Uint64() &^ (nextPosition - 1))
	}
	return p
}

// cursorsFor is how many cursors a picker over snap walks its schedule
// with: one per P (GOMAXPROCS rounded up to a power of two, at most
// maxCursors), so that picks on different cores advance different lines.
// Each cursor follows the schedule in order, so the picks a P places keep
// the schedule's smoothness; all the picker's picks together give each
// endpoint its share up to what each cursor's walk has not yet evened
// out, a run shorter than a cycle: within a few times n picks per
// cursor, whatever the cores' pace (TestWeightedRRCursorsKeepShares).
// GOMAXPROCS is read when the picker is built (PerPSlots).
func cursorsFor(snap *Snapshot) int { return PerPSlots(snap.Rand, maxCursors) }

// PerPSlots is how many slots a structure spread over Ps keeps when it
// draws from rnd: one per P, GOMAXPROCS rounded up to a power of two, at
// most limit (a power of two), so that an id from procid.Hint masked by
// the count minus one picks one. GOMAXPROCS is read at the call: if it
// grows later, Ps share slots, which costs speed, not results. Seeded runs
// (tests, the simulator) get one: which P a goroutine runs on is not
// theirs to fix, and what they compute must follow from the seed alone.
func PerPSlots(rnd Rand, limit int) int {
	if _, system := rnd.(SystemRand); !system {
		return 1
	}
	return min(1<<bits.Len(uint(runtime.GOMAXPROCS(0)-1)), limit)
}

// cursor is the cursor the calling goroutine's picks advance: its P's.
func (p *WeightedRR) cursor() *cursor {
	if p.mask == 0 {
		return &p.cursors[0]
	}
	return &p.cursors[uint32(procid.Hint())&p.mask]
}

// picks is how many picks the picker has placed, mod 2^32, counting those
// under way that may yet be taken back (uncount).
func (p *WeightedRR) picks() uint32 {
	var n uint32
	for i := range p.cursors {
		n += uint32(p.cursors[i].next.Load())
	}
	return n
}

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
// position (its P's cursor) also counts the pick, and the balancer records
// the picker's count for its reason (pickerCounts). A count on the endpoint, and the
// in-flight count every other engine picker keeps there, which nothing
// this picker places by reads, were a second atomic add on every pick, on
// a line the other cores had written last: half of a pick's time.
// Probes are counted, in flight too, as every policy's are.
func (p *WeightedRR) Pick(info balancer.PickInfo) (balancer.PickResult, error) {
	a := AttemptsOf(info)
	c := p.cursor()
	pos := uint32(c.next.Add(nextPick) >> 32)
	if len(p.snap.Ejected) > 0 {
		if res, err, ok := p.snap.Probe(info, a, pos); ok {
			c.uncount() // counted as a probe instead
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
			j := p.sched.Next(uint32(c.next.Add(nextPosition) >> 32))
			if next := &p.snap.Endpoints[j]; !a.Used(next.Stats) {
				i, r = j, next
				break
			}
		}
	}
	res, err := pickWeighted(r, info)
	if err != nil {
		c.uncount() // nothing placed
	}
	if a != nil {
		return a.Record(r.Stats, res, err)
	}
	return res, err
}

// uncount takes back the count of a pick that placed no call of the
// picker's own: a borrow from the position only moves the schedule back one.
func (c *cursor) uncount() { c.next.Add(^uint64(nextCount - 1)) }
