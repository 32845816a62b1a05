package engine

import (
	"math"

	"github.com/pickwise/pickwise/internal/mix"
)

// This file is the order a Schedule follows over a large fleet whose
// weights do not reduce to a short integer cycle. The cycle table of
// scheduler.go holds about 32 slots per endpoint, so over 10,000
// endpoints it is 320,000 entries whose build, scattered over a few
// megabytes, takes about 9 ms (a millisecond over 1,000): on every weight
// update and on every connectivity change, on the channel's queue. Past
// schedMaxCycle entries the schedule sweeps instead.
//
// The sweep. Lay the endpoints' shares end to end on a circle of
// circumference 2^32, each an arc as long as its share. Pick k lands at
// k divided by the golden ratio, modulo 1, times 2^32: the Weyl sequence
// the cycle table uses for its phases, computed in 64 bits (k times
// mix.Golden, modulo 2^64) and kept to its top 32. By the three-gap theorem
// the gaps between the picks that land on one arc take at most three
// values, all within a small factor of 1/share (TestSweepGaps), and over
// any window of picks every endpoint's count is within a few calls of its
// share (TestSweepShares): as smooth as the table, without a table. The
// build is O(n), and a pick finds its arc through a guide of n buckets,
// each naming the arc its start falls on, from which it steps forward
// over the arcs that start inside the bucket: one on average.
//
// The one-slot floor of the table is kept: no arc is shorter than one
// slot of a table of 32 slots an endpoint would be, so every READY
// endpoint is reached, and a bucket holds the starts of at most about 33
// arcs whatever the weights, which bounds a pick's steps.
//
// A circle of 2^32 rather than 2^64: the picks' counter is 32 bits
// anyway, and the starts, built afresh for every picker, take half the
// memory (40 KB at 10,000 endpoints rather than 80), a sixth of what a
// connectivity change allocated there. The floor keeps every arc at
// least 2^32/(33n) long, thousands of units at any fleet a channel
// holds, so the rounding of a start moves a share by well under 0.1%.
// The points stay those of the 64-bit sequence, rounded down: a step of
// 2^32 divided by the golden ratio, truncated to 32 bits, is a rotation
// by a different number, whose continued fraction strays from the golden
// ratio's all-ones after 22 terms, and over 22,000 endpoints the picks of
// an endpoint at the floor came in runs with gaps of 6 times their mean
// between them.

// schedMaxCycle is the longest cycle the schedule tabulates: 4,096
// entries (a quantized cycle reaches it at 128 endpoints), built in tens of
// microseconds. Past it the table's build grows to a millisecond at 1,000
// endpoints and 9 ms at 10,000 (BenchmarkNewSchedule), where a sweep
// takes a fraction of that for a few nanoseconds more per pick, so the
// schedule sweeps.
const schedMaxCycle = 1 << 12

// sweep is a Schedule's order over a large fleet; see the file comment.
// Immutable.
type sweep struct {
	// start[i] is where endpoint i's arc begins; start[0] = 0, and the
	// starts increase strictly, so every arc is at least one unit long.
	start []uint32
	// guide[b] is the endpoint whose arc holds floor(b*2^32/n), at or
	// just before the first point of bucket b (the points u with
	// floor(u*n/2^32) = b): a pick walks forward from there.
	guide []uint32
	n     uint64
}

// schedUsable reports whether w is a weight the caller was supposed to pass:
// positive and finite. NaN fails the comparison.
func schedUsable(w float64) bool {
	return w > 0 && !math.IsInf(w, 1)
}

// schedScale is the largest usable weight and the sum of the usable
// weights divided by it: dividing by the largest first keeps the sum
// finite even when the weights are near math.MaxFloat64, every term being
// in (0, 1]. sum is 0 when no weight is usable.
func schedScale(weights []float64) (maxW, sum float64) {
	for _, w := range weights {
		if schedUsable(w) && w > maxW {
			maxW = w
		}
	}
	for _, w := range weights {
		if schedUsable(w) {
			sum += w / maxW
		}
	}
	return maxW, sum
}

