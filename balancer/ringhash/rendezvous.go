package ringhash

import (
	"fmt"
	"math"
	"time"

	"github.com/pickwise/pickwise/internal/mix"
)

// This file is rendezvous hashing, or highest random weight (Thaler and
// Ravishankar, 1998): every endpoint scores every key, and the key goes to
// the highest score. There is no table to build beyond one hash per
// endpoint, a removed endpoint's keys go to their runner-up, which is
// exactly the minimal movement, and the runner-up order is itself the
// fallback walk. The price is O(n) work per lookup.
//
// Score. The pair's hash is x = mix.Mix64(key ^ identityHash): for a fixed key,
// the endpoints' x behave as independent uniform draws (mix64 scrambles any
// fixed difference between identity hashes). With equal weights the
// highest x wins, compared as integers, with no floating point at all.
// With weights, x is turned into u in (0, 1) and the score is
//
//	score = -w / ln(u),
//
// the weighted form of Schindelhauer and Schomaker's logarithmic method:
// -ln(u) / w is an exponential variable of rate w, and the least of several
// independent exponentials is endpoint i's with probability w_i / W, so the
// shares follow the weights exactly, and a weight change only moves keys to
// or from the reweighted endpoint. The table stores 1/w and maximizes
// ln(u) * (1/w), the same order without a division. math.Log may differ in
// its last bit between architectures (Go has an assembly version on amd64),
// which can only reorder two scores closer than that, about 2^-52 apart.
//
// Cost per lookup is n mixes and comparisons, 1 to 2 ns per endpoint. With
// weights, a logarithm is only taken for an endpoint whose u is close enough
// to 1 to beat the best score so far (ln(u) <= u - 1 bounds it), a handful
// per lookup rather than n; see best and BenchmarkLookup. Weights are capped
// as in the other tables (capWeights), so that switching tables never
// changes which weights count.
//
// Size limit. Nothing precomputed can make an exact highest-random-weight
// lookup sublinear: every endpoint's score depends on the key. So the
// table is meant for sets up to rendezvousMaxEndpoints, where a pick costs
// 1 to 2 microseconds; the balancer logs a warning when it builds one over
// more (see policy.warnRendezvousSize), and still builds it: placement must
// not change behind the user's back. Past that size the ring or Maglev is
// the better table.

// rendezvousMaxEndpoints is the largest set a rendezvous table is meant
// for: at 1 to 2 ns per endpoint, a pick over 1000 endpoints takes 1 to
// 2 µs (BenchmarkLookup, BenchmarkPick), one over 10000 8 to 17 µs.
const rendezvousMaxEndpoints = 1000

// rendezvous is an immutable weighted highest-random-weight table.
type rendezvous struct {
	// Immutable after newRendezvous.

	// hashes[r] is the identity hash of the endpoint of rank r.
	hashes []uint64
	// invWeights[r] is 1/weight of the endpoint of rank r; nil when every
	// weight is equal, and scores are then the raw pair hashes.
	invWeights []float64
	// order[r] is the caller's index of the endpoint of rank r.
	order []int32
	// buildTime is how long newRendezvous took.
	buildTime time.Duration
}

var _ table = (*rendezvous)(nil)

// newRendezvous builds a rendezvous table over eps, which must be non-empty
// and free of duplicate identities, weights capped at maxWeightRatio times
// the median.
func newRendezvous(eps []endpoint, maxWeightRatio uint32) (*rendezvous, error) {
	start := time.Now()
	if maxWeightRatio == 0 {
		return nil, fmt.Errorf("pickwise_ring_hash: maxWeightRatio 0: must be >= 1")
	}
	c, err := canonicalize(eps, maxWeightRatio)
	if err != nil {
		return nil, err
	}
	t := &rendezvous{hashes: c.hashes, order: c.order}
	if lo, hi, _ := c.weightStats(); lo != hi {
		t.invWeights = make([]float64, len(c.weights))
		for r, w := range c.weights {
			t.invWeights[r] = 1 / float64(w)
		}
	}
	t.buildTime = time.Since(start)
	return t, nil
}

// pairUniform turns a pair hash into u in (0, 1): x's top 53 bits, centred
// in their interval so that u is never 0 or 1 (ln would be -Inf or 0).
func pairUniform(x uint64) float64 {
	return (float64(x>>11) + 0.5) * (1.0 / (1 << 53))
}

