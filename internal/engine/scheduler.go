package engine

import (
	"math"
	"math/bits"
	"slices"

	"github.com/pickwise/pickwise/internal/mix"
)

// This file is the smooth weighted round-robin schedule that weight-following
// policies (pickwise_orca_wrr, static weights) pick from.
//
// Two smooth schedulers are well known: NGINX's running-credit loop and
// Envoy's earliest-deadline-first queue. Both interleave heavy and light
// endpoints instead of bursting, but both mutate shared state on every pick,
// so a concurrent picker would need a lock. Here the whole cycle is
// precomputed once per weight change into an immutable table, and a pick is
// a table read at a position derived from the caller's atomic counter (or,
// past schedMaxCycle, a point of the sweep in sweep.go).
//
// Slot counts. If every weight is an integer and the reduced total
// (sum/GCD) is at most schedExactLimit(n), endpoint i gets exactly
// weight_i/GCD slots, so {5,1,1} is a cycle of 7. Otherwise the weights are
// quantized to a cycle of about T = schedTarget(n) slots: endpoint i gets
// s_i = max(1, round(w_i*T/W)) where W is the sum of the weights. The floor of
// one slot keeps every READY endpoint reachable, however small its weight.
// A quantized cycle longer than schedMaxCycle is not built: the schedule
// sweeps instead (sweep.go).
//
// Quantization error. Let p_i = w_i/W, x_i = p_i*T (the ideal count),
// d_i = s_i - x_i and L = sum s_i = T + D with D = sum d_i. Rounding gives
// |d_i| <= 1/2, or 1/2 < d_i <= 1 for an endpoint lifted to the one-slot
// floor, so -n/2 <= D <= n and L >= T - n/2. The share error is
//
//	|s_i/L - p_i| = |d_i - p_i*D| / L <= (1 + n*p_i) / (T - n/2),
//
// and for an endpoint that is not floored (x_i >= 1/2) the relative error is
//
//	|s_i/(L*p_i) - 1| <= (1/(2*x_i) + n/T) / (1 - n/(2*T)).
//
// With T >= 32n (every fleet a quantized table serves), an endpoint of average
// weight (x_i = T/n >= 32) is within 3/63 ~= 4.8% of its share, and heavier
// ones are closer. That is the adversarial worst case, in which every other
// endpoint rounds the same way; independent rounding errors mostly cancel and
// the observed error is far smaller (see TestScheduleQuantizedShares).
//
// Held cycles. A picker rebuilt over weights that drifted a little since
// the last one keeps the last one's quantized cycle (NewScheduleAfter)
// while every endpoint's count is still within one slot of its ideal,
// and within an eighth of it for an endpoint of fewer than 8 slots (but
// for fresh rounding's half slot): |d_i| < 1 instead of 1/2, so
// -n < D < n, L > T - n, and an endpoint of average weight is within
// (1/32 + 1/32)/(31/32) = 2/31 ~= 6.5% of its share at worst (a bound,
// not a tight one). Smoothed backend weights drift by parts in a
// thousand from one update to the next, and held, they keep the order
// (and the pickers' positions in it) for dozens of updates, where fresh
// rounding moved some endpoint's slot at about every other one over a
// dozen endpoints, and at most over a hundred.
//
// Order. Endpoint i's k-th slot (k = 0..s_i-1) is due at virtual time
// (k + phi_i)/s_i, and the cycle lists all slots by due time, ties to the
// lower endpoint index. The phase phi_i = frac((i+1)/golden ratio) is a
// low-discrepancy sequence: without it every endpoint's first slot would be
// due at time 0, so equal-weight endpoints would bunch at the start of the
// cycle and runs of the heavy endpoint would gather at the end. Times are
// compared exactly in integers (phases are fixed point), which makes the
// order deterministic on every platform and the gap bound below a theorem
// rather than an approximation. Equal weights are the exception: one slot
// each, in index (resolver) order, as grpc-go's round_robin walks them,
// with no table at all.
//
// Gap bound. Before a slot of endpoint i due at time t stand
// ceil(t*s_j - phi_j) slots of each endpoint j > i (which lose ties to i) and
// floor(t*s_j - phi_j) + 1 slots of each j < i (which win them), counting
// across cycles, i.e. in the infinite repetition of the cycle. Between two consecutive slots of i, t grows by 1/s_i, so each
// other endpoint j contributes either floor(s_j/s_i) or ceil(s_j/s_i) slots,
// and i itself exactly one. Summing, every cyclic gap g between consecutive
// occurrences of i satisfies
//
//	|g - L/s_i| < m_i <= n-1,
//
// where m_i counts the endpoints j != i for which s_j/s_i is not an integer;
// when m_i = 0 every gap is exactly L/s_i. For {5,1,1} the cycle is
// 0 1 0 0 0 2 0: no run of endpoint 0 longer than 3 even cyclically (the
// least possible, since two other slots split five), and the two light
// endpoints never adjacent.

