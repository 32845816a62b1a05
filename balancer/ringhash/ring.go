package ringhash

import (
	"fmt"
	"math/bits"
	"time"
)

// This file is the consistent-hash ring (Karger et al.; "ketama"): each
// endpoint owns many points on a 64-bit circle, and a key belongs to the
// first point at or after its hash, wrapping past the top.
//
// Entries per endpoint. The lightest endpoint gets
//
//	v = max(ceil(minRingSize * w_min / W), ringMinEntries)
//
// entries (W the total weight), and endpoint i gets round(v * w_i / w_min),
// so shares follow weights and the ring has at least minRingSize entries.
// If that would exceed maxRingSize, endpoint i instead gets
// 1 + floor((maxRingSize - n) * w_i / W): the ring stays within the cap,
// every endpoint keeps at least one entry, and weight ratios beyond what the
// cap can express are compressed rather than rejected.
//
// The floor of ringMinEntries is the one departure from Envoy and grpc-go,
// whose rule amounts to v = ceil(minRingSize * w_min / W) alone: their ring
// holds about minRingSize entries whatever n is, so every endpoint's count
// changes whenever n does (10 equal endpoints get 103 entries each, 11 get
// 94), and the entries an endpoint loses hand their keys to its surviving
// neighbours. Scaling out from 10 to 11 then moves about 17% of keys, not
// the 1/11 = 9.1% consistent hashing promises (TestMovement logs both). With
// the floor, an endpoint's count stops depending on n once n >= minRingSize
// / ringMinEntries (8 at the defaults), and since an endpoint's positions are
// a prefix of its own hash stream (see derive), a count that does not change
// means positions that do not move. The floor also fixes Envoy's balance at
// large n, where 1024 entries over 1000 endpoints is one or two points each:
// a share's relative spread is about 1/sqrt(entries), 9% at 128 against 70%.
// The price is memory: 128 entries of 12.5 bytes, 1.6 KB per endpoint.
//
// Layout. The sorted positions and their owners are two parallel slices
// (struct of arrays), 8 + 4 bytes per entry with no padding, so the search
// touches only the 8-byte positions. A bucket index over the positions' top
// bits (about one bucket per four entries, at most 1 byte per entry) turns
// the O(log n) binary search over the whole ring into a search of a few
// entries, which also removes the cache misses a large ring's search costs.
// Building sorts by the same buckets: a counting sort scatters entries into
// their buckets, then each bucket (about four entries) is insertion-sorted,
// which is linear in the ring size for hashed positions.

const (
	// defaultMinRingSize and defaultMaxRingSize are Envoy's and grpc-go's
	// defaults for the ring_hash minimum_ring_size and maximum_ring_size.
	defaultMinRingSize = 1024
	defaultMaxRingSize = 8 << 20
	// maxRingSizeLimit is the largest ring either may ask for, Envoy's and
	// grpc-go's upper bound: 8M entries, about 100 MB here.
	maxRingSizeLimit = 8 << 20
	// ringMinEntries is the fewest entries the lightest endpoint gets when
	// the ring is not capped; see the file comment for why it exists.
	ringMinEntries = 128
)

// ring is an immutable consistent-hash ring.
type ring struct {
	// Immutable after newRing.

	// hashes are the ring positions in ascending order; equal positions
	// are ordered by the owners' identities.
	hashes []uint64
	// owners[i] is the caller's index of the endpoint at hashes[i].
	owners []int32
	// index[b] is the first entry whose position's top bits are >= b, for
	// b in [0, 2^bits]; shift is 64 - bits.
	index []uint32
	shift uint
	// sweep is the walk's fallback phase.
	sweep sweep
	// buildTime is how long newRing took.
	buildTime time.Duration
}

var _ table = (*ring)(nil)

// newRing builds a ring over eps with between minRingSize and maxRingSize
// entries (see the file comment for the exact rule). It fails on an empty or
// duplicated endpoint set, on sizes out of order or above maxRingSizeLimit,
// and on more endpoints than maxRingSize, since every endpoint needs an entry.
func newRing(eps []endpoint, minRingSize, maxRingSize uint64) (*ring, error) {
	return buildRing(eps, minRingSize, maxRingSize, ringMinEntries)
}

