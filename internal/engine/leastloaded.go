package engine

import (
	"math"
	"math/rand/v2"
	"slices"

	"github.com/pickwise/pickwise/internal/ewma"
	"github.com/pickwise/pickwise/internal/ramp"
	"google.golang.org/grpc/balancer"
)

// LoadMetric is a policy's measure of how busy an endpoint is, before the
// engine divides by weight and applies slow start's share and the failure
// check. It is read on every pick from many goroutines: it must be
// lock-free and must not allocate.
type LoadMetric interface {
	Load(r *Ready) float64
}

// InFlight is the least-request metric, in-flight + 1. A LeastLoaded picker
// given it reads the counter directly instead of through the interface: it
// is the metric of the cheapest policy, where an indirect call per
// candidate is a measurable share of a pick.
type InFlight struct{}

// Load returns r's in-flight count + 1.
func (InFlight) Load(r *Ready) float64 { return float64(r.Stats.inFlight() + 1) }

// ByWeight is the metric of a picker that places by weight alone, as
// Envoy's least request does with active_request_bias 0. Its costs all
// tie, and a LeastLoaded picker given it draws each pick's candidates in
// proportion to weight, so that the weights set the shares (1:3 gives 25%
// and 75%), while slow start and the failure check can still pass the
// first over for the others. While every weight is equal, there is
// nothing to place by and the picker compares in-flight counts (InFlight),
// as Envoy does.
type ByWeight struct{}

// Load returns 1: in-flight counts play no part.
func (ByWeight) Load(*Ready) float64 { return 1 }

// metricKind tells LeastLoaded which of the engine's metrics it was given,
// so that it can compute them inline.
type metricKind uint8

const (
	otherMetric    metricKind = iota // call LoadMetric.Load
	inFlightMetric                   // InFlight
	peakMetric                       // PeakEWMA with latency tracking on: timed picks
	weightMetric                     // ByWeight: first candidates drawn by weight, costs equal
)

// LeastLoaded is the engine's d-choice picker: it takes choices distinct
// READY endpoints, the others uniformly at random and the first either so
// or, while most endpoints are busy with this client's calls, in
// round-robin turn (see turns), and sends the RPC to the one with the
// lowest
//
//	cost = metric.Load(r) / weight(r)
//
// among the candidates that pass slow start and the failure check. An
// endpoint in its slow-start ramp that has taken its ramped share of the
// picker's picks is passed over (ramp.Shares); its cost is not divided by
// the ramp, which among idle candidates gave it nothing until the ramp
// ended, and against long-lived calls every comparison it entered. Each
// candidate with recent server-side failures is passed over with its
// avoidance probability (FailurePenaltyConfig), and if every one is
// passed over, the one with the lowest cost / (1 - avoidance) wins; a
// ramping candidate over its share is preferred to those. Ties go to the
// first candidate. With d = 2 this is the power of two choices
// (Mitzenmacher): the maximum load drops from O(log n / log log n) to
// O(log log n) while each pick reads two counters, not n. Under ByWeight,
// while the weights differ, the candidates are drawn in proportion to
// weight (sampleByWeight), never in turn, and every cost is the same: the
// first takes the call unless slow start or the failure check pass it
// over. With equal weights ByWeight is InFlight.
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
	// What picks may skip: ramping is false while no endpoint of the
	// snapshot is in its slow-start ramp, uniform true when their weights
	// are equal, penalty false when the failure penalty is off.
	ramping, uniform, penalty bool
	// proving is set while ramping if ramps end on evidence: the picks
	// that draw a ramping endpoint time some answers (ramp.Proof), and so
	// do pairs of its peers while their calls are wanted
	// (ramp.Peers.WantsCalls).
	proving bool
	shares  *ramp.Shares // while ramping: each ramping endpoint's picks, held to its ramped share
	system  bool         // snap.Rand is SystemRand: drawn from without the interface
	pair    bool         // Pick's written-out common case applies (see Pick)
	// unserved is the snapshot's: picks mark the channel's first call.
	unserved bool
	// byWeight is set under ByWeight while the weights differ:
	// candidates are drawn through alias.
	byWeight bool
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
			// Equal weights leave nothing to place by: calls go by
			// load, as Envoy's least request places them whatever its
			// active_request_bias.
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