// Schedule is an immutable smooth weighted round-robin order over n endpoints.
//
// It is safe for concurrent use: nothing in it changes after NewSchedule.
type Schedule struct {
	// Immutable after NewSchedule.

	// table holds the cycle. Its indices fit in 16 bits: every endpoint
	// holds a slot at least, and no table is longer than
	// schedMaxExactCycle (65,536) entries. It is nil when every weight is
	// the same: the cycle is then the endpoints in order, one slot each,
	// and a change to a fleet of any size rebuilds it in O(1).
	table []uint16
	// length is the cycle length L, and mult its Lemire fastmod multiplier,
	// so Next reduces seq modulo L with two multiplications.
	length uint64
	mult   uint64
	// slots[i] is how many positions of the cycle belong to endpoint i;
	// nil, like table, when every weight is the same (one position each).
	slots []uint32
	// quantized says that slots round the weights to a cycle of about
	// schedTarget slots, rather than honour integer weights exactly: a
	// cycle that a rebuild may hold (holds).
	quantized bool
	// sweep, when not nil, is the order instead of a cycle: for a large
	// fleet whose weights need a cycle longer than schedMaxCycle (see
	// sweep.go). The fields above are then zero.
	sweep *sweep
}

const (
	// schedExactPerEndpoint and schedMaxExactCycle cap the cycle that
	// honours integer weights exactly (see schedExactLimit).
	schedExactPerEndpoint = 4
	schedMaxExactCycle    = 1 << 16
	// schedIntTolerance is how far from an integer a weight may be and still
	// count as one: weights that went through float arithmetic (xDS, JSON)
	// may carry representation error.
	schedIntTolerance = 1e-9
	// schedMaxExactWeight bounds weights treated as integers. Above 2^53 a
	// float64 has no fractional bits, so "integer" says nothing, and the
	// conversion to uint64 must stay in range.
	schedMaxExactWeight = 1 << 53

	// schedMinTarget, schedSlotsPerEndpoint and schedMaxTarget define the
	// quantized cycle length T; see schedTarget.
	schedMinTarget        = 1024
	schedSlotsPerEndpoint = 32
	schedMaxTarget        = 1 << 20

	// schedPhaseBits is the fixed-point precision of the phases. A slot's due
	// time is (k*2^bits + phase)/(s*2^bits) with k < s <= schedMaxTarget, so
	// cross-multiplying two of them stays below 2^(20+22+20) = 2^62: exact
	// comparisons in uint64.
	schedPhaseBits = 22
	schedPhaseOne  = 1 << schedPhaseBits
	// schedGolden is 2^64 divided by the golden ratio: multiplying by it
	// steps a 64-bit fixed-point fraction by 0.6180339887..., the additive
	// sequence that spreads any prefix of its points most evenly over [0,1).
	schedGolden = mix.Golden
)

