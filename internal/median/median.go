// Package median fills in the weights of endpoints without a usable
// weight report with the median of those that have one, and bounds every
// weight at a multiple of that median. orcaweight.FillMedian is its public
// face; the engine calls Scan, to keep weights that need nothing filled,
// Of with a buffer it keeps between pickers, so that building a picker
// over a large fleet does not allocate for it, and With, to fill with a
// median it keeps between weight updates.
package median

import (
	"math"
	"math/bits"
	"slices"
)

// MaxMultiple is orcaweight.MaxMedianMultiple, documented there.
const MaxMultiple = 10

// Scan reads weights as Fill would, without writing them: it returns how
// many are usable and, when at least two are, whether Fill surely leaves
// every weight as it is (then a caller may keep them instead of filling a
// copy): every weight usable and none above MaxMultiple times the
// smallest. Fill may leave them as they are without that. With fewer than
// two usable, Fill sets every weight to 1.
func Scan(weights []float64, usable []bool) (nUsable int, unchanged bool) {
	if len(weights) != len(usable) {
		panic("orca: FillMedian: len(weights) != len(usable)")
	}
	// Plain comparisons, not the min and max builtins: theirs order NaN
	// and signed zeros, and over 10k weights took 28 µs where these take
	// 9, on every picker a weighted policy builds. A NaN, which the
	// comparisons pass over, is noted apart.
	least, most, nan := math.Inf(1), 0.0, false
	for i, ok := range usable {
		if ok {
			nUsable++
			w := weights[i]
			if w < least {
				least = w
			}
			if w > most {
				most = w
			}
			if w != w {
				nan = true
			}
		}
	}
	// The median is at least the smallest weight, so with nothing to fill
	// and no weight above the bound on the smallest, nothing changes.
	// (An overflowing product is +Inf, which no weight exceeds.)
	return nUsable, nUsable >= 2 && nUsable == len(weights) && !nan && most <= least*MaxMultiple
}

// Fill is orcaweight.FillMedian, documented there, selecting the median in
// *scratch when scratch is not nil: it grows *scratch when it is too short
// for the usable weights and keeps it for the next call. With scratch nil
// it allocates for more than 64 usable weights.
func Fill(weights []float64, usable []bool, scratch *[]float64) (nUsable int) {
	nUsable, unchanged := Scan(weights, usable)
	switch {
	case unchanged:
	case nUsable < 2:
		for i := range weights {
			weights[i] = 1
		}
	default:
		With(weights, usable, Of(weights, usable, scratch, nUsable))
	}
	return nUsable
}

// Of returns the median of the usable weights, of which Scan found
// nUsable (at least one), selecting it in *scratch as Fill does.
func Of(weights []float64, usable []bool, scratch *[]float64, nUsable int) float64 {
	var buf [64]float64
	var usableWs []float64
	switch {
	case scratch != nil && cap(*scratch) >= nUsable:
		usableWs = (*scratch)[:0]
	case scratch != nil:
		// Room to spare, so that a fleet growing by a few endpoints does
		// not reallocate on every call.
		*scratch = make([]float64, 0, nUsable+nUsable/4)
		usableWs = *scratch
	case nUsable <= len(buf):
		usableWs = buf[:0]
	default:
		usableWs = make([]float64, 0, nUsable)
	}
	for i, ok := range usable {
		if ok {
			usableWs = append(usableWs, weights[i])
		}
	}
	median := selectNth(usableWs, nUsable/2)
	if nUsable%2 == 0 {
		// The other middle value is the largest of those selected below.
		lo := slices.Max(usableWs[:nUsable/2])
		median = lo + (median-lo)/2 // cannot overflow, unlike (lo+median)/2
	}
	return median
}

// With sets every weight that is not usable to median and bounds every
// usable one at MaxMultiple times it: Fill's rule, with the median given,
// for a caller that keeps it between calls (Of computes it).
func With(weights []float64, usable []bool, median float64) {
	limit := median * MaxMultiple // +Inf near MaxFloat64: then no bound applies
	for i, ok := range usable {
		switch {
		case !ok:
			weights[i] = median
		case weights[i] > limit:
			weights[i] = limit
		}
	}
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