// pairOf is the pair of candidates for a pick, from one draw, and the
// draw's spare coin: the first in turn or at random, as turns says.
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

// sampleByWeight writes d distinct candidates into out after out[0], the
// first, drawn already, and returns out[:d], d <= len(p.cands), each
// drawn in proportion to weight among those not yet taken: the first wins unless slow start or the failure
// check pass it over, and then the call goes where the weights would
// send it without that endpoint. A draw that meets a taken candidate
// draws again, up to retryDraws times; past that (one endpoint holding
// most of the weight) the next endpoint not taken after the last draw is
// taken.
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

// Pick implements balancer.Picker. The common case is written out here:
// two choices among more than two endpoints, none ejected, and no attempt
// record (p.pair), under the in-flight metric (below) or Peak EWMA
// (pickPairTimed). It takes one draw and reads the two candidates' lines,
// and, when neither has recent failures nor is in its slow-start ramp,
// compares their loads, deciding as choose would
// (TestPairPathMatchesChoose; for Peak EWMA up to ewma.Pair's rounding);
// a pair with either goes to choose, as does any pair while slow start's
// evidence wants a peer's call timed (rampingPair), and everything else
// is pickAny's.
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
		// A candidate has recent failures, or is in its slow-start
		// ramp: the checks decide.
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

// pickPairTimed is Pick's common case under Peak EWMA: choose for two
// candidates, without its bookkeeping, comparing their loads as ewma.Pair
// does so that the clock is read only once the call is placed.
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
	// Which candidate wins is as random as the draw, and so is a close
	// call's toss: taken by branches, the two missed half the time each,
	// 4-12% of a pick's time from one goroutine. They are selections
	// instead.
	// Costs are never negative, so their bits order as they do
	// (IEEE 754), and the smaller is taken by an integer select.
	bc, bd := math.Float64bits(kc), math.Float64bits(kd)
	dCheaper := bd < bc
	lo, hi := bc, bd
	if dCheaper {
		lo, hi = bd, bc
	}
	loCost, hiCost := math.Float64frombits(lo), math.Float64frombits(hi)
	// A close call: both idle and within closeBand of each other. A tie
	// is none: it goes to the first candidate.
	near := bc != bd && !busyC && !busyD && hiCost < closeBand*loCost
	if near && coin == 0 {
		coin = uint32(p.draw())
	}
	upset := closeCall(loCost, hiCost, coin) // whether the costlier wins, if close
	// Selected by arithmetic on the indices: the compiler takes a
	// branch to select between values it holds in memory.
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

// pickAny is Pick in every case, for a call with attempt record a (nil:
// none).
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
			// Every cost ties, and only slow start or the failure check
			// could pass the first over: with neither, it takes the call
			// as choose would give it, and the others are not drawn.
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
		// Every endpoint is a candidate; the first, which ties favour,
		// goes round or is drawn.
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

// retryDraws bounds the fresh draws that replace one candidate an earlier
// attempt used before unusedEndpoint walks the list: with at most four
// earlier attempts, eight draws find another endpoint unless nearly every
// one was used, which only a small fleet allows.
const retryDraws = 8

// avoidEarlier replaces the candidates that earlier attempts of the call
// used with fresh draws, and drops those it could not replace (every
// endpoint is a candidate, or every unused one already is), as long as
// another candidate remains: a used candidate kept would win any tie.
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

// unusedEndpoint finds an endpoint that is not among cands and that no
// earlier attempt used: by random draws (by weight under ByWeight, where
// the replacement may be the first candidate), then, if most endpoints
// were used (a small fleet), by a walk from a random start.
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

