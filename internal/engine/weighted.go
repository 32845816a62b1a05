package engine

import (
	"math/bits"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync/atomic"

	"github.com/pickwise/pickwise/internal/procid"
	"github.com/pickwise/pickwise/internal/schedule"
	"google.golang.org/grpc/balancer"
)

// WeightedRR is the engine's smooth weighted round-robin picker: every
// pick takes the next position of a precomputed Schedule, so shares follow
// the weights exactly over a cycle and no endpoint gets a burst, but for
// a pick whose endpoint holds more of this client's calls than expected,
// which goes to a less loaded second candidate (shorterOf). (While
// picks are very dense, those on different Ps advance different
// positions, as many as GOMAXPROCS when the picker was built, up to 64;
// see spreadRate.) The weights are the
// snapshot's backend-reported ones when it has them, the static weights
// otherwise, times slow start's factor and divided by the
// failure penalty, both as of the snapshot's time: the engine republishes
// at every weight update, so a ramp or a penalty moves in those steps.
type WeightedRR struct {
	// Immutable after construction.
	snap  *Snapshot
	sched *schedule.Schedule
	// cursors are where the picker is in its schedule once picks are
	// spread: one per P, each walking the whole schedule from a random
	// position of its own (see cursorsFor); nil when there is one P or the
	// run is seeded. mask is len(cursors)-1, a power of two less one, so
	// that any P's id selects one.
	cursors []cursor
	// shared is the one position every pick advances while picks are not
	// spread, and the rate checks' state.
	shared *cursor
	// checks is set while some endpoint ramps, if ramps end on
	// evidence: picks time some answers, and judge the ramping
	// endpoints' evidence (ramp.Proof, pickProving). Nil otherwise.
	checks *rampChecks
	// mask fits a byte: there are at most maxCursors cursors.
	mask       uint8
	opts       uint8 // optFallback, optShorter, optSystem: one byte, as the line has no room for three
	checksRate bool  // the picker has cursors and a clock to spread its picks by
	unserved   bool  // the snapshot's: picks mark the channel's first call (notePlaced)

	// spread is set by a rate check that finds picks coming faster than
	// spreadRate from more than one P, and cleared by one that finds them
	// slower than half of it or from one P (checkRate): while set, each P
	// advances its own cursor. Written at a check,
	// read by every pick, beside the fields above that every pick reads.
	// With it the picker is one cache line (TestWeightedRRLayout), which
	// the allocator aligns and no other object's writes take from a core.
	spread atomic.Bool
}

// A WeightedRR picker's opts.
const (
	optFallback uint8 = 1 << iota // every pick is for ReasonRoundRobinFallback, not ReasonWeighted
	optShorter                    // a pick may go to a second candidate with fewer calls in flight (shorterOf)
	optSystem                     // snap.Rand is SystemRand: drawn from without the interface
)

// Picks on every P take their positions from the one shared cursor, so
// that all of them together follow the schedule's order: each endpoint's
// calls come as evenly spaced as its weight allows. Cursors of their own
// per P, each walking the schedule from a random position, save the line
// that moves between the cores on nearly every pick, but their picks
// together do not keep the order: when two cursors come near each other,
// one endpoint's slots come side by side, and backends that serve a call
// or a few at a time queue behind those pairs (the lab's two hardware
// generations, 900 calls a second from two cores: p50 14-15 ms and p99
// 32-36 ms, against 11 and 23-25 ms with one position). The line's moves cost
// little unless picks are very dense, so a picker spreads its picks over
// per-P cursors only while they come faster than spreadRate, and takes
// them back to the shared cursor once they come slower than half that.
// Only picks on more than one P move the line: a picker whose dense picks
// all come from one P (a single goroutine's loop) stays shared, where
// spreading would only add the reading of the P to every pick. Whichever
// cursor a pick takes, one position in rateCheckEvery checks the rate
// (checkRate); a channel's first picker starts shared, and each one
// rebuilt after it (at every weight update and connectivity change) as
// the last one stood.
const (
	spreadRate     = 1_000_000 // picks a second
	rateCheckEvery = 1 << 12   // a power of two: checked by a mask of the position
)