// buildRing is newRing with the per-endpoint floor as a parameter, so that
// tests can build the ring Envoy and grpc-go would (floor 1) and compare.
func buildRing(eps []endpoint, minRingSize, maxRingSize, floor uint64) (*ring, error) {
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
	}
	c, err := canonicalize(eps)
	if err != nil {
		return nil, err
	}
	counts, total := ringCounts(c.weights, minRingSize, maxRingSize, floor)

	// About four entries per bucket: short enough that the search inside a
	// bucket is a couple of comparisons, few enough that the index costs at
	// most a byte per entry.
	bucketBits := 0
	if total >= 8 {
		bucketBits = bits.Len64(total/4) - 1
	}
	r := &ring{
		hashes: make([]uint64, total),
		owners: make([]int32, total),
		index:  make([]uint32, 1<<bucketBits+1),
		shift:  uint(64 - bucketBits),
		sweep:  sweep{order: c.order},
	}

	// Counting sort by bucket. Pass one sizes the buckets; index[b+1]
	// briefly holds bucket b's size, then prefix sums turn sizes into
	// starts. Positions are cheap to derive, so pass two derives them again
	// rather than keeping a temporary copy of the whole ring.
	for rank, k := range counts {
		for j := range k {
			r.index[derive(c.hashes[rank], j)>>r.shift+1]++
		}
	}
	for b := 1; b < len(r.index); b++ {
		r.index[b] += r.index[b-1]
	}
	next := make([]uint32, len(r.index)-1)
	copy(next, r.index)
	for rank, k := range counts {
		owner := c.order[rank]
		for j := range k {
			h := derive(c.hashes[rank], j)
			b := h >> r.shift
			r.hashes[next[b]] = h
			r.owners[next[b]] = owner
			next[b]++
		}
	}
	// Entries went into each bucket in rank order, and insertion sort is
	// stable, so equal positions stay ordered by identity: the tie-break
	// the placement contract needs, at no extra cost.
	for b := 0; b+1 < len(r.index); b++ {
		lo, hi := r.index[b], r.index[b+1]
		for i := lo + 1; i < hi; i++ {
			h, o := r.hashes[i], r.owners[i]
			j := i
			for ; j > lo && r.hashes[j-1] > h; j-- {
				r.hashes[j], r.owners[j] = r.hashes[j-1], r.owners[j-1]
			}
			r.hashes[j], r.owners[j] = h, o
		}
	}
	r.buildTime = time.Since(start)
	return r, nil
}

// ringCounts returns how many ring entries each endpoint (by rank) gets,
// and their total; see the file comment for the rule. All arithmetic is in
// integers, so every platform builds the same ring: weights are below 2^32
// and sizes at most 2^23, so no product below exceeds 2^57.
func ringCounts(weights []uint32, minRingSize, maxRingSize, floor uint64) ([]uint64, uint64) {
	lo, sum := uint64(weights[0]), uint64(0)
	for _, w := range weights {
		lo = min(lo, uint64(w))
		sum += uint64(w)
	}
	v := max((minRingSize*lo+sum-1)/sum, floor, 1)
	counts := make([]uint64, len(weights))
	var total uint64
	for r, w := range weights {
		// round(v * w / lo), and exactly v for the lightest endpoint.
		counts[r] = (2*v*uint64(w) + lo) / (2 * lo)
		// Each count is below 2^57, so stopping at the first sum over
		// the cap keeps the running total from overflowing.
		if total += counts[r]; total > maxRingSize {
			break
		}
	}
	if total <= maxRingSize {
		return counts, total
	}
	budget := maxRingSize - uint64(len(weights))
	total = 0
	for r, w := range weights {
		counts[r] = 1 + budget*uint64(w)/sum
		total += counts[r]
	}
	return counts, total
}

// locate returns the index of the first entry at or after h, wrapping to 0
// past the last.
func (r *ring) locate(h uint64) uint32 {
	b := h >> r.shift
	lo, hi := r.index[b], r.index[b+1]
	// Every entry of an earlier bucket is below h and every entry of a
	// later one above it, so the answer is in [lo, hi], hi meaning the
	// first entry of the next non-empty bucket.
	for lo < hi {
		m := (lo + hi) / 2
		if r.hashes[m] < h {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if int(lo) == len(r.hashes) {
		return 0
	}
	return lo
}

// first returns a walk at the owner of the first ring entry at or after
// keyHash.
func (r *ring) first(keyHash uint64) cursor {
	i := r.locate(keyHash)
	o := r.owners[i]
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
		if o := r.owners[pos]; o != c.endpoint && o != c.ref {
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
		bytes: cap(r.hashes)*8 + cap(r.owners)*4 + cap(r.index)*4 +
			cap(r.sweep.order)*4,
		buildTime: r.buildTime,
	}
}
