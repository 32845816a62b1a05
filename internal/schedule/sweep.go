package schedule

import (
	"math"

	"github.com/pickwise/pickwise/internal/mix"
)

// maxCycle is the longest cycle a Schedule tabulates (a quantized cycle
// reaches it at 128 endpoints). Past it a table's build grows to
// milliseconds on every change, and the schedule sweeps instead.
const maxCycle = 1 << 12

// sweep is the order over a large fleet: the shares laid end to end as
// arcs of a circle of 2^32, and pick k landing at k/golden ratio on it.
// Immutable.
type sweep struct {
	// start[i] is where endpoint i's arc begins; start[0] = 0, and the
	// starts increase strictly.
	start []uint32
	// guide[b] is the arc that holds bucket b's first point,
	// floor(b*2^32/n), where a pick in bucket b starts walking.
	guide []uint32
	n     uint64
}

// usable reports whether w is positive and finite (NaN is not).
func usable(w float64) bool {
	return w > 0 && !math.IsInf(w, 1)
}

// weightScale is the largest usable weight, and the sum of the usable
// weights divided by it, which stays finite near math.MaxFloat64; 0 when
// no weight is usable.
func weightScale(weights []float64) (maxW, sum float64) {
	for _, w := range weights {
		if usable(w) && w > maxW {
			maxW = w
		}
	}
	for _, w := range weights {
		if usable(w) {
			sum += w / maxW
		}
	}
	return maxW, sum
}

// circle is 2^32, the sweep's circumference, as a float64.
const circle = 1 << 32

// sweepPoint is where pick seq lands: the top 32 bits of seq*mix.Golden
// mod 2^64, distinct for every seq.
func sweepPoint(seq uint32) uint32 { return uint32(uint64(seq) * mix.Golden >> 32) }

// newSweep returns the sweep over weights, at least two. No arc is
// shorter than one slot of a cycle of target slots, and a bad weight
// gets that floor.
func newSweep(weights []float64, target int) *sweep {
	n := len(weights)
	maxW, sum := weightScale(weights)
	floor := sum / float64(target)
	if sum == 0 {
		floor = 1 // every weight is bad: equal shares
	}
	arc := func(w float64) float64 {
		if usable(w) {
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
		// Rounding may reach 2^32: the caps keep the starts in range,
		// strictly increasing, with room for the rest.
		pos := acc * scale
		start := uint64(math.MaxUint32)
		if pos < circle {
			start = uint64(pos)
		}
		prev = min(max(start, prev+1), math.MaxUint32-uint64(n-1-i))
		s.start[i] = uint32(prev)
		acc += arc(weights[i])
	}
	// guide is the running sum of how many arcs start at or before each
	// bucket's first point, counted at the first bucket each arc reaches.
	for _, st := range s.start[1:] {
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