// cursor is one position in a WeightedRR picker's schedule. Atomic: every
// pick advances one. Its next's high half is the position in the
// schedule; its low half counts the picks it placed (picks), with the
// same add. On a line of its own: a P's picks write its cursor's line,
// which it wrote last itself, while one cursor shared by all moves its
// line between the cores on nearly every pick. The shared cursor's line
// also holds the rate checks' state; a per-P cursor keeps only its own
// count as of the last check.
type cursor struct {
	next         atomic.Uint64
	checked      atomic.Int64  // shared cursor: Clock.Nanotime at the last rate check
	checkedPicks atomic.Uint32 // picks() at the last deciding rate check; a per-P cursor: its own picks then
	checkedBy    atomic.Uint32 // shared cursor: 1 + the P that made the last rate check; 0 before one
	checking     atomic.Bool   // shared cursor: a rate check is under way
	spread       atomic.Bool   // shared cursor: the picker's spread, kept here for the picker after it (WeightedRRPosition)
	_            [cacheLine - 32]byte
}

// maxCursors caps a picker's cursors (a cache line each, allocated with
// every picker): past it, Ps share them.
const maxCursors = 64

// What a pick adds to next: one position and one count. A count that wraps
// carries into the position, which only moves the schedule on by one; a
// retry's further steps, and a slot given up to repay a lent call, add
// positions only.
const (
	nextPosition = 1 << 32
	nextCount    = 1
	nextPick     = nextPosition | nextCount
)

// NewWeightedRR returns a WeightedRR picker over snap, starting at a
// random position of its schedule.
func NewWeightedRR(snap *Snapshot) *WeightedRR { return NewWeightedRRAfter(snap, nil) }

// NewWeightedRRAfter returns a WeightedRR picker over snap that takes
// over from the balancer's last one, which stood at from (nil: none).
// Over the same order (schedule.Schedule.SameOrder), its positions continue the
// last picker's rather than starting at random ones. A picker is rebuilt
// at every weight update (ten times a second by default) and connectivity
// change; from a random position, each rebuild gave every endpoint a
// random gap before its next call, down to none, and a backend that
// serves a call or a few at a time queued behind the pairs that made.
// The order is held while every endpoint's slots stay within one of
// what its weight asks (schedule.NewAfter): smoothed weights that drift by
// up to a part in a thousand per update keep it at over nine rebuilds in
// ten (TestScheduleHeldWhileWithinASlot); a sweep never keeps it. A
// rebuild over another order, and a channel's first picker, start at
// random, which keeps clients with the same weights out of step.
func NewWeightedRRAfter(snap *Snapshot, from *WeightedRRPosition) *WeightedRR {
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
	p := newWeightedRR(snap, schedule.NewAfter(ws, from.order()), cursorsFor(snap))
	if from != nil {
		p.continueFrom(from)
	}
	return p
}

// WeightedRRPosition is where a WeightedRR picker stands: its order (nil
// for a sweep, which no rebuild continues) and its cursors, which its
// picks still move. It is what the next picker takes over from, and holds
// neither the snapshot nor its endpoints, so a balancer that keeps it
// between pickers keeps no fleet alive.
type WeightedRRPosition struct {
	sched   *schedule.Schedule
	shared  *cursor
	cursors []cursor
}

// order is the order from's picker followed, nil for none (or no from).
func (from *WeightedRRPosition) order() *schedule.Schedule {
	if from == nil {
		return nil
	}
	return from.sched
}

// Position returns where p stands, for the picker rebuilt after it.
func (p *WeightedRR) Position() *WeightedRRPosition {
	pos := &WeightedRRPosition{shared: p.shared, cursors: p.cursors}
	if !p.sched.Sweeps() {
		pos.sched = p.sched
	}
	return pos
}

