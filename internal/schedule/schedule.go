// Package schedule is the smooth weighted round-robin order that
// weight-following pickers follow: built once per weight change, read
// without a lock. docs/design/weighted-schedule.md has the bounds and costs.
package schedule

import (
	"math"
	"math/bits"
	"slices"

	"github.com/pickwise/pickwise/internal/mix"
)

// Schedule is an immutable smooth weighted round-robin order over n
// endpoints, safe for concurrent use.
type Schedule struct {
	// table holds the cycle (16-bit indices: no table exceeds
	// maxExactCycle); nil when every weight is the same, the cycle then
	// being the endpoints in order.
	table []uint16
	// length is the cycle length L; mult its fastmod multiplier.
	length uint64
	mult   uint64
	// slots[i] is endpoint i's positions in the cycle; nil like table.
	slots []uint32
	// quantized: slots round the weights rather than honour them
	// exactly, so a rebuild may hold the cycle (holds).
	quantized bool
	// sweep, when not nil, replaces the cycle over a large fleet; the
	// fields above are then zero.
	sweep *sweep
}

const (
	// The exact cycle's cap: see exactLimit.
	exactPerEndpoint = 4
	maxExactCycle    = 1 << 16
	// Weights within intTolerance of an integer count as one (float
	// arithmetic in xDS or JSON); above 2^53 none does.
	intTolerance   = 1e-9
	maxExactWeight = 1 << 53

	// The quantized cycle length: see targetLen.
	minTarget        = 1024
	slotsPerEndpoint = 32
	maxTarget        = 1 << 20

	// Phases are fixed point, so due times compare exactly in uint64.
	phaseBits = 22
	phaseOne  = 1 << phaseBits
	golden    = mix.Golden
)

// targetLen is the quantized cycle length T for n endpoints: 32 slots an
// endpoint, at least 1024, at most 2^20.
func targetLen(n int) int {
	return min(max(slotsPerEndpoint*n, minTarget), maxTarget)
}

// New builds the order for weights, one per endpoint. A weight that is
// not positive and finite gets one slot, so a bad report neither drops
// an endpoint nor hands it the cycle. New panics on no weights.
func New(weights []float64) *Schedule { return NewAfter(weights, nil) }

// NewAfter is New for a picker rebuilt after one that followed prev
// (nil: none). When New would quantize and prev still gives every
// endpoint within a slot of its ideal count, it returns prev, so that
// drifting weights keep the order.
func NewAfter(weights []float64, prev *Schedule) *Schedule {
	n := len(weights)
	if n == 0 {
		panic("schedule: New needs at least one weight")
	}
	if allEqual(weights) {
		return &Schedule{length: uint64(n), mult: fastmodMultiplier(uint64(n))}
	}
	var slots []uint32
	quantized := false
	if n == 1 {
		slots = []uint32{1} // quantizing would build T copies of endpoint 0
	} else if slots = exactSlots(weights); slots == nil {
		if targetLen(n) > maxCycle {
			return &Schedule{sweep: newSweep(weights, slotsPerEndpoint*n)}
		}
		if prev != nil && prev.holds(weights) {
			return prev
		}
		slots = make([]uint32, n)
		quantizedSlots(weights, slots)
		quantized = true
	}
	var length uint64
	for _, c := range slots {
		length += uint64(c)
	}
	s := &Schedule{
		length:    length,
		mult:      fastmodMultiplier(length),
		slots:     slots,
		quantized: quantized,
	}
	s.table = make([]uint16, length)
	fill(s.table, slots)
	return s
}

// Next returns the endpoint at position seq of the order. Callers pass
// an atomic counter's Add(1); Next takes no lock and allocates nothing.
// The counter's wrap cuts one cycle short every 2^32 picks.
func (s *Schedule) Next(seq uint32) int {
	if s.sweep != nil {
		return s.sweep.next(seq)
	}
	pos := fastmod(seq, s.mult, s.length)
	if s.table == nil {
		return int(pos)
	}
	return int(s.table[pos])
}

// allEqual reports whether every weight is the same (NaN never is).
func allEqual(weights []float64) bool {
	for _, w := range weights[1:] {
		if w != weights[0] {
			return false
		}
	}
	return weights[0] == weights[0]
}

