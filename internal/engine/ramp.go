package engine

import (
	"math"
	"sync/atomic"
	"time"

	"github.com/pickwise/pickwise/lbconfig"
)

// SlowStartConfig is lbconfig.SlowStartConfig, under the name the
// engine's code uses.
type SlowStartConfig = lbconfig.SlowStartConfig

// ramp is a validated SlowStartConfig in the form the pick path uses.
type ramp struct {
	window        int64 // nanoseconds
	invAggression float64
	minFactor     float64
	// proves says that pickers end a ramp once the endpoint's answers
	// show it warm (rampProof): SlowStartConfig.TimeOnly unset.
	proves bool
}

func newRamp(c *SlowStartConfig) *ramp {
	if c == nil || !c.Enabled {
		return nil
	}
	return &ramp{
		window:        int64(c.Window),
		invAggression: 1 / c.Aggression,
		minFactor:     c.MinWeightPercent / 100,
		proves:        !c.TimeOnly,
	}
}

// factor is the share of its weight an endpoint that became ready elapsed
// nanoseconds ago gets.
func (r *ramp) factor(elapsed int64) float64 {
	if elapsed >= r.window {
		return 1
	}
	// Envoy counts at least one millisecond so the first pick after READY
	// does not see a zero time factor.
	elapsed = max(elapsed, int64(time.Millisecond))
	f := float64(elapsed) / float64(r.window)
	if r.invAggression != 1 {
		f = math.Pow(f, r.invAggression)
	}
	return max(f, r.minFactor)
}

// rampShares holds a d-choice picker's ramping endpoints to the share of
// its picks that their ramped weight gives them. Dividing a ramping
// endpoint's cost by its factor, as weighted schedules do with its weight,
// does not ramp a least-loaded choice: among idle candidates it made the
// newcomer lose every comparison until its ramp ended, and against
// long-lived calls, where a newcomer with nothing in flight is cheaper
// than peers holding hundreds, it won most comparisons it entered (15%
// of new streams against eight peers in the simulator's cold start,
// where its fair share is 11%). So a ramping endpoint competes at its
// full weight, and is passed over while it has taken its share of the
// picks,
//
//	f*w / (total - (1-f)*w)
//
// at ramp factor f, its weighted share with its own weight ramped and the
// others' full; where the loads alone keep it under that share, nothing
// changes. Each time a pick draws it as a candidate, it earns that share
// of n/min(d, n) picks (each pick draws a given endpoint with probability
// min(d, n)/n); where first candidates are drawn by weight (ByWeight),
// each time it is drawn first, that share of total/w picks (its chance
// of being first is w/total), and nothing as a later candidate, whose
// chance has no closed form. It earns at the factor of the moment, so
// that a share that grows with the ramp applies to the picks to come and
// not to those already made; and it keeps at most rampBurst picks of what
// it earned and did not take. The counts are the endpoint's own (rampCount), from the start
// of its ramp, whatever pickers come and go meanwhile, and only the picks
// that draw a ramping endpoint write them: counting the picker's own
// picks would write one line on every pick from every core.
//
// The share assumes the others at full weight: it holds one newcomer, or
// a few, to their ramped shares. When most of the fleet ramps at once
// (a client that lost every connection), every candidate is over its
// share, and the pick goes to the best of them as if none ramped.
type rampShares struct {
	total    float64 // the snapshot's summed weight, unramped
	perDraw  float64 // picks per time an endpoint is drawn: n/min(d, n)
	byWeight bool    // first candidates are drawn by weight: only they earn
}

// rampCount is one endpoint's counts in its current slow-start ramp: the
// share of picks it has earned, in rampUnits, and the picks it took.
type rampCount struct{ earned, took atomic.Int64 }

// reset starts the counts over, for a new ramp.
func (c *rampCount) reset() {
	c.earned.Store(0)
	c.took.Store(0)
}

// rampUnit is a pick in rampCount's fixed point: a share earned a draw is
// a fraction of a pick.
const rampUnit = 1 << 20

