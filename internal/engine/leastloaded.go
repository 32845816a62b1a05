package engine

import (
	"math"
	"math/rand/v2"
	"slices"

	"github.com/pickwise/pickwise/internal/ewma"
	"github.com/pickwise/pickwise/internal/ramp"
	"google.golang.org/grpc/balancer"
)

// LoadMetric is a policy's measure of how busy an endpoint is, before
// weight, slow start and the failure check. It is read on every pick from
// many goroutines: it must be lock-free and must not allocate.
type LoadMetric interface {
	Load(r *Ready) float64
}

// InFlight is the least-request metric, in-flight + 1, which LeastLoaded
// reads directly rather than through the interface.
type InFlight struct{}

// Load returns r's in-flight count + 1.
func (InFlight) Load(r *Ready) float64 { return float64(r.Stats.inFlight() + 1) }

// ByWeight places by weight alone, as Envoy's least request does with
// active_request_bias 0: candidates are drawn in proportion to weight and
// their costs tie. With equal weights it is InFlight.
// docs/design/p2c-bias-zero.md has why.
type ByWeight struct{}

// Load returns 1: in-flight counts play no part.
func (ByWeight) Load(*Ready) float64 { return 1 }

// metricKind is which of the engine's metrics LeastLoaded computes inline.
type metricKind uint8

const (
	otherMetric    metricKind = iota // call LoadMetric.Load
	inFlightMetric                   // InFlight
	peakMetric                       // PeakEWMA with latency tracking on: timed picks
	weightMetric                     // ByWeight: first candidates drawn by weight, costs equal
)

// LeastLoaded is the engine's d-choice picker (with d = 2, the power of
// two choices): it draws choices distinct READY endpoints, the first in
// round-robin turn while most are busy (turns), and sends the RPC to the
// one with the lowest metric.Load(r) / weight(r) among those that pass
// slow start's share (ramp.Shares) and the failure check. Ties go to the
// first candidate. docs/design/least-loaded.md has the rules and why.
type LeastLoaded struct {
	// Immutable after construction.
	snap    *Snapshot
	cands   []Ready // snap.Endpoints itself, here to save the pick a load through snap
	turns   *turns  // how first candidates are chosen; shared with the balancer's other pickers
	magic   uint64  // modMagic(len(cands)), for turns.take
	choices int
	metric  LoadMetric
	kind    metricKind
	timed   bool  // kind is peakMetric: time the calls that need a sample (recentClock says when to read the clock)
	gap     int64 // if timed, the least time between timed calls to one endpoint (latency.sampleGap)
	// What picks may skip: ramping is false while no endpoint ramps,
	// uniform true when the weights are equal, penalty false when off.
	ramping, uniform, penalty bool
	// proving: ramping, and ramps end on evidence (ramp.Proof).
	proving  bool
	shares   *ramp.Shares // while ramping: each ramping endpoint's picks, held to its ramped share
	system   bool         // snap.Rand is SystemRand: drawn from without the interface
	pair     bool         // Pick's written-out common case applies (see Pick)
	unserved bool         // the snapshot's: picks mark the channel's first call
	byWeight bool         // under ByWeight while the weights differ: drawn through alias
	loadDone bool         // calls end with the endpoint's Prequal Done (reportedLoad.done)
	// fixedWhy counts every pick for why, whatever decided it: Prequal's
	// fallback counts its picks as ReasonNoAnswers.
	fixedWhy bool
	why      PickReason
	alias    aliasTable
}

