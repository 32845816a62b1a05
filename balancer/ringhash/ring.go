package ringhash

import (
	"fmt"
	"math"
	"math/bits"
	"slices"
	"time"
)

// This file is the consistent-hash ring (Karger et al.; "ketama"): each
// endpoint owns many points on a circle, and a key belongs to the first
// point at or after its hash, wrapping past the top.
//
// Entries per endpoint. The ring is sized by a budget, not by the spread of
// the weights. Endpoint i gets
//
//	k_i = max(1, round(s * w_i))
//
// entries for one scale s (entries per unit of weight, after the weight
// cap, see capWeights), the first of these that applies:
//
//   - s = ringTargetEntries / u = 128 / u, u the median weight rounded
//     down to a power of two, when the ring then has between minRingSize
//     and maxRingSize entries: an endpoint of median weight gets 128 to
//     255 entries, lighter and heavier ones in proportion;
//   - the smallest s giving at least minRingSize entries, for fleets too
//     small to reach it (fewer than 8 equal endpoints at the defaults);
//   - the largest s giving at most maxRingSize entries, once the fleet or
//     its weights would need more: the budget is then spent in full,
//     whatever n is, to within the rounding. Past maxRingSize/2 endpoints
//     the lightest keep one entry each and the heavier share the rest.
//
// s is a fixed-point integer (units of 2^-40) and the two searches are
// integer bisections to within 2^-10 of s, so every platform builds the
// same ring. The ring's size, and with it the build's time and memory, is
// thus bounded by maxRingSize alone: the default of 131072 entries costs
// at most 0.92 MB plus 4 bytes per endpoint (0.89 MB at 10000 endpoints)
// up to 65536 endpoints, and a weight of 2^32-1 costs no more than equal
// weights do. A weight decides only its own endpoint's share.
//
// Why a power-of-two unit, and 128. An endpoint's positions are a prefix of
// its own hash stream (see derive), so an endpoint whose count does not
// change keeps its positions, and its keys. Below the budget s is 128/u,
// and u moves only when the median crosses a power of two, so adding or
// removing an endpoint, or changing one endpoint's weight, moves only that
// endpoint's keys (TestMovement: 8.9% of keys move when 10 endpoints
// become 11 and 10.2% when 11 become 10, about the ideal 1/11 = 9.1%, none
// between survivors). Envoy and grpc-go instead size the ring to about
// minRingSize whatever n is, so every endpoint's count changes with n, and
// a 10 -> 11 scale-out moves about 17% of keys. Once the budget binds, s
// shrinks as the fleet grows, and an endpoint whose count drops by one
// hands that entry's keys to a neighbour: on average about 1/n of keys
// beyond the ideal per change, the price of a bounded ring. Equal weights
// drop together: 10082 endpoints have 13 entries each, 10083 have 12, and
// that step moves 1/13 of keys between survivors.
//
// Balance. A key's endpoint is endpoint i with probability k_i / T (T the
// ring's entries), with a relative spread of about 1/sqrt(k_i) from where
// the hashes fall: 9% at 128 entries, 28% at the 13 an endpoint gets among
// 10000 equal ones. The quantisation of weights into counts is the smaller
// error: |k_i/T - p_i| <= (1 + n*p_i)/T for the weight share p_i = w_i/W,
// since each k_i is s*w_i rounded, or raised to 1, by at most 1, and T is
// their sum. TestRingTolerance checks both at fleet scale. For exact
// shares at any scale, use Maglev.
//
// Layout. Positions are the top 32 bits of each point's 64-bit hash, and a
// key is compared by the top 32 bits of its own: at 2^17 entries two points
// share a position about twice per ring, a tie that the canonical order
// breaks (the second point owns no keys), and half the width doubles the
// entries a byte buys. The sorted positions and their owners are parallel
// slices (struct of arrays), owners in 16 bits when every endpoint index
// fits, so an entry costs 4 + 2 bytes and the search touches only the
// positions. A bucket index over the positions' top bits (4 to 8 entries a
// bucket, at most 1 byte per entry) turns the binary search over the whole
// ring into one over a few entries, which also removes the cache misses a
// large ring's search costs. Building sorts by the same buckets: a counting
// sort scatters entries into their buckets, then each bucket is
// insertion-sorted, which is linear in the ring size for hashed positions.
//
// Rebuilding. A ring is a pure function of each endpoint's identity hash and
// entry count (its entries are the first k values of its own stream), so a
// new ring can be derived from the last one instead of from nothing. The
// endpoints the two share keep their canonical order, so only new ones are
// sorted in (recanonicalize); entries are removed for endpoints that left
// or shrank and derived only for those that joined or grew, each found in
// the old ring by its bucket index; the old ring is then copied in runs
// between those places, and the bucket index adjusted bucket by bucket. A
// rolling deploy's update, which swaps a few endpoints and mostly keeps the
// scale, so costs a memory copy of the ring rather than deriving and
// scattering every entry again. The old ring is only read:
// a picker may still be using it. The result is the ring a fresh build
// would make, bit for bit (TestRebuildMatchesFresh, TestRebuildTies), and
// an update that changes too many entries for the merge to pay
// (maxMergeShare) is built afresh (BenchmarkRebuild).