// newRampShares returns the shares of a picker over n endpoints whose
// weights sum to total, drawing choices candidates a pick, the first by
// weight if byWeight.
func newRampShares(total float64, n, choices int, byWeight bool) *rampShares {
	return &rampShares{total: total, perDraw: float64(n) / float64(min(choices, n)), byWeight: byWeight}
}

// openingHorizon is how far ahead a ramping endpoint may take its share
// while its ramp's opening is under way (rampShares.drawnFull).
const openingHorizon = 100 * time.Millisecond

// rampBurst bounds what a ramping endpoint keeps of the share it earned
// and did not take: one that the loads kept under its share would
// otherwise spend all of it in one run of picks once they let it. (A run
// can be a pick or two longer: any part of a pick earned admits one.)
const rampBurst = 4

// drawnFull credits c, the counts of an endpoint of weight w at ramp
// factor f, drawn as a pick's first candidate or not, with its share of
// the picks a draw stands for, and reports
// whether it has taken all it earned, and all the opening lets it take
// ahead.
//
// While the ramp's opening is under way (opening, elapsed nanoseconds
// into the ramp), it may also take ahead what it would earn over the next
// openingHorizon at the pace it earned so far, up to quickAnswers picks:
// at a ramped share of a few calls a second the answers that can prove a
// warm endpoint would take a tenth of a second or more to come, and
// while they do the rest of the fleet carries the load the ramp keeps
// from it (warm-rejoin: its first answers, at one pick in a hundred,
// left the others' queues to drain tens of milliseconds longer than
// least_request did). What it takes ahead it does not take again later:
// over the ramp its share is the same; and a client that sends it few
// calls takes nothing ahead, so that clients without number, each
// sending a few calls at once, do not herd onto a cold process.
func (s *rampShares) drawnFull(c *rampCount, w, f float64, first, opening bool, elapsed int64) bool {
	if f >= 1 {
		return false
	}
	perDraw := s.perDraw
	if s.byWeight {
		perDraw = s.total / w
	}
	var earned int64
	if s.byWeight && !first {
		earned = c.earned.Load()
	} else {
		earned = c.earned.Add(int64(f * w / (s.total - (1-f)*w) * perDraw * rampUnit))
	}
	took := c.took.Load() * rampUnit
	limit := earned
	if opening {
		ahead := float64(earned) * float64(openingHorizon) / float64(max(elapsed, int64(time.Millisecond)))
		limit += int64(min(ahead, quickAnswers*rampUnit))
	}
	if took >= limit {
		return true
	}
	if most := took + rampBurst*rampUnit; earned > most {
		// Racing picks may both lower it; either value forgets the rest.
		c.earned.CompareAndSwap(earned, most)
	}
	return false
}