// continueFrom moves p's cursors, fresh and counting no picks, to where
// from's stand, if p follows the same order: the shared one to from's
// shared one's position, each per-P one to the same P's, while both
// pickers have as many. Whatever the order, if both pickers have as
// many per-P cursors and p checks its rate, p keeps the last picker's
// reading of its picks' Ps: a picker whose picks were spread starts
// spread, and one whose last check ran on another P than p's first
// spreads at that first check if the picks are dense, rather than
// spending a check on learning the P again.
func (p *WeightedRR) continueFrom(from *WeightedRRPosition) {
	if p.checksRate && len(p.cursors) == len(from.cursors) {
		p.shared.checkedBy.Store(from.shared.checkedBy.Load())
		spread := from.shared.spread.Load()
		p.spread.Store(spread)
		p.shared.spread.Store(spread)
	}
	if !p.sched.SameOrder(from.sched) {
		return
	}
	take := func(c, from *cursor) { c.next.Store(from.next.Load() &^ (nextPosition - 1)) }
	take(p.shared, from.shared)
	if len(p.cursors) == len(from.cursors) {
		for i := range p.cursors {
			take(&p.cursors[i], &from.cursors[i])
		}
	}
}

// newWeightedRR is the picker over snap that follows sched with n cursors,
// a power of two, each starting at a random position, so that many
// clients with the same weights do not move through the backends in step.
func newWeightedRR(snap *Snapshot, sched *schedule.Schedule, n int) *WeightedRR {
	p := &WeightedRR{snap: snap, sched: sched, unserved: snap.unserved, shared: &cursor{}}
	if snap.WeightsFallback {
		p.opts |= optFallback
	}
	// Only where failures are counted: an endpoint that fails fast has
	// few calls in flight, and without its failures counted it would take
	// every call the comparison moves (shorterOf).
	if len(snap.Endpoints) > 1 && snap.penalty != nil {
		p.opts |= optShorter
	}
	if _, system := snap.Rand.(SystemRand); system {
		p.opts |= optSystem
	}
	if snap.provesRamps() {
		p.checks = newRampChecks(snap)
	}
	p.shared.next.Store(snap.Rand.Uint64() &^ (nextPosition - 1))
	if n > 1 {
		p.cursors, p.mask = make([]cursor, n), uint8(n-1)
		for i := range p.cursors {
			p.cursors[i].next.Store(snap.Rand.Uint64() &^ (nextPosition - 1))
		}
		if snap.Clock != nil { // one built by hand may have none: it stays shared
			p.checksRate = true
			p.shared.checked.Store(snap.Clock.Nanotime())
		}
	}
	return p
}

// cursorsFor is how many cursors a picker over snap walks its schedule
// with once its picks spread: one per P (GOMAXPROCS rounded up to a power
// of two, at most maxCursors), so that picks on different cores advance
// different lines. Each cursor follows the schedule in order, so the picks
// a P places keep the schedule's smoothness; all the picker's picks
// together give each endpoint its share up to what each cursor's walk has
// not yet evened out, a run shorter than a cycle: within a few times n
// picks per cursor, whatever the cores' pace
// (TestWeightedRRCursorsKeepShares). GOMAXPROCS is read when the picker
// is built (PerPSlots).
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

// advance moves c on by step (nextPick, or nextPosition for a retry's
// further steps and a repaid slot) and returns the position taken; one position in
// rateCheckEvery of any cursor checks the pick rate.
func (p *WeightedRR) advance(c *cursor, step uint64) uint32 {
	pos := uint32(c.next.Add(step) >> 32)
	if pos%rateCheckEvery == 0 && p.checksRate {
		p.checkRate(uint32(procid.Hint()))
	}
	return pos
}