const (
	// maxRingSizeLimit is the largest ring either size may ask for:
	// Envoy's upper bound on both fields, 8M entries, which grpc-go
	// enforces too; about 50 MB here.
	maxRingSizeLimit = 8 << 20
	// ringTargetEntries is c while the ring is within its bounds: the
	// entries of an endpoint whose weight is the unit u; see the file
	// comment.
	ringTargetEntries = 128
)

// ring is an immutable consistent-hash ring.
type ring struct {
	// Immutable after newRing.

	// hashes are the ring positions in ascending order; equal positions
	// are ordered by the owners' identities.
	hashes []uint32
	// Exactly one of narrow and wide holds the owners: entry i belongs to
	// the caller's endpoint narrow[i] (or wide[i]).
	narrow []uint16
	wide   []int32
	// index[b] is the first entry whose position's top bits are >= b, for
	// b in [0, 2^bits]; shift is 32 - bits.
	index []uint32
	shift uint
	// sweep is the walk's fallback phase.
	sweep sweep
	// scale and weightCap are what the entry counts were computed from:
	// the endpoint of (uncapped) weight w has ringCount(scale,
	// min(max(w, 1), weightCap)) entries. A rebuild reads the old counts
	// from them rather than from a count kept per endpoint.
	scale     uint64
	weightCap uint32
	// merged says the ring was derived from the previous one rather than
	// built afresh; the two are the same ring, so only tests and
	// benchmarks look.
	merged bool
	// buildTime is how long newRing took.
	buildTime time.Duration
}

var _ table = (*ring)(nil)

// newRing builds a ring over eps with between minRingSize and maxRingSize
// entries (see the file comment for the exact rule), weights capped at
// maxWeightRatio times the median. It fails on an empty or duplicated
// endpoint set, on sizes out of order or above maxRingSizeLimit, and on
// more endpoints than maxRingSize, since every endpoint needs an entry.
func newRing(eps []endpoint, minRingSize, maxRingSize uint64, maxWeightRatio uint32) (*ring, error) {
	return buildRing(eps, minRingSize, maxRingSize, ringTargetEntries, maxWeightRatio)
}

// updateRing is newRing for a set that replaces prevEps, over which prev
// was built (in that order): the same ring, derived from prev where that
// is cheaper (see Rebuilding in the file comment). prev is only read.
func updateRing(prev *ring, prevEps, eps []endpoint, minRingSize, maxRingSize uint64, maxWeightRatio uint32) (*ring, error) {
	return rebuildRing(prev, prevEps, eps, minRingSize, maxRingSize, ringTargetEntries, maxWeightRatio)
}

// buildRing is newRing with c's first choice as a parameter, so that tests
// can build the ring Envoy and grpc-go would (target 1: about minRingSize
// entries whatever n is) and compare.
func buildRing(eps []endpoint, minRingSize, maxRingSize, target uint64, maxWeightRatio uint32) (*ring, error) {
	return rebuildRing(nil, nil, eps, minRingSize, maxRingSize, target, maxWeightRatio)
}