// schedTarget is the quantized cycle length T for n endpoints:
// max(32n, 1024), capped at 1<<20.
//
// 32 slots for an endpoint of average weight keeps its rounding error within
// 1/64 of its share. The floor of 1024 gives small fleets with fractional
// weights (say {1.5, 1}) sub-0.1% precision for free. A quantized table is
// built only up to schedMaxCycle entries (128 endpoints), so the cap
// matters only to the tests that exercise the quantization.
func schedTarget(n int) int {
	return min(max(schedSlotsPerEndpoint*n, schedMinTarget), schedMaxTarget)
}

// NewSchedule builds the order for weights (one per endpoint, index =
// endpoint index). Every weight should be > 0 and finite, and the caller
// guarantees it; a zero, negative, NaN or infinite weight nevertheless does
// not panic but gets the smallest positive share, one slot, so one bad weight
// report can neither take an endpoint out of rotation nor hand it the cycle.
//
// Building takes O(L + n) time for typical weights (O(L log n) at worst) and
// O(L + n) memory for a cycle of L slots: tens of microseconds for the
// largest table (schedMaxCycle), cheap enough to rebuild on every weight
// update. A quantized cycle longer than schedMaxCycle (weights that are
// not small integers, over more than 128 endpoints) is not built: the
// schedule sweeps instead (sweep.go), O(n) to build. A single endpoint gets a
// one-slot cycle whatever its weight.
// NewSchedule panics if weights is empty, because there is no order to
// follow.
func NewSchedule(weights []float64) *Schedule { return NewScheduleAfter(weights, nil) }

// NewScheduleAfter is NewSchedule for the picker rebuilt after one that
// followed prev (nil: none). Where NewSchedule would quantize, and prev
// is a quantized cycle over as many endpoints that gives each of them
// within one slot of its ideal count for weights (see "Held cycles"),
// it returns prev itself, in O(n) and allocating nothing.
func NewScheduleAfter(weights []float64, prev *Schedule) *Schedule {
	n := len(weights)
	if n == 0 {
		panic("engine: NewSchedule needs at least one weight")
	}
	if schedEqual(weights) {
		// The exact cycle would be every endpoint once, in the order of
		// their phases; in index order it is as smooth, and needs no table.
		return &Schedule{length: uint64(n), mult: schedFastmodMultiplier(uint64(n))}
	}
	var slots []uint32
	quantized := false
	if n == 1 {
		// Quantizing a lone fractional weight would build a table of T
		// copies of endpoint 0.
		slots = []uint32{1}
	} else if slots = schedExactSlots(weights); slots == nil {
		if schedTarget(n) > schedMaxCycle {
			return &Schedule{sweep: newSweep(weights, schedSlotsPerEndpoint*n)}
		}
		if prev != nil && prev.holds(weights) {
			return prev
		}
		slots = make([]uint32, n)
		schedQuantizedSlots(weights, slots)
		quantized = true
	}
	var length uint64
	for _, c := range slots {
		length += uint64(c)
	}
	s := &Schedule{
		length:    length,
		mult:      schedFastmodMultiplier(length),
		slots:     slots,
		quantized: quantized,
	}
	s.table = make([]uint16, length)
	schedFill(s.table, slots)
	return s
}

// Next returns the endpoint index at position seq of the cyclic order. The
// caller keeps an atomic counter (a WeightedRR picker's starts at a
// random value, or where its predecessor's stood; once spread, it keeps
// one per P) and passes counter.Add(1); Next is O(1), takes
// no lock, allocates nothing, and is safe for concurrent use.
//
// The position is seq mod Len, computed without a division. Because 2^32 is
// generally not a multiple of Len, the order jumps back to position 0 when
// the uint32 counter wraps, cutting one cycle short once every 2^32 picks.
// The cut cycle is a prefix of a smooth order, so each endpoint's count in it
// is still within 1 + n*Slots(i)/Len of its proportional share: noise, once
// in four billion picks. A sweep wraps the same way.
func (s *Schedule) Next(seq uint32) int {
	if s.sweep != nil {
		return s.sweep.next(seq)
	}
	pos := schedFastmod(seq, s.mult, s.length)
	if s.table == nil {
		return int(pos)
	}
	return int(s.table[pos])
}