// NewLeastLoaded returns a LeastLoaded picker over snap. choices is clamped
// to [2, MaxChoices].
func NewLeastLoaded(snap *Snapshot, choices int, metric LoadMetric) *LeastLoaded {
	kind := otherMetric
	switch metric.(type) {
	case InFlight:
		kind = inFlightMetric
	case PeakEWMA:
		if snap.latency != nil {
			kind = peakMetric
		}
	case ByWeight:
		kind = weightMetric
	}
	p := &LeastLoaded{
		snap:     snap,
		cands:    snap.Endpoints,
		choices:  min(max(choices, 2), MaxChoices),
		metric:   metric,
		kind:     kind,
		timed:    kind == peakMetric,
		uniform:  true,
		penalty:  snap.penalty != nil,
		unserved: snap.unserved,
	}
	if p.timed {
		p.gap = snap.latency.sampleGap(len(p.cands))
	}
	_, p.system = snap.Rand.(SystemRand)
	p.turns, p.magic = snap.turns, modMagic(max(len(p.cands), 1))
	if p.turns == nil {
		p.turns = newTurns()
	}
	p.ramping = snap.Ramping()
	for i := range snap.Endpoints {
		p.uniform = p.uniform && snap.Endpoints[i].InvWeight == snap.Endpoints[0].InvWeight
	}
	if kind == weightMetric {
		if p.uniform {
			// Nothing to place by: calls go by load, as Envoy's do.
			p.kind, p.metric = inFlightMetric, InFlight{}
		} else {
			p.byWeight = true
			p.alias = newAliasTable(len(p.cands), func(i int) float64 { return 1 / p.cands[i].InvWeight })
		}
	}
	if p.ramping {
		total := 0.0
		for i := range snap.Endpoints {
			total += 1 / snap.Endpoints[i].InvWeight
		}
		p.shares = ramp.NewShares(total, len(p.cands), p.choices, p.byWeight)
		p.proving = snap.provesRamps()
	}
	p.pair = (p.kind == inFlightMetric || p.kind == peakMetric) && p.choices == 2 && len(p.cands) > 2 && len(snap.Ejected) == 0
	return p
}

// draw is one 64-bit draw from the snapshot's Rand.
func (p *LeastLoaded) draw() uint64 {
	if p.system {
		return rand.Uint64()
	}
	return p.snap.Rand.Uint64()
}

// pairOf is a pick's pair of candidates from one draw, and its spare coin.
func (p *LeastLoaded) pairOf(bits uint64) (i, j int, coin uint32) {
	if p.turns.inTurn() {
		return pairAfter(p.turns.take(len(p.cands), p.magic), bits, len(p.cands))
	}
	return pairFrom(bits, len(p.cands))
}

// first is the first of more than two candidates: in turn or at random.
func (p *LeastLoaded) first() int {
	if p.turns.inTurn() {
		return p.turns.take(len(p.cands), p.magic)
	}
	return reduce(uint32(p.draw()), len(p.cands))
}

// drawByWeight is an endpoint drawn in proportion to its weight.
func (p *LeastLoaded) drawByWeight() int { return p.alias.draw(p.draw()) }

// sampleByWeight writes d distinct candidates into out after out[0], drawn
// already, each in proportion to weight among those not yet taken, and
// returns out[:d]. A draw that meets a taken one draws again, up to
// retryDraws times, then takes the next endpoint not taken.
func (p *LeastLoaded) sampleByWeight(d int, out *[MaxChoices]int) []int {
	n := len(p.cands)
	for k := 1; k < d; k++ {
		j := p.drawByWeight()
		for tries := 1; slices.Contains(out[:k], j); tries++ {
			if tries < retryDraws {
				j = p.drawByWeight()
			} else {
				j = (j + 1) % n
			}
		}
		out[k] = j
	}
	return out[:d]
}