// rebuildRing is buildRing starting from prev, built over prevEps, when
// prev is not nil.
func rebuildRing(prev *ring, prevEps, eps []endpoint, minRingSize, maxRingSize, target uint64, maxWeightRatio uint32) (*ring, error) {
	start := time.Now()
	switch {
	case minRingSize == 0:
		return nil, fmt.Errorf("pickwise_ring_hash: minRingSize 0: must be >= 1")
	case minRingSize > maxRingSize:
		return nil, fmt.Errorf("pickwise_ring_hash: minRingSize %d: must be <= maxRingSize %d", minRingSize, maxRingSize)
	case maxRingSize > maxRingSizeLimit:
		return nil, fmt.Errorf("pickwise_ring_hash: maxRingSize %d: must be <= %d", maxRingSize, maxRingSizeLimit)
	case uint64(len(eps)) > maxRingSize:
		return nil, fmt.Errorf("pickwise_ring_hash: %d endpoints: more than maxRingSize %d", len(eps), maxRingSize)
	case maxWeightRatio == 0:
		return nil, fmt.Errorf("pickwise_ring_hash: maxWeightRatio 0: must be >= 1")
	}
	// A rebuild starts from prev only if it can read prev's counts, and
	// then orders the endpoints from prev's order when few are new.
	var prevOf []int32
	if prev != nil && prev.scale != 0 && len(prevEps) == len(prev.sweep.order) {
		prevOf = matchEndpoints(prevEps, eps)
	}
	var c canonical
	ok := false
	if prevOf != nil {
		c, ok = recanonicalize(prevEps, prev.sweep.order, eps, prevOf, maxWeightRatio)
	}
	if !ok {
		var err error
		if c, err = canonicalize(eps, maxWeightRatio); err != nil {
			return nil, err
		}
	}
	counts, total, scale := ringScale(c.weights, c.medianWeight(), minRingSize, maxRingSize, target)

	// 4 to 8 entries per bucket: short enough that the search inside a
	// bucket is a couple of comparisons, few enough that the index costs
	// at most a byte per entry.
	bucketBits := 0
	if total >= 8 {
		bucketBits = bits.Len64(total/4) - 1
	}
	narrow := len(eps) <= 1<<16
	buf := takeRingBuffers(int(total), 1<<bucketBits+1, narrow)
	r := &ring{
		hashes: buf.hashes,
		narrow: buf.narrow,
		wide:   buf.wide,
		index:  buf.index,
		shift:  uint(32 - bucketBits),
		sweep:  sweep{order: c.order},
		scale:  scale,
	}
	// The largest capped weight is the cap whenever capWeights lowered
	// one, and no weight exceeds it otherwise: either way min(w, it) is
	// the capped weight.
	for _, w := range c.weights {
		r.weightCap = max(r.weightCap, w)
	}
	if narrow {
		r.merged = prevOf != nil && prev.narrow != nil && mergeRing(r, r.narrow, prev, prev.narrow, prevEps, prevOf, eps, &c, counts)
		if !r.merged {
			c.hashAll(eps)
			clear(r.index)
			fillRing(r, r.narrow, &c, counts)
		}
	} else {
		r.merged = prevOf != nil && prev.wide != nil && mergeRing(r, r.wide, prev, prev.wide, prevEps, prevOf, eps, &c, counts)
		if !r.merged {
			c.hashAll(eps)
			clear(r.index)
			fillRing(r, r.wide, &c, counts)
		}
	}
	r.buildTime = time.Since(start)
	return r, nil
}

// ringBuffers are the slices a ring's entries live in.
type ringBuffers struct {
	hashes []uint32
	narrow []uint16
	wide   []int32
	index  []uint32
}

// takeRingBuffers returns new buffers for a ring of total entries and
// buckets index entries. A published ring is never written, since pickers
// may still be reading it, so each build has buffers of its own.
func takeRingBuffers(total, buckets int, narrow bool) *ringBuffers {
	out := &ringBuffers{hashes: make([]uint32, total), index: make([]uint32, buckets)}
	if narrow {
		out.narrow = make([]uint16, total)
	} else {
		out.wide = make([]int32, total)
	}
	return out
}

