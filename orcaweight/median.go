package orcaweight

import (
	"math"
	"math/bits"
	"slices"
)

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
// picker is built, not per pick; it allocates only for more than 64
// endpoints, and selects the median (in linear time) only when some
// weight needs it (one is unusable, or the largest is above
// MaxMedianMultiple times the smallest).
func FillMedian(weights []float64, usable []bool) (nUsable int) {
	if len(weights) != len(usable) {
		panic("orca: FillMedian: len(weights) != len(usable)")
	}
	var buf [64]float64
	usableWs := buf[:0]
	if len(weights) > len(buf) {
		usableWs = make([]float64, 0, len(weights))
	}
	least, most := math.Inf(1), 0.0
	for i, ok := range usable {
		if ok {
			w := weights[i]
			usableWs = append(usableWs, w)
			least, most = min(least, w), max(most, w)
		}
	}
	nUsable = len(usableWs)
	if nUsable < 2 {
		for i := range weights {
			weights[i] = 1
		}
		return nUsable
	}
	// The median is at least the smallest weight, so with nothing to fill
	// and no weight above the bound on the smallest, nothing changes.
	// (An overflowing product is +Inf, which no weight exceeds.)
	if nUsable == len(weights) && most <= least*MaxMedianMultiple {
		return nUsable
	}
	median := selectNth(usableWs, nUsable/2)
	if nUsable%2 == 0 {
		// The other middle value is the largest of those selected below.
		lo := slices.Max(usableWs[:nUsable/2])
		median = lo + (median-lo)/2 // cannot overflow, unlike (lo+median)/2
	}
	limit := median * MaxMedianMultiple // +Inf near MaxFloat64: then no bound applies
	for i, ok := range usable {
		switch {
		case !ok:
			weights[i] = median
		case weights[i] > limit:
			weights[i] = limit
		}
	}
	return nUsable
}

// selectNth reorders v so that v[k] is the value a sort would put there,
// with nothing larger before it and nothing smaller after, and returns it:
// a picker over thousands of endpoints is built on every connectivity
// change, where sorting their weights to find a median would cost
// O(n log n). Quickselect with a median-of-three pivot is O(n) on any
// weights but adversarial ones; past 2 log2(n) rounds it sorts what is
// left, which bounds it at O(n log n). v must not be empty.
func selectNth(v []float64, k int) float64 {
	lo, hi := 0, len(v)-1
	for depth := 2 * bits.Len(uint(len(v))); lo < hi; depth-- {
		if depth == 0 {
			slices.Sort(v[lo : hi+1])
			break
		}
		// Median of three as the pivot, left in v[mid].
		mid := lo + (hi-lo)/2
		if v[mid] < v[lo] {
			v[mid], v[lo] = v[lo], v[mid]
		}
		if v[hi] < v[lo] {
			v[hi], v[lo] = v[lo], v[hi]
		}
		if v[hi] < v[mid] {
			v[hi], v[mid] = v[mid], v[hi]
		}
		pivot := v[mid]
		// Hoare's partition: afterwards v[lo..j] <= pivot <= v[j+1..hi].
		i, j := lo-1, hi+1
		for {
			for i++; v[i] < pivot; i++ {
			}
			for j--; v[j] > pivot; j-- {
			}
			if i >= j {
				break
			}
			v[i], v[j] = v[j], v[i]
		}
		if k <= j {
			hi = j
		} else {
			lo = j + 1
		}
	}
	return v[k]
}
