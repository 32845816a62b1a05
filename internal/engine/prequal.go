package engine

import (
	"math"

	"google.golang.org/grpc/balancer"
)

// Prequal is pickwise_prequal's picker: Prequal's hot-cold rule over the
// pool of recent answers (loadPool). An answer whose RIF, moved by this
// client's own calls since, is above the pool's hot line is hot; the pick
// goes to the cold answer with the lowest latency, or, when all are hot,
// to the lowest RIF. The best two by that rule then meet the engine's
// checks as a d-choice pair does (LeastLoaded.choose: failure evidence,
// slow start's share), with their rank as the cost. With fewer than two
// usable answers the pick is the d-choice pick over in-flight counts, as
// pickwise_p2c's, and asks for a probe. docs/design/prequal.md has why.
type Prequal struct {
	// Immutable after construction.
	ll       *LeastLoaded // the checks of the final pair
	fallback *LeastLoaded // over in-flight counts, when the pool is short
	cands    []Ready
	probes   *loadProbes
	set      *loadSettings
}

// NewPrequal builds a Prequal picker over snap, whose balancer probes
// (Settings.LoadProbing). Without probing it is the d-choice picker over
// in-flight counts.
func NewPrequal(snap *Snapshot, choices int) balancer.Picker {
	lp := snap.loadProbes
	var set *loadSettings
	if lp != nil {
		set = lp.settings.Load()
	}
	if set == nil {
		return NewLeastLoaded(snap, choices, InFlight{})
	}
	lp.use(snap.Endpoints)
	p := &Prequal{cands: snap.Endpoints, probes: lp, set: set}
	p.ll = NewLeastLoaded(snap, choices, hotCold{p})
	p.fallback = NewLeastLoaded(snap, choices, InFlight{})
	for _, ll := range []*LeastLoaded{p.ll, p.fallback} {
		// Every call's Done folds in its report (loadProbes.newDone).
		ll.pair, ll.loadDone = false, true
	}
	p.fallback.fixedWhy, p.fallback.why = true, ReasonNoAnswers
	return p
}

// ranked is a pool answer as the hot-cold rule ranks it, lowest first:
// key orders hot after cold, cold ones by latency then RIF, hot ones by
// RIF. Non-negative float32s order as their bits do, so the key is one
// integer.
type ranked struct {
	e   *Endpoint
	i   int // index in cands; -1 for none
	key uint64
}

var unranked = ranked{i: -1, key: math.MaxUint64}

// hotKey marks a hot answer's key.
const hotKey = 1 << 63

// reason is why a pick of r was made.
func (r ranked) reason() PickReason {
	if r.key&hotKey != 0 {
		return ReasonHot
	}
	return ReasonCold
}

// rank is the key of e's answer against the hot line.
func rank(e *Endpoint, hot uint32) uint64 {
	w := e.answer.Load()
	rif := min(movedRIF(uint32(w>>48), uint32(w>>32), e.inflight.Load()), math.MaxUint16)
	if rif > int64(hot) {
		return hotKey | uint64(rif)
	}
	return uint64(uint32(w)&^answerFlags)<<16 | uint64(rif)
}

// scan returns the two best answers of the pool for a pick, by the
// hot-cold rule: usable (within budget, to endpoints that no earlier
// attempt of the call used) and at an index within this picker's
// endpoints. The index is read for the two it returns, which the caller
// confirms (their Ready is the endpoint); scanChecked confirms each.
func (p *Prequal) scan(pool *loadPool, budget int, a *Attempts) (best, second ranked) {
	if a != nil {
		return p.scanChecked(pool, budget, a)
	}
	hot := pool.hot.Load()
	b, c := uint64(math.MaxUint64), uint64(math.MaxUint64)
	var be, ce *Endpoint
	slots := pool.slots[:pool.size]
	for k := range slots {
		e := slots[k].Load()
		if e == nil || usesOf(e.spent.Load()) >= budget {
			continue
		}
		if key := rank(e, hot); key < c {
			if key < b {
				b, be, c, ce = key, e, b, be
			} else if e != be {
				c, ce = key, e
			}
		}
	}
	if be == ce {
		ce, c = nil, math.MaxUint64 // one endpoint in two slots (loadPool)
	}
	return ranked{e: be, i: p.indexOf(be), key: b}, ranked{e: ce, i: p.indexOf(ce), key: c}
}

// indexOf is e's index in this picker's endpoints, -1 for nil.
func (p *Prequal) indexOf(e *Endpoint) int {
	if e == nil {
		return -1
	}
	return e.indexOf(e.spent.Load())
}

