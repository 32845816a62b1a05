package engine

import (
	"math/bits"
	"sync/atomic"
	"unsafe"
)

// MaxChoices is the most candidates a d-choice picker samples. gRFC A48
// clamps least_request's choice_count to 10: beyond that the gain over two
// choices is negligible and every pick pays for each extra read.
const MaxChoices = 10

// reduce maps a uniform 32-bit value onto [0, n) without division (Lemire's
// multiply-shift); the bias is below n/2^32, invisible at any fleet size.
func reduce(x uint32, n int) int {
	return int((uint64(x) * uint64(n)) >> 32)
}

// sampleDistinct writes d distinct indices in [0, n) into out, first
// (the turn's, see turns) then d-1 drawn, in the order drawn, and returns
// out[:d]. Requires 2 <= d <= MaxChoices, d < n and 0 <= first < n.
//
// Each drawn index is uniform over the ones not yet taken: draw x among
// the n-k remaining positions, then step x over the k taken indices (kept
// sorted) that are <= x. The cost is O(d^2) comparisons on a stack array,
// independent of n, with no rejection loop.
func sampleDistinct(rnd Rand, n, d, first int, out *[MaxChoices]int) []int {
	var sorted [MaxChoices]int
	sorted[0], out[0] = first, first
	var bits uint64
	for k := 1; k < d; k++ {
		// One 64-bit draw feeds two indices.
		if k%2 == 1 {
			bits = rnd.Uint64()
		} else {
			bits >>= 32
		}
		x := reduce(uint32(bits), n-k)
		pos := 0
		for pos < k && sorted[pos] <= x {
			x++
			pos++
		}
		copy(sorted[pos+1:k+1], sorted[pos:k])
		sorted[pos] = x
		out[k] = x
	}
	return out[:d]
}

// cacheLine is the coherence unit of the CPUs pickwise runs on (x86-64,
// arm64 servers).
const cacheLine = 64

// pairFrom is a pair of distinct indices in [0, n), n >= 2, from one
// 64-bit draw, with spare randomness: the low halves of the two
// multiply-shift products, which the reduction discards. Each is uniform
// over its 32 bits but for its low log2(n) bits, whatever index it gave,
// so their XOR's top 24 bits are a uniform draw independent of the pair.
// A pick that needs a coin (a close call) takes it from there instead of
// drawing again.
func pairFrom(bits uint64, n int) (i, j int, spare uint32) {
	lo, hi := uint64(uint32(bits))*uint64(n), uint64(uint32(bits>>32))*uint64(n-1)
	i, j = int(lo>>32), int(hi>>32)
	if j >= i {
		j++
	}
	return i, j, uint32(lo) ^ uint32(hi)
}

// pairAfter is the pair whose first candidate is first, the turn's (see
// turns), and whose second is drawn uniformly from the other n-1
// endpoints by the high half of bits; the low half, unused, is the spare
// coin, uniform over all its bits.
func pairAfter(first int, bits uint64, n int) (i, j int, spare uint32) {
	j = int((uint64(uint32(bits>>32)) * uint64(n-1)) >> 32)
	if j >= first {
		j++
	}
	return first, j, uint32(bits)
}

// turns is a balancer's choice of first candidate for its d-choice
// pickers: drawn at random while few endpoints have this client's calls
// in flight, and taken in round-robin turn while many do
// (docs/design/d-choice.md). Its words are on a line of their own, the
// only one every pick may write; the line also holds Peak EWMA's recent
// clock reading.
type turns struct {
	next  atomic.Uint32 // the turn counter, while in turn
	busy  atomic.Uint32 // the share of random candidates found busy, in units of 1/busyOne
	clock recentClock
	_     [cacheLine - 8 - unsafe.Sizeof(recentClock{})]byte
}

const (
	// busyOne is a busy estimate of 1: every random candidate busy.
	busyOne = 1 << 16
	// turnAbove is the busy estimate above which first candidates take
	// turns: a quarter. Below it, at most one random pair in sixteen is
	// busy on both sides; above it, the share of calls that meet two busy
	// candidates grows with its square, and the thin-signal fleets that a
	// turn would blind (one client of hundreds) read well below it.
	turnAbove = busyOne / 4
	// busySampling is how rarely a pick updates the estimate: one in 16,
	// so that the shared line is written by few picks while in random
	// mode; with busyGain that averages over the last 256 picks or so.
	busySampling = 15
	busyGain     = 4 // each update moves the estimate 1/16 of the way
)