// Len is the length of one cycle of the order, 0 for a sweep.
func (s *Schedule) Len() int { return int(s.length) }

// Slots returns endpoint i's positions in one cycle, 0 for a sweep.
func (s *Schedule) Slots(i int) int {
	switch {
	case s.sweep != nil:
		return 0
	case s.slots == nil:
		return 1
	}
	return int(s.slots[i])
}

// Share is the long-run fraction of positions that go to endpoint i.
func (s *Schedule) Share(i int) float64 {
	if s.sweep != nil {
		return s.sweep.share(i)
	}
	return float64(s.Slots(i)) / float64(s.length)
}

// Sweeps says that the order is a sweep rather than a cycle.
func (s *Schedule) Sweeps() bool { return s.sweep != nil }

// SameOrder reports whether s is the order prev was, so that a rebuilt
// picker may continue from its predecessor's position. A sweep never is,
// nor a nil prev.
func (s *Schedule) SameOrder(prev *Schedule) bool {
	return prev != nil && s.sweep == nil && prev.sweep == nil && s.length == prev.length && slices.Equal(s.slots, prev.slots)
}

// exactLimit is the longest exact cycle over n endpoints: longer, it
// would cost more to build than the quantized cycle or the sweep.
func exactLimit(n int) uint64 {
	return uint64(min(max(maxCycle, exactPerEndpoint*n), maxExactCycle))
}

// exactSlots returns weight/GCD for each endpoint when every usable
// weight is an integer and the cycle fits exactLimit, else nil. It stops
// at the first prefix whose cycle is too long, and allocates only once
// the cycle fits.
func exactSlots(weights []float64) []uint32 {
	limit := exactLimit(len(weights))
	var g, hi, lo, unusable uint64 // hi:lo is the sum, in 128 bits
	for _, w := range weights {
		if !usable(w) {
			unusable++
			continue
		}
		r := math.Round(w)
		if r < 1 || r > maxExactWeight || math.Abs(w-r) > intTolerance {
			return nil
		}
		g = gcd(g, uint64(r))
		var carry uint64
		lo, carry = bits.Add64(lo, uint64(r), 0)
		hi += carry
		if mhi, mlo := bits.Mul64(limit, g); hi > mhi || hi == mhi && lo > mlo {
			return nil
		}
	}
	total := unusable
	if g != 0 {
		if hi >= g {
			return nil // the quotient does not even fit 64 bits
		}
		q, _ := bits.Div64(hi, lo, g)
		if q > limit {
			return nil
		}
		total += q
	}
	if total > limit {
		return nil
	}
	slot := func(w float64) uint64 {
		if g != 0 && usable(w) {
			return uint64(math.Round(w)) / g
		}
		return 1
	}
	slots := make([]uint32, len(weights))
	for i, w := range weights {
		slots[i] = uint32(slot(w))
	}
	return slots
}

// holds reports whether s, a quantized cycle over as many endpoints,
// gives each within one slot of its ideal count for weights, and a
// light endpoint (under 8 slots) within an eighth of it.
func (s *Schedule) holds(weights []float64) bool {
	if !s.quantized || len(s.slots) != len(weights) {
		return false
	}
	maxW, sum := weightScale(weights)
	target := float64(targetLen(len(weights)))
	for i, w := range weights {
		ideal := idealCount(w, maxW, target, sum)
		if math.Abs(float64(s.slots[i])-ideal) > min(1-1e-9, max(0.5, ideal/8)) {
			return false
		}
	}
	return true
}

// quantizedSlots fills slots with each weight's rounded ideal count.
func quantizedSlots(weights []float64, slots []uint32) {
	maxW, sum := weightScale(weights)
	target := float64(targetLen(len(weights)))
	for i, w := range weights {
		slots[i] = uint32(math.Round(idealCount(w, maxW, target, sum)))
	}
}

// idealCount is w's share of target slots, at least one (also when
// w/maxW underflows), and one for an unusable weight.
func idealCount(w, maxW, target, sum float64) float64 {
	if !usable(w) {
		return 1
	}
	return max(1, w/maxW*target/sum)
}