// Pick implements balancer.Picker. The common case, two choices among
// more than two endpoints, none ejected, no attempt record (p.pair), is
// written out here (Peak EWMA's in pickPairTimed) and decides as choose
// would (TestPairPathMatchesChoose); a pair that slow start or the failure
// check concerns goes to choose, everything else to pickAny.
func (p *LeastLoaded) Pick(info balancer.PickInfo) (balancer.PickResult, error) {
	if p.unserved {
		p.snap.notePlaced()
	}
	a := AttemptsOf(info)
	if !p.pair || a != nil {
		return p.pickAny(info, a)
	}
	if p.timed {
		return p.pickPairTimed(info)
	}
	var bits uint64 // draw, written out: it is too large to inline
	if p.system {
		bits = rand.Uint64()
	} else {
		bits = p.snap.Rand.Uint64()
	}
	i, j, coin := p.pairOf(bits)
	c, d := &p.cands[i], &p.cands[j]
	lc, ld := c.Stats.inFlight(), d.Stats.inFlight()
	p.turns.observe(ld != 0, coin)
	if p.penalty && (c.Stats.outcomeBits.Load()|d.Stats.outcomeBits.Load())>>32 != 0 || p.rampingPair(i, j) {
		// Recent failures, or slow start: the checks decide.
		cands := []int{i, j}
		best, _, why, now := p.choose(cands, 0, coin)
		return p.placeChosen(cands, best, info, why, now)
	}
	why := ReasonTie
	if p.uniform {
		switch {
		case ld < lc:
			c, why = d, ReasonLeastLoaded
		case ld > lc:
			why = ReasonLeastLoaded
		}
	} else {
		switch cc, cd := float64(lc+1)*c.InvWeight, float64(ld+1)*d.InvWeight; {
		case cd < cc:
			c, why = d, ReasonLeastLoaded
		case cd > cc:
			why = ReasonLeastLoaded
		}
	}
	res, ok := c.Stats.readyResult()
	if !ok {
		var err error
		if res, err = c.Stats.askChild(info); err != nil {
			return res, err
		}
	}
	c.Stats.started(why)
	return withDone(res, c.Stats.done), nil
}

// pickPairTimed is Pick's common case under Peak EWMA, comparing as
// ewma.Pair does so that the clock is read only once the call is placed.
func (p *LeastLoaded) pickPairTimed(info balancer.PickInfo) (balancer.PickResult, error) {
	s := p.snap
	i, j, coin := p.pairOf(p.draw())
	c, d := &p.cands[i], &p.cands[j]
	p.turns.observe(d.Stats.inFlight() != 0, coin)
	winner := lotteryWinner(coin) // before a close call may draw coin anew
	if p.penalty && (c.Stats.outcomeBits.Load()|d.Stats.outcomeBits.Load())>>32 != 0 || p.rampingPair(i, j) {
		cands := []int{i, j}
		best, _, why, now := p.choose(cands, s.Clock.Nanotime(), coin)
		return p.placeChosen(cands, best, info, why, now)
	}
	kc, kd, busyC, busyD := ewma.Pair(c.Stats.peakState(), d.Stats.peakState(), s.latency.perNano)
	kc, kd = kc*c.InvWeight, kd*d.InvWeight
	// Selections, not branches: the winner is as random as the draw.
	// Costs are never negative, so their bits order as they do.
	bc, bd := math.Float64bits(kc), math.Float64bits(kd)
	dCheaper := bd < bc
	lo, hi := bc, bd
	if dCheaper {
		lo, hi = bd, bc
	}
	loCost, hiCost := math.Float64frombits(lo), math.Float64frombits(hi)
	// A close call: both idle and within closeBand; a tie is none.
	near := bc != bd && !busyC && !busyD && hiCost < closeBand*loCost
	if near && coin == 0 {
		coin = uint32(p.draw())
	}
	upset := closeCall(loCost, hiCost, coin) // whether the costlier wins, if close
	// Arithmetic on the indices: values in memory would take a branch.
	w := &p.cands[i+(j-i)*oneIf(dCheaper != (near && upset))]
	why := ReasonLeastLoaded
	if bc == bd {
		why = ReasonTie
	}
	res, ok := w.Stats.readyResult()
	if !ok {
		var err error
		if res, err = w.Stats.askChild(info); err != nil {
			return res, err
		}
	}
	if clk := &p.turns.clock; w.Stats.mayWantSample(clk, p.gap, winner) {
		now := s.Clock.Nanotime()
		clk.note(now, winner)
		if w.Stats.wantsSample(now, p.gap) {
			return startTimed(w.Stats, res, s.sharedOf(w.Stats), why, now, s.Clock, s.latency), nil
		}
	}
	w.Stats.started(why)
	return withDone(res, w.Stats.done), nil
}