// newTurns returns turns that draw first candidates at random until a
// quarter of the random candidates they are shown are busy.
func newTurns() *turns { return &turns{} }

// inTurn says whether first candidates take turns.
func (t *turns) inTurn() bool { return t.busy.Load() > turnAbove }

// take returns the next turn's index in [0, n), by a multiply-based
// remainder with magic = modMagic(n) (Lemire's fastmod): a division costs
// more than the rest of a pick's arithmetic. When the counter wraps, one
// turn is out of step unless n divides 2^32, which is invisible.
func (t *turns) take(n int, magic uint64) int {
	x := t.next.Add(1)
	hi, _ := bits.Mul64(magic*uint64(x), uint64(n))
	return int(hi)
}

// observe folds whether a random candidate was busy into the estimate, on
// the picks whose coin's bits 8-11 are zero. The load and store are not
// one atomic step: two picks updating at once may lose one update, which
// an estimate can afford, and a locked add per pick would cost more.
//
// When the estimate crosses into turns, the turns start from the coin: at
// a random endpoint, so that clients that change mode together do not walk
// the fleet in step, and without a draw of its own, so that a seeded run
// that never takes turns draws what it drew before turns existed.
func (t *turns) observe(busy bool, coin uint32) {
	if !lotteryWinner(coin) {
		return
	}
	e := int32(t.busy.Load())
	target := int32(0)
	if busy {
		target = busyOne
	}
	next := e + (target-e)>>busyGain
	if next == e {
		// Settled (an idle fleet's estimate stays at 0): a store of the
		// same value would still take the line from every other core.
		return
	}
	if e <= turnAbove && next > turnAbove {
		t.next.Store(coin)
	}
	t.busy.Store(uint32(next))
}

// lotteryWinner reports whether a pick whose spare randomness is coin is
// one of the one in 16 that update the busy estimate and refresh the
// recent clock reading: its coin's bits 8-11 are zero.
func lotteryWinner(coin uint32) bool { return coin>>8&busySampling == 0 }

// modMagic is take's constant for n >= 1.
func modMagic(n int) uint64 { return ^uint64(0)/uint64(n) + 1 }

// aliasTable draws an index in [0, n) in proportion to its weight, in
// constant time from one 64-bit draw (Walker's alias method, built by
// Vose's): the high half picks a column uniformly, and the low half keeps
// the column's own index with its probability, or takes its alias. A
// cumulative table's binary search would read log2(n) lines a draw.
type aliasTable []aliasColumn

// aliasColumn is one column of an aliasTable: its own index is kept if
// the draw's low half is below keep (a probability in units of 2^-32), and
// alias taken otherwise. A column kept whatever the draw is its own alias.
type aliasColumn struct{ keep, alias uint32 }

// newAliasTable returns the table over n > 0 positive weights, weight(i)
// the i-th.
func newAliasTable(n int, weight func(i int) float64) aliasTable {
	total := 0.0
	for i := 0; i < n; i++ {
		total += weight(i)
	}
	t := make(aliasTable, n)
	// Each column holds one n-th of the mass: scaled[i] is weight i's mass
	// in columns. Small columns are topped up from large ones until every
	// one holds exactly one column's worth.
	scaled := make([]float64, n)
	small, large := make([]int, 0, n), make([]int, 0, n)
	for i := range scaled {
		scaled[i] = weight(i) * float64(n) / total
		if scaled[i] < 1 {
			small = append(small, i)
		} else {
			large = append(large, i)
		}
	}
	for len(small) > 0 && len(large) > 0 {
		s, l := small[len(small)-1], large[len(large)-1]
		small, large = small[:len(small)-1], large[:len(large)-1]
		t[s] = aliasColumn{keep: uint32(scaled[s] * (1 << 32)), alias: uint32(l)}
		scaled[l] -= 1 - scaled[s]
		if scaled[l] < 1 {
			small = append(small, l)
		} else {
			large = append(large, l)
		}
	}
	// What is left is full, up to rounding.
	for _, i := range append(small, large...) {
		t[i] = aliasColumn{alias: uint32(i)}
	}
	return t
}

// draw maps a uniform 64-bit value to an index.
func (t aliasTable) draw(bits uint64) int {
	col := reduce(uint32(bits>>32), len(t))
	if c := t[col]; uint32(bits) >= c.keep {
		return int(c.alias)
	}
	return col
}