// A ramp is for a cold process, and the only sign of one a client sees is
// its answers: a backend whose connection failed for a moment, or that
// left the endpoint list and came back, is as often the same warm
// process, and a ramp over the whole window then keeps its share of the
// load on the rest of the fleet for as long: four of twelve backends back
// from a two-second blip, held to their ramp, left the other eight over
// capacity for most of half a minute in the simulator (warm-rejoin). So
// pickers time the answers of ramping endpoints, and of their peers, and
// end an endpoint's ramp once its answers show it warm: proofAnswers
// successful answers, whose mean is no more than warmRatio times its
// peers' average, or sooner, quickAnswers of them none slower than
// quickRatio times it; or, on any number of its answers, its peers
// reliefRatio times slower than its slowest (relief: an overloaded
// fleet). Its peers' answers are timed while it ramps (in a d-choice
// picker, those of the endpoints it was compared with; in a weighted
// schedule, a sample of the others; in both, the first call placed
// anywhere once the peers' average started over), so that both cover the
// same span and the same mix of calls. A ramp opens with quickAnswers
// calls, all timed, which a client that sends the endpoint many calls
// places at once (rampShares.drawnFull; in a weighted schedule,
// openingLends), so that they answer together; a client that sends it few
// waits for answers at its ramped share, which can take most of the
// window, and relief is what ends its ramp when the fleet carries too
// much load without it. A cold process answers slower (a JIT not yet
// compiled, caches to fill) and keeps its ramp until it is as fast, or
// its peers are slower still; so does one with only long-lived calls,
// which give no answers to time, and one that fails or drops a call it
// was sent: a failure is the failure penalty's to weigh, and the slow
// calls of a cold process that time out would otherwise leave only its
// fast ones to judge it by. A step in the peers' answers of more than
// capRatio at once is taken for long calls and left out for up to
// peerRedo answers in a row, after which the peers' average starts over
// at the new level (peerAverage).
const (
	// proofAnswers is how many successful timed answers a ramping
	// endpoint gives before they can end its ramp.
	proofAnswers = 8
	// warmRatio is how much slower than its peers' a ramping endpoint's
	// answers may be, on average, and still show it warm: noise between
	// backends, and their peers' queueing, which a ramping endpoint with
	// its small share does not meet, both stay under it; a process that
	// has yet to warm up answers several times slower.
	warmRatio = 1.5
	// quickAnswers and quickRatio are the sooner proof: as many answers
	// as the ramp earns a client in half a second at a few hundred calls
	// a second, none slower than noise allows against its peers' average.
	// A cold process slower on every call cannot give them; one whose
	// calls are often fast (a cache that holds part of what it serves)
	// can, with the chance that its first five all are: for one slow on
	// three calls in ten, 17%, after which it gets its full share, as it
	// would without slow start, and the power of two choices still sees
	// its calls pile up in flight.
	quickAnswers = 5
	quickRatio   = 1.2
	// reliefRatio is how many times slower than a ramping endpoint's
	// slowest answer its peers must be for any number of its answers, one
	// or more, to end its ramp: a fleet that slow is overloaded, as one
	// that carries the load the ramp keeps from a warm backend is
	// (rampProof.relieves), and a backend that answers that much faster
	// is better placed to take its share than they are, cold or not.
	reliefRatio = 2
	// proofGap is the least time between two timed calls that feed one
	// average: at high rates a thousand answers a second are plenty, and
	// the clock's reading is spared on the others.
	proofGap = int64(time.Millisecond)
)

// proofKind says what a timed call's answer is evidence of.
type proofKind uint8

const (
	proofNone     proofKind = iota
	proofOwn                // the answer of a ramping endpoint (rampProof)
	proofBaseline           // the answer of one of its peers (peerAverage)
)

// proofTimer spaces the calls timed for one side of the evidence: at most
// one in proofGap.
type proofTimer struct {
	lastTimed atomic.Int64 // Clock.Nanotime; 0 before the first
}

// claim reports whether a call placed at now is to be timed, and if so
// counts it as the latest; racing picks may both claim one.
func (t *proofTimer) claim(now int64) bool {
	last := t.lastTimed.Load()
	if last != 0 && now-last < proofGap {
		return false
	}
	t.lastTimed.Store(now)
	return true
}

// peerAverage is the balancer's average of its peers' answers, the
// answers of endpoints that are not ramping, that a ramping endpoint's
// own are judged against. It is robust to the long calls of a channel
// that mixes streams with short calls, whose answer is the stream's
// lifetime and would make the peers read slow, and a cold endpoint fast:
// its first peerWarmup answers give their minimum, and after them an
// answer over capRatio times the average is left out; the others move it
// by 1/2^peerShift. peerRedo answers left out in a row are not long
// calls but a fleet that slowed down at once: the warm-up starts over.
// A channel whose calls come in kinds more than capRatio apart keeps an
// average near the faster kind's, which only makes proofs harder. It also
// starts over at a ramp's start when no answer has moved it for
// peersStale, so that a ramp is judged against the fleet of the moment;
// an answer to a call timed before it started over is left out.
//
// Before its first answer, the wait of its calls is a lower bound
// (atLeast), once peerBound of them are timed: the wait of the last of
// them is one that all of them have waited.
type peerAverage struct {
	timer proofTimer
	// timed counts the calls timed since the last restart, up to
	// peerBound and a few more when picks race, and boundFrom is when
	// the peerBound-th started, plus one so that a clock's zero counts
	// (0 until it is timed).
	timed     atomic.Int32
	boundFrom atomic.Int64
	bits      atomic.Uint64 // math.Float64bits of the average; 0 before the first answer
	answers   atomic.Int32  // folded in since the last restart, counted up to peerWarmup+1
	dropped   atomic.Int32  // answers left out in a row
	fedAt     atomic.Int64  // Clock.Nanotime of the last answer folded in
	restarted atomic.Int64  // Clock.Nanotime of the last restart
}