// schedEqual reports whether every weight is the same (NaN never is), so
// that each endpoint's share is one slot in n whatever the weight.
func schedEqual(weights []float64) bool {
	for _, w := range weights[1:] {
		if w != weights[0] {
			return false
		}
	}
	return weights[0] == weights[0]
}

// Len is the length of one full cycle of the order, 0 for a sweep.
func (s *Schedule) Len() int { return int(s.length) }

// Slots returns how many positions of one cycle go to endpoint i (for tests
// and metrics), 0 for a sweep. i must be in [0, n).
func (s *Schedule) Slots(i int) int {
	switch {
	case s.sweep != nil:
		return 0
	case s.slots == nil:
		return 1
	}
	return int(s.slots[i])
}

// Share is the fraction of positions that go to endpoint i, in the long
// run. i must be in [0, n).
func (s *Schedule) Share(i int) float64 {
	if s.sweep != nil {
		return s.sweep.share(i)
	}
	return float64(s.Slots(i)) / float64(s.length)
}

// Sweeps says that the order is a sweep rather than a cycle (sweep.go).
func (s *Schedule) Sweeps() bool { return s.sweep != nil }

// sameOrder reports whether s is the order prev was: the same slots for
// every endpoint index, so the same table. A sweep never is: its arcs
// move with any weight. A picker rebuilt over the same order takes up its
// predecessor's position (WeightedRR.continueFrom), so that each
// endpoint's next slot is as far ahead as it was; over another order an
// endpoint's slots have moved, by up to its period, and a position
// carried over would mean no more than a random one. A nil prev (none
// kept) is no order.
func (s *Schedule) sameOrder(prev *Schedule) bool {
	return prev != nil && s.sweep == nil && prev.sweep == nil && s.length == prev.length && slices.Equal(s.slots, prev.slots)
}

// schedExactLimit is the longest exact cycle over n endpoints: what a
// table costs little to build (schedMaxCycle), or a few entries an
// endpoint, so that nearly equal integer weights keep an exact cycle
// (whose build is O(n) then) up to 65,536 endpoints, the table's 16-bit
// indices (equal weights need no table at any size). Longer, an exact cycle would cost more build time than
// the quantized cycle or the sweep, on every change, without a
// meaningfully better split.
func schedExactLimit(n int) uint64 {
	return uint64(min(max(schedMaxCycle, schedExactPerEndpoint*n), schedMaxExactCycle))
}

