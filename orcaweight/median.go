package orcaweight

import "github.com/pickwise/pickwise/internal/median"

// MaxMedianMultiple bounds every weight FillMedian returns at this
// multiple of the median usable weight, so that one backend's report,
// however absurd (a qps of 1e305 is finite and positive, so nothing
// upstream rejects it), cannot draw more than a bounded share. Among n
// endpoints (n >= 3, at least two with a usable weight besides the
// absurd one) that otherwise weigh the same, it gets 10/(10+n-1) of the
// calls: 10/19, 53%, of ten, where it drew 99% uncapped, and 9% of a
// hundred. The worst case, when every endpoint below the median reports
// next to nothing, is 10/(10+ceil(n/2)-1), 71% of ten. With only two
// usable weights the median is their mean and bounds nothing.
//
// Why 10: weights follow capacity, since a weighted round robin that
// works equalizes utilization, and a serving pool rarely mixes machines
// more than a few times apart (two hardware generations are about 2x;
// instance sizes in one pool, 4x); 10x leaves that room to spare. What
// the bound costs otherwise is speed: an endpoint whose weight is
// legitimately far above the rest (idle, just started) takes a few more
// weight updates to reach its share, as the median rises with it.
const MaxMedianMultiple = 10

// FillMedian replaces the weight of every endpoint whose usable[i] is false
// with the median of the usable weights (the mean of the two middle ones
// for an even count), lowers every weight above MaxMedianMultiple times
// that median to the bound, and returns how many were usable. With fewer
// than two usable weights it sets every weight to 1, plain round robin,
// which callers count as a round-robin fallback, as grpc-go's
// weighted_round_robin does.
//
// grpc-go fills in the mean of the usable weights; the median, which
// Envoy's client-side weighted round robin uses, is taken here so that one
// endpoint with an extreme weight does not decide how much traffic every
// newcomer gets, nor, through the bound, how much it gets itself.
// Usable weights must be finite and > 0, as Tracker.Update returns them.
// weights and usable must have the same length. FillMedian runs when a
// picker is built, not per pick; it selects the median (in linear time)
// only when some weight needs it (one is unusable, or the largest is
// above MaxMedianMultiple times the smallest), and allocates only then,
// for more than 64 usable weights.
func FillMedian(weights []float64, usable []bool) (nUsable int) {
	return median.Fill(weights, usable, nil)
}