// circle is 2^32, the sweep's circumference, as a float64.
const circle = 1 << 32

// sweepPoint is where pick seq lands on the circle: the top 32 bits of
// seq times mix.Golden, modulo 2^64. Distinct for every seq, as
// consecutive multiples of Golden are more than 2^32 apart.
func sweepPoint(seq uint32) uint32 { return uint32(uint64(seq) * mix.Golden >> 32) }

// newSweep returns the sweep over weights, at least two of them. No arc is
// shorter than one slot of a cycle of target slots would be, and bad
// weights (zero, negative, NaN, infinite) get that floor, as they get one
// slot in a cycle. target is 32 slots an endpoint.
func newSweep(weights []float64, target int) *sweep {
	n := len(weights)
	maxW, sum := schedScale(weights)
	floor := sum / float64(target)
	if sum == 0 {
		floor = 1 // every weight is bad: equal shares
	}
	// Each arc is computed twice, for the total and for the starts,
	// rather than kept: over a large fleet an array of them would be a
	// good part of what a change allocates.
	arc := func(w float64) float64 {
		if schedUsable(w) {
			return max(w/maxW, floor)
		}
		return floor
	}
	var total float64
	for _, w := range weights {
		total += arc(w)
	}
	s := &sweep{start: make([]uint32, n), guide: make([]uint32, n), n: uint64(n)}
	scale := circle / total
	acc, prev := arc(weights[0]), uint64(0)
	for i := 1; i < n; i++ {
		// acc*scale < 2^32 in exact arithmetic; rounding may reach it,
		// which the caps and the strict increase keep in range.
		pos := acc * scale
		start := uint64(math.MaxUint32)
		if pos < circle {
			start = uint64(pos)
		}
		// Room is left for the starts after this one, all distinct.
		prev = min(max(start, prev+1), math.MaxUint32-uint64(n-1-i))
		s.start[i] = uint32(prev)
		acc += arc(weights[i])
	}
	// The total is at most the usable sum plus n floors, sum*(1+n/target)
	// = sum*33/32, so every arc, at least one floor, is at least 1/(33n)
	// of the circle: while 33n is well under 2^32 (a hundred million
	// endpoints) every arc is over a unit long, and neither the strict
	// increase nor the room left for the rest moves a start.
	//
	// Bucket b's first point is floor(b*2^32/n), which lies on arc
	// guide[b], the number of arcs after the first that start at or
	// before it. Arc i starts at or before it iff b >= ceil(start[i]*n /
	// 2^32), the first bucket arc i counts in: the guide is the running
	// sum of how many arcs first count in each bucket. Two passes without
	// a branch on the data, where walking the arcs bucket by bucket
	// mispredicted about once a bucket, most of the build's time.
	for _, st := range s.start[1:] {
		// At most n, which is no bucket: st*n + 2^32 - 1 < 2^64, as
		// st < 2^32 and n <= 2^32.
		if first := (uint64(st)*s.n + (circle - 1)) >> 32; first < s.n {
			s.guide[first]++
		}
	}
	var arcs uint32
	for b, c := range s.guide {
		arcs += c
		s.guide[b] = arcs
	}
	return s
}

// next is the endpoint at position seq.
func (s *sweep) next(seq uint32) int {
	u := sweepPoint(seq)
	b := uint64(u) * s.n >> 32
	e := int(s.guide[b])
	for e+1 < len(s.start) && s.start[e+1] <= u {
		e++
	}
	return e
}

// share is endpoint i's share of the circle.
func (s *sweep) share(i int) float64 {
	end := float64(circle)
	if i+1 < len(s.start) {
		end = float64(s.start[i+1])
	}
	return (end - float64(s.start[i])) / circle
}