// checkRate spreads the picks over per-P cursors if they came faster than
// spreadRate since the last check and from more than one P, and takes
// them back to the shared cursor if they came slower than half that, or
// nearly all (all but a sixteenth) from one P. by is the P the check runs
// on. While picks are shared, which Ps made them is not kept, so the
// Ps that made the last two checks stand for them: picks from several
// Ps cross the marks on one, then another, within a check or two; one
// goroutine's picks cross them on one P, until it moves. While they are
// spread, each per-P cursor's count says.
//
// One check runs at a time: two at once would pair one's reading with the
// other's count. A check that finds one under way leaves the window to
// it, and so does one that comes fewer than rateCheckEvery/2 picks after
// the last (per-P cursors cross their marks at their own times, and a
// window of a few picks over a few nanoseconds is no rate). The counts
// since the last check are signed: a pick taken back (uncount) after the
// last check read it can leave one below that reading, which is no picks
// rather than four billion. Kept out of line: one pick in rateCheckEvery
// calls it.
//
//go:noinline
func (p *WeightedRR) checkRate(by uint32) {
	s := p.shared
	if !s.checking.CompareAndSwap(false, true) {
		return
	}
	defer s.checking.Store(false)
	now := p.snap.Clock.Nanotime()
	// Every cursor's count, read once: what this check compares and,
	// if it decides, what the next one compares with.
	var counts [maxCursors]uint32
	n, most := uint32(s.next.Load()), int32(0)
	for i := range p.cursors {
		c := &p.cursors[i]
		counts[i] = uint32(c.next.Load())
		n += counts[i]
		most = max(most, int32(counts[i]-c.checkedPicks.Load()))
	}
	picks, took := int32(n-s.checkedPicks.Load()), now-s.checked.Load()
	if picks < rateCheckEvery/2 || took <= 0 {
		return
	}
	s.checked.Store(now)
	s.checkedPicks.Store(n)
	for i := range p.cursors {
		p.cursors[i].checkedPicks.Store(counts[i])
	}
	last := s.checkedBy.Swap(by + 1)
	rate := float64(picks) * 1e9 / float64(took)
	switch spread := p.spread.Load(); {
	case !spread && rate > spreadRate && last != 0 && last != by+1:
		p.spread.Store(true)
		s.spread.Store(true)
	case spread && (rate < spreadRate/2 || most >= picks-picks/16):
		p.spread.Store(false)
		s.spread.Store(false)
	}
}

// picks is how many picks the picker has placed, mod 2^32, counting those
// under way that may yet be taken back (uncount).
func (p *WeightedRR) picks() uint32 {
	n := uint32(p.shared.next.Load())
	for i := range p.cursors {
		n += uint32(p.cursors[i].next.Load())
	}
	return n
}

// reason is what the picker's picks are counted for.
func (p *WeightedRR) reason() PickReason {
	if p.opts&optFallback != 0 {
		return ReasonRoundRobinFallback
	}
	return ReasonWeighted
}

// Schedule is the order the picker follows, for tests and tools.
func (p *WeightedRR) Schedule() *schedule.Schedule { return p.sched }

// Snapshot is what the picker was built from, for tests and tools; its
// Weights are nil once the balancer has built the picker
// (Snapshot.Weights).
func (p *WeightedRR) Snapshot() *Snapshot { return p.snap }