// The peers' average's parameters (peerAverage).
const (
	peerWarmup = 4
	// peerBound is how many of the peers' calls are timed before their
	// wait bounds the average (atLeast): the first. One long call (a
	// stream) can make the peers seem slow only until their first
	// answer, which their other calls give within a call's time; waiting
	// for a later call's start left warm backends behind 50 clients
	// ramping 20 ms longer (warm-rejoin).
	peerBound  = 1
	peerShift  = 4 // the answers of the last 16 ms or more, at one a proofGap
	capRatio   = 4
	peerRedo   = 8
	peersStale = int64(10 * time.Second)
)

// add folds in an answer that took took nanoseconds and came at now.
func (a *peerAverage) add(took, now int64) {
	if now-took < a.restarted.Load() {
		return // timed before the average started over
	}
	sample := float64(max(took, 1))
	n := a.answers.Load()
	if n <= peerWarmup {
		n = a.answers.Add(1)
	}
	for {
		old := a.bits.Load()
		prev := math.Float64frombits(old)
		avg := sample
		switch {
		case old == 0:
		case n <= peerWarmup:
			avg = min(prev, sample)
		case sample > capRatio*prev:
			if a.dropped.Add(1) >= peerRedo {
				a.restart(now)
			}
			return
		default:
			avg = prev + (sample-prev)/(1<<peerShift)
		}
		if a.bits.CompareAndSwap(old, math.Float64bits(avg)) {
			a.dropped.Store(0)
			a.fedAt.Store(now)
			return
		}
	}
}

// claim reports whether a peer's call placed at now is to be timed: at
// most one in proofGap.
func (a *peerAverage) claim(now int64) bool {
	if !a.timer.claim(now) {
		return false
	}
	if a.timed.Load() < peerBound && a.timed.Add(1) == peerBound {
		a.boundFrom.Store(now + 1)
	}
	return true
}

// wantsCalls reports whether fewer than peerBound calls have been timed
// since the average started over: pickers then time the next they place
// on a peer, whatever its candidates, so that its lower bound (atLeast)
// dates from about the start of the ramps that ask for it. A ramping
// endpoint's first calls can go out at once, and without it their answers
// would be judged against a wait that began after them.
func (a *peerAverage) wantsCalls() bool { return a.timed.Load() < peerBound }

// restart starts the average over at now: its next answers are a new
// warm-up, and its next calls are timed at once.
func (a *peerAverage) restart(now int64) {
	a.restarted.Store(now)
	a.bits.Store(0)
	a.answers.Store(0)
	a.dropped.Store(0)
	a.timer.lastTimed.Store(0)
	a.boundFrom.Store(0)
	a.timed.Store(0)
}

// failed notes that a call timed at start failed, or never reached its
// server: before the first answer, the calls timed so far no longer bound
// anything (atLeast), whichever of them it was, and the count starts
// again (so timed and wantsCalls count from the later of the last restart
// and the last such failure). A call timed before the average started
// over is not its.
func (a *peerAverage) failed(start int64) {
	if start >= a.restarted.Load() && a.bits.Load() == 0 {
		a.boundFrom.Store(0)
		a.timed.Store(0)
	}
}

