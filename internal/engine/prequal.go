package engine

import (
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
	return p
}

// ranked is a pool answer as the hot-cold rule ranks it: hot after cold;
// among cold, by latency; among hot, by RIF.
type ranked struct {
	i   int // index in cands; -1 for none
	hot bool
	key float64
}

// before reports whether r ranks before o.
func (r ranked) before(o ranked) bool {
	if o.i < 0 {
		return true
	}
	if r.hot != o.hot {
		return !r.hot
	}
	return r.key < o.key
}

// rank is e's answer ranked against the hot line.
func (p *Prequal) rank(i int, e *Endpoint, hot uint32) ranked {
	rif, lat, _ := e.load.estimate(e.inflight.Load())
	if rif > int64(hot) {
		return ranked{i: i, hot: true, key: float64(rif)}
	}
	return ranked{i: i, key: lat}
}

// Pick implements balancer.Picker.
func (p *Prequal) Pick(info balancer.PickInfo) (balancer.PickResult, error) {
	s := p.ll.snap
	if p.ll.unserved {
		s.notePlaced()
	}
	a := AttemptsOf(info)
	pool := p.set.pool
	hot := pool.hot.Load()
	best, second := ranked{i: -1}, ranked{i: -1}
	for k := range pool.size {
		e := pool.slots[k].Load()
		if e == nil {
			continue
		}
		i := int(e.load.index.Load())
		if uint(i) >= uint(len(p.cands)) || p.cands[i].Stats != e || a != nil && a.Used(e) || i == best.i {
			continue
		}
		switch r := p.rank(i, e, hot); {
		case r.before(best):
			best, second = r, best
		case r.before(second):
			second = r
		}
	}
	draw := s.Rand.Uint64()
	if second.i < 0 {
		p.probes.fallback()
		return p.fallback.pickAny(info, a)
	}
	p.probes.want(draw)
	if len(s.Ejected) > 0 {
		if res, err, ok := s.Probe(info, a, uint32(draw>>32)); ok {
			return res, err
		}
	}
	cands := [2]int{best.i, second.i}
	chosen, _, why, now := p.ll.choose(cands[:], 0, 0)
	e := p.cands[chosen].Stats
	if e.load.uses.Add(1) >= int32(p.set.cfg.ReuseBudget) {
		// Its answer is spent: the next pick asks for a fresh one.
		pool.remove(e)
	}
	res, err := p.ll.placeChosen(cands[:], chosen, info, why, now)
	if a != nil {
		return a.Record(e, res, err)
	}
	return res, err
}

// hotCold is the cost the engine's checks compare for Prequal's final
// pair: the hot-cold rank as a number, latency for a cold answer and, far
// above any latency, RIF for a hot one.
type hotCold struct{ p *Prequal }

// hotBase puts every hot answer after every cold one: latencies are in
// seconds.
const hotBase = 1e9

func (h hotCold) Load(r *Ready) float64 {
	e := r.Stats
	rif, lat, known := e.load.estimate(e.inflight.Load())
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