// placeChosen places the call on cands[best], which choose picked at now
// (0 if it did not read the clock), counting it in its ramp's share, and
// timing it if its answer is wanted as evidence for a ramp (ramp.Proof): a
// ramping endpoint's answer, for its own, or that of one of its peers,
// for theirs.
func (p *LeastLoaded) placeChosen(cands []int, best int, info balancer.PickInfo, why PickReason, now int64) (balancer.PickResult, error) {
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
	return withDone(res, c.Stats.done), nil
}

// choose returns the index of the cheapest candidate that passes the
// failure check and is not over its slow-start share (among those over
// their share if every candidate that passed is), its cost, why it won,
// and the clock reading now, taken if a candidate needed it and not taken
// before; coin, if not 0, is spare randomness for a close call (pairFrom,
// pairAfter). The cost is rawCost's, computed here, inline: rawCost is too
// large to inline, and a call per candidate is a measurable share of a
// pick.
func (p *LeastLoaded) choose(cands []int, now int64, coin uint32) (best int, bestCost float64, why PickReason, _ int64) {
	s := p.snap
	// The candidate that would have won without the failure check: when it
	// is not best, the check steered this call away from a failing
	// endpoint.
	rawBest, rawBestCost := -1, 0.0
	// The best of the candidates passed over, by expected cost, in case
	// every one is.
	avoided, avoidedCost := -1, 0.0
	// passed ranks the candidates that passed the failure check and are
	// not over their slow-start share (ramp.Shares); capped, those that
	// passed it but are over their share, in case every one that passed
	// is. idle says whether every candidate but those over their share is
	// idle, for latency costs (see closeBand); idleAll, whether every one
	// is.
	passed, capped := newRanking(), newRanking()
	idle, idleAll := true, true
	for k, i := range cands {
		c := &p.cands[i]
		inv := c.InvWeight
		full := false
		if p.rampingAt(i) {
			// Only a ramping candidate needs the time; a timed pick has
			// read the clock already.
			if now == 0 {
				now = s.Clock.Nanotime()
			}
			// A ramp that its answers against its peers' average or
			// wait end (ramp.Proof.ProvesWarm) is over from this pick on.
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
			// A candidate over its ramp's share would not have won
			// without the failure check either.
			if rawBest < 0 || cost < rawBestCost {
				rawBest, rawBestCost = i, cost
			}
			idle = idle && !busy
		}
		if p.penalty && c.Stats.outcomeBits.Load()>>32 != 0 {
			// Only an endpoint with recent failures draws: the healthy
			// common case reads one word.
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
	// Ramping endpoints over their share that passed the failure check
	// are a better fallback than those passed over for their failures:
	// every candidate is over its share when most of the fleet ramps, as
	// it does after the client lost every connection at once, and the
	// pick then goes among them as if none ramped.
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

// closeBand is the cost ratio below which a comparison of two idle
// candidates' latencies is a close call rather than a verdict. A latency
// average is peak-sensitive: one slow answer (a pause, a scheduler
// hiccup) raises it at once, and it comes back down only over the decay
// time, so among idle backends of equal speed the one whose last peak was
// lowest would win every comparison for seconds, and a caller at low
// concurrency would pile onto it. Below three times the cost, the
// costlier idle candidate keeps a chance that falls linearly from one
// half at equal cost to none at the band's edge; a backend three times as
// slow still loses every time, and so does any busier candidate: with
// calls in flight the comparison is strict, as Finagle's is.
const closeBand = 3.0

// closeCall reports whether the runner-up of a latency comparison, at
// cost second (below closeBand*best) against the winner's best, wins this
// pick as a close call, tossing coin (24 uniform bits at the top). Its
// chance, 0.5 * (closeBand - second/best) / (closeBand - 1), is compared
// without a division.
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
