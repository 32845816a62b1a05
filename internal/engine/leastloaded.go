package engine

import (
	"google.golang.org/grpc/balancer"
)

// LoadMetric is a policy's measure of how busy an endpoint is, before the
// engine divides by weight (after slow start) and multiplies by the failure
// penalty. It is read on every pick from many goroutines: it must be
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
func (InFlight) Load(r *Ready) float64 { return float64(r.Stats.inflight.Load() + 1) }

// metricKind tells LeastLoaded which of the engine's metrics it was given,
// so that it can compute them inline.
type metricKind uint8

const (
	otherMetric    metricKind = iota // call LoadMetric.Load
	inFlightMetric                   // InFlight
	peakMetric                       // PeakEWMA with latency tracking on: timed picks
)

// LeastLoaded is the engine's d-choice picker: it samples choices distinct
// READY endpoints uniformly at random and sends the RPC to the one with the
// lowest
//
//	cost = metric.Load(r) * penalty(r) / (weight(r) * slowStart(r))
//
// Ties go to the first draw. With d = 2 this is the power of two choices
// (Mitzenmacher): the maximum load drops from O(log n / log log n) to
// O(log log n) while each pick reads two counters, not n.
type LeastLoaded struct {
	// Immutable after construction.
	snap    *Snapshot
	choices int
	metric  LoadMetric
	kind    metricKind
	timed   bool // kind is peakMetric: read the clock once per pick, time calls that need a sample
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
	}
	return &LeastLoaded{
		snap:    snap,
		choices: min(max(choices, 2), MaxChoices),
		metric:  metric,
		kind:    kind,
		timed:   kind == peakMetric,
	}
}

// Pick implements balancer.Picker.
func (p *LeastLoaded) Pick(info balancer.PickInfo) (balancer.PickResult, error) {
	eps := p.snap.Endpoints
	n := len(eps)
	var now int64 // Clock.Nanotime; 0 until someone needs it
	if p.timed {
		now = p.snap.Clock.Nanotime()
	}
	if n == 1 {
		return p.pickEndpoint(&eps[0], info, ReasonOnlyReady, now)
	}
	var idx [MaxChoices]int
	var cands []int
	switch {
	case n <= p.choices:
		// Every endpoint is a candidate; start at a random one so ties do not
		// always favour the first in the list.
		start := reduce(uint32(p.snap.Rand.Uint64()), n)
		for k := 0; k < n; k++ {
			idx[k] = (start + k) % n
		}
		cands = idx[:n]
	case p.choices == 2:
		idx[0], idx[1] = samplePair(p.snap.Rand, n)
		cands = idx[:2]
	default:
		cands = sampleDistinct(p.snap.Rand, n, p.choices, &idx)
	}
	best, _, why, now := p.choose(cands, now)
	return p.pickEndpoint(&eps[best], info, why, now)
}

func (p *LeastLoaded) pickEndpoint(r *Ready, info balancer.PickInfo, why PickReason, now int64) (balancer.PickResult, error) {
	if p.timed && r.Stats.wantsSample(now, p.snap.latency) {
		return pickTimed(r, info, why, now, p.snap.Clock, p.snap.latency)
	}
	return PickEndpoint(r, info, why)
}

// choose returns the index of the cheapest candidate, its cost, why it
// won, and the clock reading now, taken if a candidate needed it and not
// taken before. The cost is computed here, inline, rather than in a
// function of its own: that function would be too large to inline and
// cost every candidate a call.
func (p *LeastLoaded) choose(cands []int, now int64) (best int, bestCost float64, why PickReason, _ int64) {
	s := p.snap
	best = -1
	// The candidate that would have won without the failure penalty: when
	// it is not best, the penalty steered this call away from a failing
	// endpoint.
	rawBest, rawBestCost := -1, 0.0
	tie := true
	for _, i := range cands {
		r := &s.Endpoints[i]
		inv := r.InvWeight
		if r.RampEnd != 0 {
			// Only a ramping candidate needs the time; a timed pick has
			// read the clock already.
			if now == 0 {
				now = s.Clock.Nanotime()
			}
			inv = s.EffectiveInvWeight(r, now)
		}
		var load float64
		switch p.kind {
		case inFlightMetric:
			load = float64(r.Stats.inflight.Load() + 1)
		case peakMetric:
			load = r.Stats.PeakLoad(now, s.latency)
		default:
			load = p.metric.Load(r)
		}
		raw := load * inv
		cost := raw
		if s.penalty != nil {
			cost *= s.penalty.multiplier(r.Stats.FailureRatio())
		}
		switch {
		case best < 0:
			best, bestCost, rawBest, rawBestCost = i, cost, i, raw
			continue
		case cost < bestCost:
			best, bestCost, tie = i, cost, false
		case cost > bestCost:
			tie = false
		}
		if raw < rawBestCost {
			rawBest, rawBestCost = i, raw
		}
	}
	why = ReasonLeastLoaded
	switch {
	case rawBest != best:
		why = ReasonAvoidedFailing
	case tie:
		why = ReasonTie
	}
	return best, bestCost, why, now
}

// ReportCosts implements CostReporter: the cost the picker would compare
// for each endpoint now, failure penalty included, each endpoint chosen
// as the only candidate.
func (p *LeastLoaded) ReportCosts(now int64, record func(float64)) {
	for i := range p.snap.Endpoints {
		one := [1]int{i}
		_, c, _, _ := p.choose(one[:], now)
		record(c)
	}
}