// pickAny is Pick in every case, for a call with attempt record a (or nil).
func (p *LeastLoaded) pickAny(info balancer.PickInfo, a *Attempts) (balancer.PickResult, error) {
	n := len(p.cands)
	var now int64 // Clock.Nanotime; 0 until someone needs it
	if p.timed {
		now = p.snap.Clock.Nanotime()
		p.turns.clock.note(now, false)
	}
	if n == 1 {
		if len(p.snap.Ejected) > 0 {
			if res, err, ok := p.snap.Probe(info, a, 0); ok {
				return res, err
			}
		}
		res, err := p.place(&p.cands[0], info, ReasonOnlyReady, now)
		if a != nil {
			return a.Record(p.cands[0].Stats, res, err)
		}
		return res, err
	}
	var idx [MaxChoices]int
	var cands []int
	var coin uint32 // spare randomness of the pair's draw, 0 if none
	switch {
	case p.byWeight:
		first := p.drawByWeight()
		if !p.ramping && len(p.snap.Ejected) == 0 && (a == nil || !a.earlier()) &&
			(!p.penalty || p.cands[first].Stats.outcomeBits.Load()>>32 == 0) {
			// Costs tie and nothing can pass the first over: it takes the call.
			res, err := p.place(&p.cands[first], info, ReasonTie, now)
			if a != nil {
				return a.Record(p.cands[first].Stats, res, err)
			}
			return res, err
		}
		idx[0] = first
		cands = p.sampleByWeight(min(p.choices, n), &idx)
		if len(p.snap.Ejected) > 0 {
			coin = uint32(p.draw()) // for Probe, below
		}
	case n <= p.choices:
		// Every endpoint is a candidate; the first goes round or is drawn.
		start := p.first()
		for k := 0; k < n; k++ {
			idx[k] = (start + k) % n
		}
		cands = idx[:n]
	case p.choices == 2:
		idx[0], idx[1], coin = p.pairOf(p.draw())
		p.turns.observe(p.cands[idx[1]].Stats.inFlight() != 0, coin)
		cands = idx[:2]
	default:
		cands = sampleDistinct(p.snap.Rand, n, p.choices, p.first(), &idx)
	}
	if len(p.snap.Ejected) > 0 {
		// After the draw, whose spare bits gate the look at the clock.
		if res, err, ok := p.snap.Probe(info, a, coin); ok {
			return res, err
		}
	}
	if a != nil && a.earlier() {
		cands = p.avoidEarlier(cands, a)
	}
	best, _, why, now := p.choose(cands, now, coin)
	res, err := p.placeChosen(cands, best, info, why, now)
	if a != nil {
		return a.Record(p.cands[best].Stats, res, err)
	}
	return res, err
}

// retryDraws bounds the fresh draws for a candidate before unusedEndpoint
// walks the list: enough unless nearly every endpoint was used.
const retryDraws = 8

// avoidEarlier replaces the candidates earlier attempts used with fresh
// draws, and drops those it could not replace while another remains: a
// used candidate kept would win any tie.
func (p *LeastLoaded) avoidEarlier(cands []int, a *Attempts) []int {
	if len(cands) < len(p.cands) {
		for k, i := range cands {
			if a.Used(p.cands[i].Stats) {
				if j, ok := p.unusedEndpoint(cands, a); ok {
					cands[k] = j
				}
			}
		}
	}
	kept := cands[:0:len(cands)]
	for _, i := range cands {
		if !a.Used(p.cands[i].Stats) {
			kept = append(kept, i)
		}
	}
	if len(kept) == 0 {
		return cands
	}
	return kept
}

// unusedEndpoint finds an endpoint not among cands that no earlier attempt
// used: by random draws (by weight under ByWeight), then by a walk.
func (p *LeastLoaded) unusedEndpoint(cands []int, a *Attempts) (int, bool) {
	n := len(p.cands)
	usable := func(j int) bool { return !a.Used(p.cands[j].Stats) && !slices.Contains(cands, j) }
	for d := 0; d < retryDraws; d++ {
		var j int
		if p.byWeight {
			j = p.drawByWeight()
		} else {
			j = reduce(uint32(p.draw()), n)
		}
		if usable(j) {
			return j, true
		}
	}
	start := reduce(uint32(p.draw()), n)
	for k := 0; k < n; k++ {
		if j := (start + k) % n; usable(j) {
			return j, true
		}
	}
	return 0, false
}