// schedExactSlots returns weight/GCD for each endpoint when every usable
// weight is an integer and the reduced cycle fits schedExactLimit, and nil
// otherwise. Unusable weights get one slot: the smallest share that still
// keeps the endpoint in rotation. It allocates only once it knows the
// cycle fits: over a large fleet with fractional weights, which sweep,
// the slots would be garbage.
func schedExactSlots(weights []float64) []uint32 {
	// One pass finds the GCD and the sum of the weights, in 128 bits so
	// that no sum of weights up to 2^53 overflows; the cycle's length is
	// that sum over the GCD, plus a slot for each unusable weight.
	//
	// The cycle of a prefix of the weights is never longer than the whole
	// one's (the sum only grows, the GCD only shrinks), so the pass stops
	// as soon as a prefix's cycle is past the limit: over a large fleet
	// with integer weights too far apart for an exact cycle (reported
	// weights rounded to integers, say), a few hundred weights tell, not
	// all of them.
	limit := schedExactLimit(len(weights))
	var g, hi, lo, unusable uint64
	for _, w := range weights {
		if !schedUsable(w) {
			unusable++
			continue
		}
		r := math.Round(w)
		if r < 1 || r > schedMaxExactWeight || math.Abs(w-r) > schedIntTolerance {
			return nil
		}
		g = schedGCD(g, uint64(r))
		var carry uint64
		lo, carry = bits.Add64(lo, uint64(r), 0)
		hi += carry
		// lo/g > limit, without a division: limit*g is below 2^70, so
		// its high word is 0 but for g above 2^48.
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
		if g != 0 && schedUsable(w) {
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

// holds reports whether s, a quantized cycle over as many endpoints as
// weights, still gives each endpoint close enough to its ideal count for
// weights, the count schedQuantizedSlots rounds: within one slot, and
// within an eighth of the ideal count, but for the half slot fresh
// rounding may leave, for a light endpoint (fewer than 8 slots), where a
// whole slot would be a large part of its share. An unusable weight's
// one slot is its ideal count. Every cycle it builds holds for its own
// weights.
func (s *Schedule) holds(weights []float64) bool {
	if !s.quantized || len(s.slots) != len(weights) {
		return false
	}
	maxW, sum := schedScale(weights)
	target := float64(schedTarget(len(weights)))
	for i, w := range weights {
		ideal := schedIdealCount(w, maxW, target, sum)
		if math.Abs(float64(s.slots[i])-ideal) > min(1-1e-9, max(0.5, ideal/8)) {
			return false
		}
	}
	return true
}

// schedQuantizedSlots fills slots with max(1, round(w_i*T/W)) for usable
// weights and 1 for the rest (see the quantization note at the top of the
// file).
func schedQuantizedSlots(weights []float64, slots []uint32) {
	maxW, sum := schedScale(weights)
	target := float64(schedTarget(len(weights)))
	for i, w := range weights {
		slots[i] = uint32(math.Round(schedIdealCount(w, maxW, target, sum)))
	}
}

// schedIdealCount is the count of a quantized cycle's target slots that
// weight w asks for, given schedScale's maxW and sum: its share of them,
// at least one (a weight so small that w/maxW underflows still gets its
// slot), and one for an unusable weight. schedQuantizedSlots rounds it;
// holds compares a kept cycle's slots with it.
func schedIdealCount(w, maxW, target, sum float64) float64 {
	if !schedUsable(w) {
		return 1
	}
	return max(1, w/maxW*target/sum)
}

// schedGCD is Euclid's algorithm; schedGCD(0, x) = x starts the fold.
func schedGCD(a, b uint64) uint64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// schedFastmodMultiplier is Lemire's precomputed multiplier ceil(2^64/d) for
// schedFastmod. It wraps to 0 for d = 1, which is still right: every seq
// maps to position 0.
func schedFastmodMultiplier(d uint64) uint64 {
	return ^uint64(0)/d + 1
}

// schedFastmod returns x mod d for any 32-bit x and 0 < d < 2^32 (Lemire,
// Kaser and Kurz, "Faster Remainder by Direct Computation", 2019): m*x keeps
// the fractional part of x/d in 64 bits, and multiplying it by d moves the
// remainder into the high word. It is exact, not approximate, because the
// 64-bit multiplier carries twice the bits of the numerator.
func schedFastmod(x uint32, m, d uint64) uint64 {
	hi, _ := bits.Mul64(m*uint64(x), d)
	return hi
}

// schedPhase is endpoint i's phase in fixed point, in (0, 1): the golden
// sequence frac((i+1)*0.618...). Zero is nudged up to keep every phase
// strictly positive, which only matters if the sequence ever lands on it.
func schedPhase(i int) uint64 {
	p := (uint64(i) + 1) * schedGolden >> (64 - schedPhaseBits)
	return max(p, 1)
}

// schedFill writes the cycle into table (len(table) = L = sum of slots),
// ordered by due time with ties to the lower endpoint index.
//
// A comparison sort of all L slots would cost O(L log L); a heap merging the
// n per-endpoint sequences, O(L log n) but with a branchy sift per slot. A
// bucket sort does better: the bucket of a slot due at t is floor(t*L),
// which is monotone in t, so sorting the buckets one by one sorts the cycle.
// Slots of one endpoint are 1/s_j > 1/L apart (s_j < L whenever n >= 2), so
// a bucket holds at most one slot per endpoint, and L buckets for L slots
// hold one on average. The build is O(L + n) for typical weights and
// O(L log n) in the worst case, where weights conspire with the phases to
// make many slots fall due together.
func schedFill(table []uint16, slots []uint32) {
	l := uint64(len(table))
	phase := make([]uint64, len(slots))
	for i := range phase {
		phase[i] = schedPhase(i)
	}
	// end[b+1] counts bucket b, then the prefix sum turns end[b] into the
	// start of bucket b, and the scatter advances it to the bucket's end.
	end := make([]uint32, l+1)
	for i, c := range slots {
		q, r, qs, rs, den := schedBucketWalk(phase[i], uint64(c), l)
		for range c {
			end[q+1]++
			q, r = schedBucketStep(q, r, qs, rs, den)
		}
	}
	for b := 1; b <= int(l); b++ {
		end[b] += end[b-1]
	}
	// A slot is packed as endpoint<<32 | k so the in-bucket sort can
	// recompute its exact due time.
	order := make([]uint64, l)
	for i, c := range slots {
		q, r, qs, rs, den := schedBucketWalk(phase[i], uint64(c), l)
		for k := range uint64(c) {
			order[end[q]] = uint64(i)<<32 | k
			end[q]++
			q, r = schedBucketStep(q, r, qs, rs, den)
		}
	}
	lo := uint32(0)
	for _, hi := range end[:l] {
		switch {
		case hi-lo > schedInsertionMax:
			schedSortLarge(order[lo:hi], phase, slots)
		case hi-lo > 1:
			// Insertion sort, inline: buckets almost always hold one to three
			// slots, and a call per bucket would cost more than the sort.
			for x := lo + 1; x < hi; x++ {
				e := order[x]
				y := x
				for y > lo && schedSlotBefore(e, order[y-1], phase, slots) {
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

// schedBucketWalk starts walking one endpoint's slots k = 0..s-1, whose
// buckets are q_k = floor((k + phase/D) * L / s), D = schedPhaseOne. It
// returns q_0 with its remainder r over den = s*D, and the per-slot steps of
// both; schedBucketStep then carries quotient and remainder from one slot to
// the next: no division per slot, and no float rounding to break
// monotonicity. (Plain values rather than an iterator struct, which the
// compiler would keep in memory instead of registers.)
func schedBucketWalk(phase, s, l uint64) (q, r, qs, rs, den uint64) {
	den = s * schedPhaseOne
	// phase*l < 2^22 * 2^32 = 2^54: no overflow for any cycle Next accepts.
	a := phase * l
	return a / den, a % den, l / s, l % s * schedPhaseOne, den
}

// schedBucketStep advances a walk by one slot.
func schedBucketStep(q, r, qs, rs, den uint64) (uint64, uint64) {
	q += qs
	r += rs
	if r >= den {
		r -= den
		q++
	}
	return q, r
}

// schedSlotBefore orders two packed slots by exact due time
// (k*D + phase)/(s*D), ties to the lower endpoint index. Cross-multiplying
// stays below 2^62 (see schedPhaseBits).
func schedSlotBefore(a, b uint64, phase []uint64, slots []uint32) bool {
	ia, ib := a>>32, b>>32
	na := (a&math.MaxUint32)*schedPhaseOne + phase[ia]
	nb := (b&math.MaxUint32)*schedPhaseOne + phase[ib]
	l, r := na*uint64(slots[ib]), nb*uint64(slots[ia])
	return l < r || l == r && ia < ib
}

// schedInsertionMax is the largest bucket sorted by insertion; past it the
// quadratic cost would show.
const schedInsertionMax = 12

// schedSortLarge sorts an unusually full bucket (weights aligned with the
// phases, so many slots fall due together) with pdqsort, keeping the worst
// case O(m log m).
func schedSortLarge(v []uint64, phase []uint64, slots []uint32) {
	slices.SortFunc(v, func(a, b uint64) int {
		switch {
		case schedSlotBefore(a, b, phase, slots):
			return -1
		case schedSlotBefore(b, a, phase, slots):
			return 1
		}
		return 0
	})
}