// ringPosition is the ring position of point j of the endpoint whose
// identity hash is h: the top 32 bits of value j of its hash stream.
func ringPosition(h uint64, j uint32) uint32 { return uint32(derive(h, uint64(j)) >> 32) }

// fillRing places every endpoint's points on r and sorts them, writing the
// owners into owners (r.narrow or r.wide). r.index must be all zeros.
func fillRing[T uint16 | int32](r *ring, owners []T, c *canonical, counts []uint32) {
	// Counting sort by bucket. Pass one sizes the buckets; index[b+1]
	// briefly holds bucket b's size, then prefix sums turn sizes into
	// starts. Positions are cheap to derive, so pass two derives them again
	// rather than keeping a temporary copy of the whole ring.
	for rank, k := range counts {
		for j := range k {
			r.index[ringPosition(c.hashes[rank], j)>>r.shift+1]++
		}
	}
	for b := 1; b < len(r.index); b++ {
		r.index[b] += r.index[b-1]
	}
	next := make([]uint32, len(r.index)-1)
	copy(next, r.index)
	for rank, k := range counts {
		owner := T(c.order[rank])
		for j := range k {
			h := ringPosition(c.hashes[rank], j)
			b := h >> r.shift
			r.hashes[next[b]] = h
			owners[next[b]] = owner
			next[b]++
		}
	}
	// Entries went into each bucket in rank order, and insertion sort is
	// stable, so equal positions stay ordered by identity: the tie-break
	// the placement contract needs, at no extra cost.
	for b := 0; b+1 < len(r.index); b++ {
		lo, hi := r.index[b], r.index[b+1]
		for i := lo + 1; i < hi; i++ {
			h, o := r.hashes[i], owners[i]
			j := i
			for ; j > lo && r.hashes[j-1] > h; j-- {
				r.hashes[j], owners[j] = r.hashes[j-1], owners[j-1]
			}
			r.hashes[j], owners[j] = h, o
		}
	}
}

// maxMergeShare bounds the incremental rebuild: it is used while the
// entries to add and to remove are at most 1/maxMergeShare of the new
// ring. Past that, finding and sorting them costs more than a fresh
// build's counting sort saves (BenchmarkRebuild).
const maxMergeShare = 8

// ringRemap is where an endpoint of the previous ring went: its index in
// the new caller's slice and its new rank, or owner -1 if it left.
type ringRemap struct{ owner, rank int32 }