// scanChecked is scan confirming each answer's index against this
// picker's endpoints.
func (p *Prequal) scanChecked(pool *loadPool, budget int, a *Attempts) (best, second ranked) {
	hot := pool.hot.Load()
	best, second = unranked, unranked
	for k := range pool.size {
		e := pool.slots[k].Load()
		if e == nil {
			continue
		}
		spent := e.spent.Load()
		if usesOf(spent) >= budget {
			continue
		}
		i := e.indexOf(spent)
		if uint(i) >= uint(len(p.cands)) || i == best.i || p.cands[i].Stats != e || a != nil && a.Used(e) {
			continue
		}
		switch key := rank(e, hot); {
		case key < best.key:
			best, second = ranked{e: e, i: i, key: key}, best
		case key < second.key:
			second = ranked{e: e, i: i, key: key}
		}
	}
	return best, second
}

// at reports whether r is none or an answer at its index in this
// picker's endpoints.
func (p *Prequal) at(r ranked) bool {
	return r.e == nil || uint(r.i) < uint(len(p.cands)) && p.cands[r.i].Stats == r.e
}

// Pick implements balancer.Picker.
func (p *Prequal) Pick(info balancer.PickInfo) (balancer.PickResult, error) {
	s := p.ll.snap
	if p.ll.unserved {
		s.notePlaced()
	}
	a := AttemptsOf(info)
	pool, budget := p.set.pool, p.set.cfg.ReuseBudget
	best, second := p.scan(pool, budget, a)
	if !p.at(best) || !p.at(second) {
		// An answer's index is not this picker's: the picker is older
		// than the newest, or the answer came for an endpoint that left
		// the READY list as it did. Scan again, each against this picker.
		best, second = p.scanChecked(pool, budget, a)
	}
	draw := p.ll.draw()
	if second.i < 0 {
		p.probes.want(draw)
		return p.fallback.pickAny(info, a)
	}
	p.probes.want(draw)
	if len(s.Ejected) > 0 {
		if res, err, ok := s.Probe(info, a, uint32(draw>>32)); ok {
			return res, err
		}
	}
	b, c := p.cands[best.i].Stats, p.cands[second.i].Stats
	if !p.ll.rampingPair(best.i, second.i) && (!p.ll.penalty || (b.outcomeBits.Load()|c.outcomeBits.Load())>>32 == 0) {
		// Neither ramps nor failed of late: the rule's choice stands.
		p.spend(b)
		res, err := p.ll.place(&p.cands[best.i], info, best.reason(), 0)
		if a != nil {
			return a.Record(b, res, err)
		}
		return res, err
	}
	cands := [2]int{best.i, second.i}
	chosen, _, why, now := p.ll.choose(cands[:], 0, 0)
	if why != ReasonAvoidedFailing {
		why = best.reason()
		if chosen == second.i {
			why = second.reason()
		}
	}
	e := p.cands[chosen].Stats
	p.spend(e)
	res, err := p.ll.placeChosen(cands[:], chosen, info, why, now)
	if a != nil {
		return a.Record(e, res, err)
	}
	return res, err
}

// spend counts a pick against e's answer. One that has placed its reuse
// budget stays in its slot, passed over by picks, until a report renews
// it, a probe's answer takes its place, or it expires.
func (p *Prequal) spend(e *Endpoint) { e.use() }

// hotCold is the cost the engine's checks compare for Prequal's final
// pair: the hot-cold rank as a number, latency for a cold answer and, far
// above any latency, RIF for a hot one.
type hotCold struct{ p *Prequal }

// hotBase puts every hot answer after every cold one: latencies are in
// seconds.
const hotBase = 1e9

func (h hotCold) Load(r *Ready) float64 {
	e := r.Stats
	rif, lat, known := e.estimate()
	if !known {
		return hotBase
	}
	if rif > int64(h.p.set.pool.hot.Load()) {
		return hotBase + float64(rif)
	}
	return lat
}

// Snapshot is what the picker was built from, for tests and tools.
func (p *Prequal) Snapshot() *Snapshot { return p.ll.snap }

// ReportCosts implements CostReporter: each endpoint's cost as Prequal's
// final pair compares it (hotCold), or, while the pool holds fewer than
// two answers for this picker's endpoints and picks compare in-flight
// counts, that cost.
func (p *Prequal) ReportCosts(now int64, record func(float64)) {
	pool, answers := p.set.pool, 0
	for k := range pool.size {
		if e := pool.slots[k].Load(); e != nil {
			if i := e.indexOf(e.spent.Load()); uint(i) < uint(len(p.cands)) && p.cands[i].Stats == e {
				answers++
			}
		}
	}
	if answers < 2 {
		p.fallback.ReportCosts(now, record)
		return
	}
	p.ll.ReportCosts(now, record)
}