func gcd(a, b uint64) uint64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// fastmodMultiplier is ceil(2^64/d) for fastmod; 0 for d = 1, still right.
func fastmodMultiplier(d uint64) uint64 {
	return ^uint64(0)/d + 1
}

// fastmod is x mod d for 0 < d < 2^32, exactly, without a division
// (Lemire, Kaser and Kurz, 2019).
func fastmod(x uint32, m, d uint64) uint64 {
	hi, _ := bits.Mul64(m*uint64(x), d)
	return hi
}

// phaseOf is endpoint i's phase in (0, 1), fixed point: the golden
// sequence frac((i+1)*0.618...), nudged off zero.
func phaseOf(i int) uint64 {
	p := (uint64(i) + 1) * golden >> (64 - phaseBits)
	return max(p, 1)
}

// fill writes the cycle into table (len(table) = sum of slots), ordered
// by due time with ties to the lower endpoint index. It bucket-sorts by
// floor(due*L), then sorts within buckets, which hold one slot on average.
func fill(table []uint16, slots []uint32) {
	l := uint64(len(table))
	phase := make([]uint64, len(slots))
	for i := range phase {
		phase[i] = phaseOf(i)
	}
	// end[b+1] counts bucket b; the prefix sum makes end[b] its start,
	// and the scatter advances it to its end.
	end := make([]uint32, l+1)
	for i, c := range slots {
		q, r, qs, rs, den := bucketWalk(phase[i], uint64(c), l)
		for range c {
			end[q+1]++
			q, r = bucketStep(q, r, qs, rs, den)
		}
	}
	for b := 1; b <= int(l); b++ {
		end[b] += end[b-1]
	}
	// A slot is endpoint<<32 | k, so its due time can be recomputed.
	order := make([]uint64, l)
	for i, c := range slots {
		q, r, qs, rs, den := bucketWalk(phase[i], uint64(c), l)
		for k := range uint64(c) {
			order[end[q]] = uint64(i)<<32 | k
			end[q]++
			q, r = bucketStep(q, r, qs, rs, den)
		}
	}
	lo := uint32(0)
	for _, hi := range end[:l] {
		switch {
		case hi-lo > insertionMax:
			sortLarge(order[lo:hi], phase, slots)
		case hi-lo > 1:
			// Insertion sort, inline: a call per bucket costs more.
			for x := lo + 1; x < hi; x++ {
				e := order[x]
				y := x
				for y > lo && slotBefore(e, order[y-1], phase, slots) {
					order[y] = order[y-1]
					y--
				}
				order[y] = e
			}
		}
		lo = hi
	}
	for p, v := range order {
		table[p] = uint16(v >> 32)
	}
}

// bucketWalk starts walking the buckets of one endpoint's s slots,
// floor((k + phase/D) * L / s): q_0, its remainder over den, and the
// steps of both. Integers, so no rounding breaks monotonicity.
func bucketWalk(phase, s, l uint64) (q, r, qs, rs, den uint64) {
	den = s * phaseOne
	a := phase * l // < 2^54
	return a / den, a % den, l / s, l % s * phaseOne, den
}

// bucketStep advances a walk by one slot.
func bucketStep(q, r, qs, rs, den uint64) (uint64, uint64) {
	q += qs
	r += rs
	if r >= den {
		r -= den
		q++
	}
	return q, r
}

// slotBefore orders two packed slots by exact due time, ties to the
// lower endpoint index; the products stay below 2^62.
func slotBefore(a, b uint64, phase []uint64, slots []uint32) bool {
	ia, ib := a>>32, b>>32
	na := (a&math.MaxUint32)*phaseOne + phase[ia]
	nb := (b&math.MaxUint32)*phaseOne + phase[ib]
	l, r := na*uint64(slots[ib]), nb*uint64(slots[ia])
	return l < r || l == r && ia < ib
}

// insertionMax is the largest bucket sorted by insertion.
const insertionMax = 12

// sortLarge sorts an unusually full bucket, keeping the worst case
// O(m log m).
func sortLarge(v []uint64, phase []uint64, slots []uint32) {
	slices.SortFunc(v, func(a, b uint64) int {
		switch {
		case slotBefore(a, b, phase, slots):
			return -1
		case slotBefore(b, a, phase, slots):
			return 1
		}
		return 0
	})
}