// atLeast is the average, or before the first answer, once peerBound
// calls are timed, the time the last of them has been waiting for its
// answer at now: a lower bound, and 0 when there is neither. When the
// fleet is slow to answer, as an overloaded one is, a ramping endpoint's
// answers come back first, and the wait alone already shows them faster.
func (a *peerAverage) atLeast(now int64) float64 {
	peers, _ := a.judged(now)
	return peers
}

// judged is atLeast, and whether it is the peers' average (they have
// answered since it last started over) rather than only their wait, both
// from one reading of the average.
func (a *peerAverage) judged(now int64) (peers float64, average bool) {
	if avg := math.Float64frombits(a.bits.Load()); avg != 0 {
		return avg, true
	}
	if from := a.boundFrom.Load() - 1; from >= 0 && now > from {
		return float64(now - from), false
	}
	return 0, false
}

// restartIfStale starts the average over if no answer has moved it, and
// it has not started over, since peersStale before now, and it holds
// anything: an average, or calls timed whose wait bounds it (atLeast),
// which without an answer would bound a later ramp's peers by how long
// ago they were placed.
func (a *peerAverage) restartIfStale(now int64) {
	since := max(a.fedAt.Load(), a.restarted.Load())
	if (a.bits.Load() != 0 || a.timed.Load() > 0) && now-since > peersStale {
		a.restart(now)
	}
}

// rampProof is one endpoint's evidence, in its current ramp, that it is
// warm: its timed successful answers' count, sum and slowest, whether a
// timed call it was sent failed (spoiled: the ramp then runs by time),
// and the verdict, which ends the ramp for pickers at once and for the
// balancer at its next publish (slowStart.end). The mean is over every
// answer of the ramp, not the last few: a cold process that answers some
// calls from a warm cache and others slowly would otherwise be proved by
// the first run of fast ones. The outcome of a call timed before the ramp
// began (since) is the last ramp's, and counts for nothing.
type rampProof struct {
	timer   proofTimer
	since   atomic.Int64 // Clock.Nanotime the ramp began
	sum     atomic.Int64 // nanoseconds
	slowest atomic.Int64 // nanoseconds
	answers atomic.Int32
	spoiled atomic.Bool
	proven  atomic.Bool
	// opened counts the ramp's opening calls (opening), up to
	// quickAnswers and a few more when picks race.
	opened atomic.Int32
	// owed counts the calls a weighted schedule lent it ahead of its
	// ramped share after its first (rampChecks.opening) that its own
	// slots have yet to repay (repay): over the ramp its share is the
	// same.
	owed atomic.Int32
	// started and settled count the ramp's timed calls placed and those
	// whose outcome came, whatever it was: relief waits for all of them
	// (relieves).
	started, settled atomic.Int32
}

// opening reports whether the ramp's opening is under way: fewer than
// quickAnswers of its calls have been timed. Its calls are all timed,
// whatever proofGap says (claim), so that those a picker places together
// give the sooner proof's answers together.
func (p *rampProof) opening() bool {
	return p.opened.Load() < quickAnswers && !p.spoiled.Load()
}

// unopened reports whether no call of the ramp has been timed, and its
// evidence is still wanted.
func (p *rampProof) unopened() bool {
	return p.timer.lastTimed.Load() == 0 && !p.spoiled.Load() && !p.proven.Load()
}

// claim reports whether a call placed on the ramping endpoint at now is
// to be timed: any of the opening's, then at most one in proofGap; none
// once the ramp is spoiled.
func (p *rampProof) claim(now int64) bool {
	if p.spoiled.Load() {
		return false
	}
	if p.opened.Load() < quickAnswers && p.opened.Add(1) <= quickAnswers {
		p.timer.lastTimed.Store(now)
		return true
	}
	return p.timer.claim(now)
}

// count counts a call placed as evidence of kind in started, if it is
// the ramping endpoint's own.
func (p *rampProof) count(kind proofKind) {
	if kind == proofOwn {
		p.started.Add(1)
	}
}