// placeChosen places the call on cands[best], chosen at now (0: clock not
// read), counting it in its ramp's share and timing it if slow start's
// evidence wants its answer (proofFor).
func (p *LeastLoaded) placeChosen(cands []int, best int, info balancer.PickInfo, why PickReason, now int64) (balancer.PickResult, error) {
	if p.fixedWhy {
		why = p.why
	}
	p.countRamping(best)
	if p.proving {
		var proof ramp.Kind
		if proof, now = p.proofFor(cands, best, now); proof != ramp.None {
			var lat *latency
			if p.timed {
				lat = p.snap.latency
			}
			e := p.cands[best].Stats
			return pickTimed(e, p.snap.sharedOf(e), info, why, now, p.snap.Clock, lat, proof)
		}
	}
	return p.place(&p.cands[best], info, why, now)
}

// place asks c's child for a connection with the reason why, timing the
// call if the policy is latency-aware and the endpoint wants a sample.
func (p *LeastLoaded) place(c *Ready, info balancer.PickInfo, why PickReason, now int64) (balancer.PickResult, error) {
	if p.fixedWhy {
		why = p.why
	}
	if p.timed && c.Stats.wantsSample(now, p.gap) {
		return pickTimed(c.Stats, p.snap.sharedOf(c.Stats), info, why, now, p.snap.Clock, p.snap.latency, ramp.None)
	}
	res, ok := c.Stats.readyResult()
	if !ok {
		var err error
		if res, err = c.Stats.askChild(info); err != nil {
			return res, err
		}
	}
	c.Stats.started(why)
	if p.loadDone {
		return withDone(res, c.Stats.load.done), nil
	}
	return withDone(res, c.Stats.done), nil
}

// choose returns the cheapest candidate that passes the failure check and
// is not over its slow-start share (or, if every one that passed is, the
// cheapest of those), its cost, why it won, and the clock reading now,
// taken if needed; coin, if not 0, is spare randomness for a close call.
// The cost is rawCost's, inline: a call per candidate costs too much.
func (p *LeastLoaded) choose(cands []int, now int64, coin uint32) (best int, bestCost float64, why PickReason, _ int64) {
	s := p.snap
	rawBest, rawBestCost := -1, 0.0 // the winner without the failure check
	avoided, avoidedCost := -1, 0.0 // the best passed over, by expected cost
	// passed ranks those that pass both checks; capped, those over their
	// share. idle: all but those over their share are idle; idleAll: all.
	passed, capped := newRanking(), newRanking()
	idle, idleAll := true, true
	for k, i := range cands {
		c := &p.cands[i]
		inv := c.InvWeight
		full := false
		if p.rampingAt(i) {
			// Only a ramping candidate needs the time.
			if now == 0 {
				now = s.Clock.Nanotime()
			}
			// A ramp its answers have proved is over from this pick on.
			if !p.proving || !s.sharedOf(c.Stats).judge(c.Stats, now) {
				opening := p.proving && c.Stats.rampProof.Opening()
				full = p.shares.DrawnFull(&c.Stats.rampShare, 1/inv, s.RampFactor(i, now), k == 0, opening, now-s.ramps[i].start)
			}
		}
		var cost float64
		busy := false
		switch p.kind {
		case inFlightMetric:
			cost = float64(c.Stats.inFlight()+1) * inv
		case peakMetric:
			cost, busy = c.Stats.peakLoad(now, s.latency)
			cost *= inv
		case weightMetric:
			// The weights are in the draw: every cost ties.
			cost = 1
		default:
			cost = p.metric.Load(&s.Endpoints[i]) * inv
		}
		idleAll = idleAll && !busy
		if !full {
			// One over its share would not have won without the check either.
			if rawBest < 0 || cost < rawBestCost {
				rawBest, rawBestCost = i, cost
			}
			idle = idle && !busy
		}
		if p.penalty && c.Stats.outcomeBits.Load()>>32 != 0 {
			// Only recent failures draw: the healthy case reads one word.
			if q := s.penalty.avoidance(c.Stats.outcomes(), s.fleetRate()); q > 0 && unitDraw(s.Rand) < q {
				if c := cost / (1 - q); avoided < 0 || c < avoidedCost {
					avoided, avoidedCost = i, c
				}
				continue
			}
		}
		if full {
			capped.add(i, cost)
		} else {
			passed.add(i, cost)
		}
	}
	// Those over their share beat those avoided for failures: when most
	// of the fleet ramps, the pick goes among them as if none ramped.
	r, tie := passed, avoided < 0 && capped.best < 0
	if passed.best < 0 && capped.best >= 0 {
		r, tie, idle = capped, avoided < 0, idleAll
		if rawBest < 0 || capped.bestCost <= rawBestCost {
			// No candidate the failure check passed over was cheaper.
			rawBest = capped.best
		}
	}
	best, bestCost = r.best, r.bestCost
	if best < 0 {
		best, bestCost = avoided, avoidedCost
	}
	why = ReasonLeastLoaded
	switch {
	case rawBest != best:
		why = ReasonAvoidedFailing
	case tie && !r.differ:
		why = ReasonTie
	}
	if why != ReasonAvoidedFailing && p.kind == peakMetric && idle && r.second >= 0 && r.secondCost < closeBand*bestCost {
		if coin == 0 {
			coin = uint32(s.Rand.Uint64())
		}
		if closeCall(bestCost, r.secondCost, coin) {
			// A close call is still a decision by load.
			best, bestCost, why = r.second, r.secondCost, ReasonLeastLoaded
		}
	}
	return best, bestCost, why, now
}