// weightedScore is ln(u) / w for the pair hash x; the result is negative,
// and the highest wins.
func weightedScore(x uint64, invWeight float64) float64 {
	return math.Log(pairUniform(x)) * invWeight
}

// pruneMargin widens the bounds that let a weighted lookup skip a
// logarithm. Since 1 - 1/u <= ln(u) <= u - 1, an endpoint whose (u - 1) / w
// is below the best score so far cannot win, and one whose (1 - 1/u) / w is
// above a walk's threshold was already offered. Requiring a bound to clear
// the score by a relative 1e-9, far more than the few ulps of rounding on
// either side, makes each skip safe in floating point too: pruning never
// changes the result.
const pruneMargin = 1 + 1e-9

// best returns the rank and score of the highest-scoring endpoint for key
// among those that rank strictly below (belowScore, belowRank) in the walk's
// order: score descending, then rank ascending. With all set to true it
// considers every endpoint. ok is false if no endpoint qualifies.
//
// Scores travel as uint64: the pair hash itself with equal weights, or the
// float64 bits of the weighted score, which the weighted branch decodes.
func (t *rendezvous) best(key uint64, all bool, belowScore uint64, belowRank uint32) (rank uint32, score uint64, ok bool) {
	if t.invWeights == nil {
		if all {
			// The first candidate, on every keyed pick: a loop with
			// nothing in it but the mix and one comparison.
			for r, h := range t.hashes {
				// Strict: an equal score keeps the lower rank.
				if x := mix.Mix64(key ^ h); x > score || r == 0 {
					rank, score = uint32(r), x
				}
			}
			return rank, score, true
		}
		for r, h := range t.hashes {
			x := mix.Mix64(key ^ h)
			if x > belowScore || x == belowScore && uint32(r) <= belowRank {
				continue
			}
			if !ok || x > score {
				rank, score, ok = uint32(r), x, true
			}
		}
		return rank, score, ok
	}
	below := math.Float64frombits(belowScore)
	var top float64
	for r, h := range t.hashes {
		inv := t.invWeights[r]
		u := pairUniform(mix.Mix64(key ^ h))
		// Most endpoints are ruled out here without a logarithm: only
		// those with u close to 1 can beat a good score, so a lookup takes
		// a handful of logarithms instead of n.
		if ok && (u-1)*inv < top*pruneMargin {
			continue
		}
		// Walking on, the endpoints already offered score above the
		// threshold; ln(u) >= 1 - 1/u rules most of them out the same way.
		if !all && (1-1/u)*inv > below/pruneMargin {
			continue
		}
		s := math.Log(u) * inv
		if !all && (s > below || s == below && uint32(r) <= belowRank) {
			continue
		}
		if !ok || s > top {
			rank, top, ok = uint32(r), s, true
		}
	}
	return rank, math.Float64bits(top), ok
}

// first returns a walk at the key's highest-scoring endpoint.
func (t *rendezvous) first(keyHash uint64) cursor {
	r, s, _ := t.best(keyHash, true, 0, 0)
	return cursor{key: keyHash, at: s, endpoint: t.order[r], ref: int32(r)}
}

// next offers the endpoint with the next lower score: the walk is the key's
// full ranking of the endpoints, each offered exactly once, n in all, and it
// ends when no endpoint ranks below the current one. Each step rescores
// every endpoint, O(n), since keeping the ranking would need memory per
// walk; a full walk is O(n^2), which is why a caller should stop as soon as
// a candidate will do.
func (t *rendezvous) next(c cursor) (cursor, bool) {
	r, s, ok := t.best(c.key, false, c.at, uint32(c.ref))
	if !ok {
		return c, false
	}
	c.at, c.ref, c.endpoint = s, int32(r), t.order[r]
	return c, true
}

// walkBound is n: the walk offers every endpoint exactly once.
func (t *rendezvous) walkBound() int { return len(t.order) }

// size is the number of endpoints in the table.
func (t *rendezvous) size() int { return len(t.order) }

// stats reports the table's footprint and build time; its entries are its
// endpoints.
func (t *rendezvous) stats() tableStats {
	return tableStats{
		kind:      "rendezvous",
		endpoints: len(t.order),
		entries:   len(t.order),
		bytes:     cap(t.hashes)*8 + cap(t.invWeights)*8 + cap(t.order)*4,
		buildTime: t.buildTime,
	}
}