// mergeRing fills r (owners being r.narrow or r.wide) from prev, built
// over prevEps, by the rebuild the file comment describes, and reports
// whether it did. prevOf maps eps to prevEps (matchEndpoints); c and
// counts are eps's canonical order and entry counts. It declines, leaving
// r.index all zeros, when there is too much to add or remove for the
// merge to pay, and when prev does not hold the entries prevEps say it
// should, which would be a caller's bug; the caller then builds r afresh.
//
// The old ring is copied in runs between the entries that change, so
// most of the work is a memory copy: of the owners too when every
// surviving endpoint keeps its index, as it does when a resolver replaces
// endpoints in place, else through the index map. Entries to remove and
// to add are found by the old ring's own bucket index.
func mergeRing[T uint16 | int32](r *ring, owners []T, prev *ring, prevOwners []T, prevEps []endpoint, prevOf []int32, eps []endpoint, c *canonical, counts []uint32) bool {
	limit := len(r.hashes) / maxMergeShare
	// Entries to add are keyed by position then new rank, the ring's own
	// order; entries to remove by position then old index, which names
	// them. An endpoint whose count did not change has neither.
	remap := make([]ringRemap, len(prevEps))
	for i := range remap {
		remap[i].owner = -1
	}
	var add, gone []uint64
	same := true // every survivor keeps its index
	var oldTotal uint64
	oldCount := func(oi int32) uint32 {
		return uint32(ringCount(prev.scale, min(max(prevEps[oi].weight, 1), prev.weightCap)))
	}
	for rank, i := range c.order {
		kn, ko := counts[rank], uint32(0)
		oi := prevOf[i]
		if oi >= 0 {
			ko = oldCount(oi)
			oldTotal += uint64(ko)
			remap[oi] = ringRemap{owner: i, rank: int32(rank)}
			same = same && i == oi
		}
		if kn == ko {
			continue
		}
		var h uint64
		if c.hashes != nil {
			h = c.hashes[rank]
		} else {
			h = hashIdentity(eps[i].id)
		}
		for j := kn; j < ko; j++ {
			gone = append(gone, uint64(ringPosition(h, j))<<32|uint64(oi))
		}
		for j := ko; j < kn; j++ {
			add = append(add, uint64(ringPosition(h, j))<<32|uint64(rank))
		}
		if len(add)+len(gone) > limit {
			return false
		}
	}
	for oi, m := range remap {
		if m.owner >= 0 {
			continue
		}
		// Gone: all its entries.
		ko := oldCount(int32(oi))
		oldTotal += uint64(ko)
		h := hashIdentity(prevEps[oi].id)
		for j := range ko {
			gone = append(gone, uint64(ringPosition(h, j))<<32|uint64(oi))
		}
		if len(add)+len(gone) > limit {
			return false
		}
	}
	n := uint32(len(prev.hashes))
	if oldTotal != uint64(n) || int(n)-len(gone)+len(add) != len(r.hashes) {
		return false
	}
	slices.Sort(add)
	slices.Sort(gone)

	// cut: the old indices of the entries to remove. An endpoint holds a
	// position twice (rarely) when its stream repeats one; the second
	// removal of it is the next such entry.
	cut := make([]uint32, len(gone))
	last, at := uint64(math.MaxUint64), uint32(0)
	for x, g := range gone {
		pos, o := uint32(g>>32), T(uint32(g))
		i := prev.lowerBound(pos)
		if g == last {
			i = at + 1
		}
		for i < n && prev.hashes[i] == pos && prevOwners[i] != o {
			i++
		}
		if i == n || prev.hashes[i] != pos {
			return false
		}
		cut[x], last, at = i, g, i
	}
	slices.Sort(cut)
	// gap: where each added entry goes, before the old entry at that
	// index. An old entry at the same position goes first if its
	// endpoint's identity sorts first; one that is cut may go either way.
	gap := make([]uint32, len(add))
	for x, a := range add {
		pos, rank := uint32(a>>32), int32(uint32(a))
		i := prev.lowerBound(pos)
		for ; i < n && prev.hashes[i] == pos; i++ {
			if m := remap[prevOwners[i]]; m.owner >= 0 && m.rank > rank {
				break
			}
		}
		gap[x] = i
	}

	// Copy the runs between cuts and gaps; gaps and cuts each ascend,
	// and an addition at a cut entry's index goes before it.
	hashes := r.hashes
	out := 0
	run := func(from, to uint32) {
		copy(hashes[out:], prev.hashes[from:to])
		if same {
			copy(owners[out:], prevOwners[from:to])
		} else {
			dst := owners[out : out+int(to-from)]
			for i, o := range prevOwners[from:to] {
				dst[i] = T(remap[o].owner)
			}
		}
		out += int(to - from)
	}
	from := uint32(0)
	ci, ai := 0, 0
	for ci < len(cut) || ai < len(add) {
		if ai < len(add) && (ci == len(cut) || gap[ai] <= cut[ci]) {
			run(from, gap[ai])
			from = gap[ai]
			hashes[out], owners[out] = uint32(add[ai]>>32), T(c.order[uint32(add[ai])])
			out++
			ai++
			continue
		}
		run(from, cut[ci])
		from = cut[ci] + 1
		ci++
	}
	run(from, n)

	// index[b] counts the new entries in buckets below b: the old ones
	// there, less those cut, plus those added there.
	if r.shift != prev.shift {
		indexRing(r)
		return true
	}
	ci, ai = 0, 0
	for b, old := range prev.index {
		for ci < len(cut) && cut[ci] < old {
			ci++
		}
		for ai < len(add) && uint64(add[ai]>>32)>>r.shift < uint64(b) {
			ai++
		}
		r.index[b] = old - uint32(ci) + uint32(ai)
	}
	return true
}