// reset starts the evidence over, for a ramp that begins at now.
func (p *rampProof) reset(now int64) {
	p.since.Store(now)
	p.timer.lastTimed.Store(0)
	// The slowest before the sum (provesWarm).
	p.slowest.Store(0)
	p.sum.Store(0)
	p.answers.Store(0)
	p.spoiled.Store(false)
	p.proven.Store(false)
	p.opened.Store(0)
	p.owed.Store(0)
	p.started.Store(0)
	p.settled.Store(0)
}

// owe counts a call a weighted schedule lent the ramping endpoint ahead
// of its share, for its own slots to repay (repay).
func (p *rampProof) owe() { p.owed.Add(1) }

// repay reports whether a slot of the ramping endpoint's own in a
// weighted schedule goes to another, to repay a call lent to it ahead of
// its share (owed), and if so counts it repaid.
func (p *rampProof) repay() bool {
	for {
		n := p.owed.Load()
		if n <= 0 {
			return false
		}
		if p.owed.CompareAndSwap(n, n-1) {
			return true
		}
	}
}

// ours reports whether a call timed at start belongs to the current ramp.
func (p *rampProof) ours(start int64) bool { return start >= p.since.Load() }

// add records an answer that took took nanoseconds, settles its call,
// and reports whether the answers so far show the endpoint warm against
// its peers, peers (provesWarm).
func (p *rampProof) add(took int64, peers float64) bool {
	took = max(took, 1)
	p.sum.Add(took)
	slowest := p.slowest.Load()
	for took > slowest && !p.slowest.CompareAndSwap(slowest, took) {
		slowest = p.slowest.Load()
	}
	// Counted after its sum and slowest are written, so that provesWarm
	// never reads them short of what the count says; settled after
	// that, so that no relief sees it settled and not yet slowest.
	p.answers.Add(1)
	p.settled.Add(1)
	return p.provesWarm(peers, true)
}

// provesWarm reports whether the answers so far show the endpoint warm
// against its peers' average or a lower bound on it, peers (0: not known
// yet; peerAverage.atLeast): quickAnswers or more, none slower than
// quickRatio times it, or proofAnswers or more whose mean is at most
// warmRatio times it, if both is set; or, either way, relief (relieves).
// An answer is judged by all three (add). A pick judges the endpoint
// again (doneShared.judge), as its peers' average moves and their wait
// grows between its answers, none of which may come to ask; against the
// wait alone, only relief, which waits for every timed call's outcome.
func (p *rampProof) provesWarm(peers float64, both bool) bool {
	if peers <= 0 || p.spoiled.Load() {
		return false
	}
	// The count first: the sum and slowest it is read with then cover at
	// least the answers it counts (add), so neither proof is too easy.
	// The sum before the slowest, which reset clears first: a slowest of
	// 0 with answers counted is a ramp that began since, and proves
	// nothing, whatever the sum read.
	n := p.answers.Load()
	sum := float64(p.sum.Load())
	slowest := float64(p.slowest.Load())
	if n == 0 || slowest == 0 {
		return false
	}
	switch {
	case !both:
	case n >= quickAnswers && slowest <= quickRatio*peers:
		return true
	case n >= proofAnswers && sum/float64(n) <= warmRatio*peers:
		return true
	}
	return p.relieves(peers)
}

// relieves reports whether the answers so far, at least one, show the
// endpoint reliefRatio times faster than its peers at least (peers, their
// average or a lower bound on it): the ramp then only adds to the load
// of a fleet that is already slower than the endpoint. Every timed call of
// the ramp must have had its outcome: one still out may be a slow one,
// which the fast answers of the calls sent with it would hide.
func (p *rampProof) relieves(peers float64) bool {
	// Settled first: an outcome counted there has its slowest or its
	// spoiling written already (add, doneShared.answer), and started is
	// read after, so no relief passes on a settled call's old figures.
	settled := p.settled.Load()
	slowest := p.slowest.Load()
	return slowest != 0 && !p.spoiled.Load() && float64(slowest)*reliefRatio <= peers &&
		settled >= p.started.Load()
}