// Pick implements balancer.Picker. Like every engine picker it tracks the
// call's outcome; with per-call reports, the call's Done also reads its
// ORCA report (Endpoint.weightedDone).
//
// The one atomic add that advances the position (the shared cursor, or
// its P's while picks are spread) also counts the pick, and the balancer
// records the picker's count for its reason (pickerCounts): the endpoint
// gets its in-flight count, which shorterOf compares, and no pick count
// (while an endpoint ramps, also the evidence of its ramp). Probes are
// counted as every policy's are.
func (p *WeightedRR) Pick(info balancer.PickInfo) (balancer.PickResult, error) {
	if p.unserved {
		p.snap.notePlaced()
	}
	a := AttemptsOf(info)
	// The cursor, chosen here only, and advance, written out: as methods
	// neither inlined, and the call cost more than the rest of a pick.
	c := p.shared
	if p.spread.Load() {
		c = &p.cursors[uint32(procid.Hint())&uint32(p.mask)]
	}
	pos := uint32(c.next.Add(nextPick) >> 32)
	if pos%rateCheckEvery == 0 && p.checksRate {
		p.checkRate(uint32(procid.Hint()))
	}
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
			j := p.sched.Next(p.advance(c, nextPosition))
			if next := &p.snap.Endpoints[j]; !a.Used(next.Stats) {
				i, r = j, next
				break
			}
		}
	}
	if p.opts&optShorter != 0 {
		if n := r.Stats.inflight.Load(); n > 0 {
			i, r = p.shorterOf(i, r, n, a)
		}
	}
	var res balancer.PickResult
	var err error
	if p.checks != nil {
		open := a == nil || !a.earlier()
		ramping := p.rampingAt(i, r)
		if open && ramping && r.Stats.rampProof.Repay() {
			// The ramping endpoint's slot repays a call lent to it
			// ahead of its share: the next slot's endpoint has it, and
			// the pick lends nothing, which could undo the repayment.
			i = p.sched.Next(p.advance(c, nextPosition))
			r = &p.snap.Endpoints[i]
			ramping, open = p.rampingAt(i, r), false
		}
		res, r, err = p.pickProving(i, r, ramping, info, pos, open)
	} else {
		res, err = p.place(r, info, pos)
	}
	if err != nil {
		c.uncount() // nothing placed
	}
	if a != nil {
		return a.Record(r.Stats, res, err)
	}
	return res, err
}

// place is a WeightedRR pick of r at schedule position pos: pickWeighted,
// or, while picks may go to a second candidate, pickPlaced, which times
// some calls for r's baseline latency (expected.go).
func (p *WeightedRR) place(r *Ready, info balancer.PickInfo, pos uint32) (balancer.PickResult, error) {
	if p.opts&optShorter == 0 {
		return pickWeighted(r, info)
	}
	return pickPlaced(r, info, pos)
}

// shorterOf returns the endpoint that a pick whose schedule position gave
// it i, r, with n of this client's calls in flight, places its call on.
// Weights follow reports a window or more late; calls in flight show a
// slowed backend at once. So a pick whose endpoint holds more than
// expected (expected.go) draws a second candidate by weight and takes it
// if that one is less loaded against its own expectation, its next call
// counted as half a call when it has some (so that small counts around
// fractional expectations do not move calls one way only), or by bare
// counts when it has no expectation yet. Every other pick keeps the
// schedule's endpoint, with no draw. A second candidate is passed over
// while it ramps, once an earlier attempt used it, and while it has
// recent failures (a backend that fails fast holds few calls).
// docs/design/weighted-in-flight.md has why and the measurements.
func (p *WeightedRR) shorterOf(i int, r *Ready, n uint32, a *Attempts) (int, *Ready) {
	ei := expectedOf(r.Stats)
	if ei == 0 || float64(n) <= ei {
		return i, r
	}
	var bits uint64
	if p.opts&optSystem != 0 {
		bits = rand.Uint64()
	} else {
		bits = p.snap.Rand.Uint64()
	}
	j := p.sched.Next(uint32(bits))
	if j == i {
		return i, r
	}
	s := &p.snap.Endpoints[j]
	m := float64(s.Stats.inflight.Load())
	if ej := expectedOf(s.Stats); ei > 0 && ej > 0 {
		if m > 0 {
			m += 0.5
		}
		if float64(n)*ej <= m*ei {
			return i, r
		}
	} else if m >= float64(n) {
		return i, r
	}
	if s.Stats.outcomeBits.Load()>>32 != 0 ||
		(p.snap.ramps != nil && p.snap.ramps[j].end != 0) ||
		(a != nil && a.earlier() && a.Used(s.Stats)) {
		return i, r
	}
	return j, s
}

// uncount takes back the count of a pick that placed no call of the
// picker's own: a borrow from the position only moves the schedule back one.
func (c *cursor) uncount() { c.next.Add(^uint64(nextCount - 1)) }