// indexRing fills r.index from r.hashes.
func indexRing(r *ring) {
	// Every bucket's first entry, written from the last entry down so the
	// first one wins; an empty bucket then takes the start of the next.
	total := uint32(len(r.hashes))
	for b := range r.index {
		r.index[b] = total
	}
	for i := len(r.hashes) - 1; i >= 0; i-- {
		r.index[r.hashes[i]>>r.shift] = uint32(i)
	}
	for b := len(r.index) - 2; b >= 0; b-- {
		r.index[b] = min(r.index[b], r.index[b+1])
	}
}

// lowerBound returns the index of the first entry at or after position
// k, or the number of entries if there is none.
func (r *ring) lowerBound(k uint32) uint32 {
	b := k >> r.shift
	lo, hi := r.index[b], r.index[b+1]
	// Every entry of an earlier bucket is below k and every entry of a
	// later one above it, so the answer is in [lo, hi], hi meaning the
	// first entry of the next non-empty bucket.
	for lo < hi {
		m := (lo + hi) / 2
		if r.hashes[m] < k {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// ringScaleBits is the fixed point of the ring's scale: entries per unit
// of weight, in units of 2^-40.
const ringScaleBits = 40

// ringCounts returns how many ring entries each endpoint (by rank) gets,
// and their total; see the file comment for the rule. median is the upper
// median of weights. All arithmetic is in integers, including the search
// for the budget's scale, whose every step is an integer function of the
// last, so every platform builds the same ring.
func ringCounts(weights []uint32, median uint32, minRingSize, maxRingSize, target uint64) ([]uint32, uint64) {
	counts, total, _ := ringScale(weights, median, minRingSize, maxRingSize, target)
	return counts, total
}

// ringCount is the entry count of weight w at scale s: round(s * w /
// 2^40), at least 1. s < 2^64 and w < 2^32, so the product takes 128 bits.
func ringCount(s uint64, w uint32) uint64 {
	hi, lo := bits.Mul64(s, uint64(w))
	lo, carry := bits.Add64(lo, 1<<(ringScaleBits-1), 0)
	return max((hi+carry)<<(64-ringScaleBits)|lo>>ringScaleBits, 1)
}

// ringScale is ringCounts that also returns the scale the counts were
// computed at, for ringCount.
func ringScale(weights []uint32, median uint32, minRingSize, maxRingSize, target uint64) ([]uint32, uint64, uint64) {
	counts := make([]uint32, len(weights))
	// fill sets counts for the scale s (entries per unit of weight, times
	// 2^ringScaleBits) and returns their total, stopping early, with a
	// total over maxRingSize, once the cap is passed; that also keeps the
	// running total from overflowing. The total never falls as s grows.
	fill := func(s uint64) uint64 {
		var total uint64
		for r, w := range weights {
			k := ringCount(s, w)
			counts[r] = uint32(min(k, maxRingSizeLimit+1))
			if total += k; total > maxRingSize || k > maxRingSizeLimit {
				return maxRingSize + 1
			}
		}
		return total
	}
	// sum is fill's total without the counts, for the searches, over the
	// distinct weights with their multiplicities: equal weights have equal
	// counts, and a fleet has far fewer distinct weights than endpoints.
	// Built on the first search step.
	type group struct{ w, n uint32 }
	var groups []group
	sum := func(s uint64) uint64 {
		if groups == nil {
			sorted := sortedWeights(weights)
			groups = make([]group, 0, 64)
			for _, w := range sorted {
				if len(groups) > 0 && groups[len(groups)-1].w == w {
					groups[len(groups)-1].n++
				} else {
					groups = append(groups, group{w, 1})
				}
			}
		}
		var total uint64
		for _, g := range groups {
			// k <= 2^23 and n < 2^31 here, and total <= maxRingSize
			// before the addition: no overflow.
			k := ringCount(s, g.w)
			if k > maxRingSizeLimit {
				return maxRingSize + 1
			}
			if total += k * uint64(g.n); total > maxRingSize {
				return maxRingSize + 1
			}
		}
		return total
	}
	// The unit u, the median rounded down to a power of two, gets target
	// entries: s = target * 2^40 / u, exact. target <= 2^23, so s < 2^63.
	u := uint(bits.Len32(median) - 1)
	s := max(target, 1) << ringScaleBits >> u
	total := fill(s)
	if total < minRingSize {
		// A fleet too small to reach minRingSize: the smallest scale
		// that does, found by doubling then bisection, unless the scale
		// that reaches it overshoots maxRingSize (then the budget search
		// below takes over). Doubling stops by 2^63, where a single
		// weight of 1 has 2^23 entries.
		lo, hi := s, s
		for hi < 1<<63 {
			if hi *= 2; sum(hi) >= minRingSize {
				break
			}
			lo = hi
		}
		for hi-lo > 1 && hi-lo > lo>>10 {
			if m := lo + (hi-lo)/2; sum(m) >= minRingSize {
				hi = m
			} else {
				lo = m
			}
		}
		s = hi
		total = fill(s)
	}
	if total > maxRingSize {
		// The budget binds: the largest scale whose ring fits, to within
		// 2^-10 of itself. s = 0 always fits (one entry each, and n <=
		// maxRingSize), so the search has a floor.
		lo, hi := uint64(0), s
		for hi-lo > 1 && hi-lo > lo>>10 {
			if m := lo + (hi-lo)/2; sum(m) <= maxRingSize {
				lo = m
			} else {
				hi = m
			}
		}
		s = lo
		total = fill(s)
	}
	return counts, total, s
}

// locate returns the index of the first entry at or after h's position (its
// top 32 bits), wrapping to 0 past the last.
func (r *ring) locate(h uint64) uint32 {
	i := r.lowerBound(uint32(h >> 32))
	if int(i) == len(r.hashes) {
		return 0
	}
	return i
}

// owner returns the caller's endpoint index at entry i.
func (r *ring) owner(i uint32) int32 {
	if r.narrow != nil {
		return int32(r.narrow[i])
	}
	return r.wide[i]
}

// first returns a walk at the owner of the first ring entry at or after
// keyHash.
func (r *ring) first(keyHash uint64) cursor {
	i := r.locate(keyHash)
	o := r.owner(i)
	return cursor{key: keyHash, at: probeCursor(0, i), endpoint: o, ref: o}
}

// next walks clockwise: the owners of the n entries after the first one
// (n the number of endpoints), skipping an entry whose owner is the
// candidate just offered or the first one, then a sweep of every other
// endpoint. The walk thus offers at most n + (n - 1) candidates after the
// first, 2n in all, every endpoint among them, and each step is O(1).
//
// The clockwise phase is the ring's own notion of "next endpoint", the one
// gRFC A61 walks to skip TRANSIENT_FAILURE, and it spreads a busy
// endpoint's overflow over the owners of the entries after each of its
// points. Collapsing repeats matters for heavy endpoints, whose entries
// often sit next to each other.
//
// maglev.next is the same loop over Maglev's owners. One generic walk
// for both measured 40% slower per step (BenchmarkWalk: the table's next
// no longer inlines it and pays a call per candidate), so each keeps its
// own copy.
func (r *ring) next(c cursor) (cursor, bool) {
	n := uint32(len(r.sweep.order))
	last := uint32(len(r.hashes) - 1)
	steps, pos := probeState(c.at)
	for steps < n {
		steps++
		if pos == last {
			pos = 0
		} else {
			pos++
		}
		if o := r.owner(pos); o != c.endpoint && o != c.ref {
			c.endpoint = o
			c.at = probeCursor(steps, pos)
			return c, true
		}
	}
	return r.sweep.next(c, steps)
}

// walkBound is 2n: see next.
func (r *ring) walkBound() int { return 2 * len(r.sweep.order) }

// size is the number of endpoints on the ring.
func (r *ring) size() int { return len(r.sweep.order) }

// stats reports the ring's size, footprint and build time.
func (r *ring) stats() tableStats {
	return tableStats{
		kind:      "ring",
		endpoints: len(r.sweep.order),
		entries:   len(r.hashes),
		bytes: cap(r.hashes)*4 + cap(r.narrow)*2 + cap(r.wide)*4 +
			cap(r.index)*4 + cap(r.sweep.order)*4,
		buildTime: r.buildTime,
	}
}
