package orcaweight

import "slices"

// FillMedian replaces the weight of every endpoint whose usable[i] is false
// with the median of the usable weights (the mean of the two middle ones
// for an even count), and returns how many were usable. With fewer than
// two usable weights it sets every weight to 1, plain round robin, which
// callers count as a round-robin fallback, as grpc-go's
// weighted_round_robin does.
//
// grpc-go fills in the mean of the usable weights; the median, which
// Envoy's client-side weighted round robin uses, is taken here so that one
// endpoint with an extreme weight does not decide how much traffic every
// newcomer gets.
// Usable weights must be finite and > 0, as Tracker.Update returns them.
// weights and usable must have the same length. FillMedian runs when a
// picker is built, not per pick; it allocates only for more than 64
// usable endpoints.
func FillMedian(weights []float64, usable []bool) (nUsable int) {
	if len(weights) != len(usable) {
		panic("orca: FillMedian: len(weights) != len(usable)")
	}
	var buf [64]float64
	sorted := buf[:0]
	for i, ok := range usable {
		if ok {
			sorted = append(sorted, weights[i])
		}
	}
	nUsable = len(sorted)
	if nUsable < 2 {
		for i := range weights {
			weights[i] = 1
		}
		return nUsable
	}
	if nUsable == len(weights) {
		return nUsable
	}
	slices.Sort(sorted)
	median := sorted[nUsable/2]
	if nUsable%2 == 0 {
		lo := sorted[nUsable/2-1]
		median = lo + (median-lo)/2 // cannot overflow, unlike (lo+median)/2

	}
	for i, ok := range usable {
		if !ok {
			weights[i] = median
		}
	}
	return nUsable
}