// ranking is the cheapest and the runner-up of the candidates added to
// it, and whether their costs differ.
type ranking struct {
	best, second         int
	bestCost, secondCost float64
	differ               bool
}

func newRanking() ranking { return ranking{best: -1, second: -1} }

// add ranks candidate i at cost: a tie goes to the one added first.
func (r *ranking) add(i int, cost float64) {
	switch {
	case r.best < 0:
		r.best, r.bestCost = i, cost
	case cost < r.bestCost:
		r.second, r.secondCost = r.best, r.bestCost
		r.best, r.bestCost, r.differ = i, cost, true
	case cost > r.bestCost:
		r.differ = true
		if r.second < 0 || cost < r.secondCost {
			r.second, r.secondCost = i, cost
		}
	}
}

// oneIf is 1 if b, 0 if not, without a branch (a flag set and widened).
func oneIf(b bool) int {
	if b {
		return 1
	}
	return 0
}

// closeBand is the cost ratio below which comparing two idle candidates'
// latencies is a close call: the costlier keeps a chance falling from one
// half at equal cost to none at the band's edge, so that one low peak
// does not win every comparison for seconds. Busy candidates compare
// strictly, as Finagle's do.
const closeBand = 3.0

// closeCall reports whether the runner-up at cost second wins a close
// call against best, tossing coin (24 uniform bits at the top), with chance
// 0.5 * (closeBand - second/best) / (closeBand - 1), without a division.
func closeCall(best, second float64, coin uint32) bool {
	return float64(coin>>8)*(2*(closeBand-1))*best < (closeBand*best-second)*(1<<24)
}

// rawCost is Endpoints[i]'s cost at now before the failure check, as
// choose computes it inline.
func (p *LeastLoaded) rawCost(i int, now int64) float64 {
	s := p.snap
	r := &s.Endpoints[i]
	inv := r.InvWeight
	switch p.kind {
	case inFlightMetric:
		return float64(r.Stats.inFlight()+1) * inv
	case peakMetric:
		return r.Stats.PeakLoad(now, s.latency) * inv
	case weightMetric:
		return 1
	}
	return p.metric.Load(r) * inv
}

// unitDraw is a uniform draw in [0, 1).
func unitDraw(r Rand) float64 { return float64(r.Uint64()>>11) / (1 << 53) }

// ReportCosts implements CostReporter: each endpoint's expected cost now,
// its cost divided by the share of picks it passes the failure check.
func (p *LeastLoaded) ReportCosts(now int64, record func(float64)) {
	s := p.snap
	for i := range s.Endpoints {
		record(p.rawCost(i, now) / (1 - s.Avoidance(s.Endpoints[i].Stats)))
	}
}

// Snapshot is what the picker was built from, for tests and tools.
func (p *LeastLoaded) Snapshot() *Snapshot { return p.snap }
