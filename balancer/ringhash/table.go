package ringhash

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/pickwise/pickwise/internal/mix"
)

// This file defines what the three hash tables (ring, Maglev, rendezvous)
// have in common: the endpoint they are built from, the candidate walk the
// picker drives, and the canonical order that makes placement independent
// of the order the resolver listed the endpoints in.
//
// Placement contract. A table is a pure function of the set of (identity,
// weight) pairs: every balancer that sees the same set, in any order, on any
// platform, maps every key to the same endpoint and walks the same candidate
// sequence. That is what keeps affinity across many independent clients
// (clients that built different tables from one fleet would split a key's
// traffic). So a table never reads the caller's list order: builders
// sort the endpoints by identity first, and every tie (equal ring
// positions, Maglev's claiming rotation, equal rendezvous scores, the
// fallback sweep) is broken by that canonical order. Only the
// endpoint indices a table hands back refer to the caller's slice.
//
// Duplicates. Two endpoints with the same identity would be one endpoint
// owning two shares, and which of their indices a key reached would depend
// on list order. The caller (the balancer) dedupes before building, so a
// builder treats a duplicate as a programming error and rejects the set
// rather than guessing which copy was meant.

// endpoint is one backend as a table sees it.
type endpoint struct {
	// id is the stable identity the endpoint is placed by: its address, or
	// its gRFC A76 hash_key when the control plane sets one. The caller
	// decides; the tables only hash it.
	id string
	// weight is the endpoint's relative share. 0 is treated as 1, the
	// default weight of an endpoint without one, so that a missing weight
	// cannot take an endpoint out of the table.
	weight uint32
}

// cursor is the position of a candidate walk. It is a small value that the
// caller passes back into table.next, so a walk allocates nothing and
// involves no closure: the picker keeps it on its stack.
//
// Only endpoint is meant to be read by the caller; the other fields are the
// table's bookkeeping, and their meaning depends on the table. There are
// exactly four, of at most 8 bytes each: the Go compiler keeps a struct that
// small in registers (it gives up on structs of more than four fields and
// spills them to the stack), which more than halves the cost of a step.
type cursor struct {
	// key is the key hash the walk started from.
	key uint64
	// at is where the walk is. Ring and Maglev: the steps taken since the
	// first candidate in the high 32 bits, the table position probed last
	// in the low 32. Rendezvous: the current candidate's score.
	at uint64
	// endpoint is the current candidate: an index into the slice the table
	// was built from.
	endpoint int32
	// ref is, for ring and Maglev, the walk's first candidate, which they
	// never offer twice since a caller asking for more has turned it down;
	// for rendezvous, the current candidate's canonical rank, its
	// tie-break.
	ref int32
}

// probeCursor packs a ring or Maglev walk's step count and table position
// into cursor.at; probeState unpacks them. Positions fit in 32 bits (rings
// have at most 2^23 entries, Maglev tables fewer), and a walk takes at most
// 2n steps, n < 2^31.
func probeCursor(steps, pos uint32) uint64 { return uint64(steps)<<32 | uint64(pos) }

// probeState is the inverse of probeCursor.
func probeState(at uint64) (steps, pos uint32) { return uint32(at >> 32), uint32(at) }

// table maps a 64-bit key hash to an ordered walk over candidate endpoints.
//
// A table is immutable after its builder returns and safe for concurrent use.
// The walk is deterministic for a given key hash and endpoint set, never
// allocates, and offers every endpoint at least once within walkBound
// candidates; the picker uses it to skip endpoints in TRANSIENT_FAILURE and,
// with bounded load, endpoints over their cap.
type table interface {
	// first returns a walk positioned at the key's primary endpoint.
	first(keyHash uint64) cursor
	// next advances the walk to its next candidate. It reports false once
	// the walk is over, every endpoint having been offered; the returned
	// cursor is then spent and names no new candidate.
	next(c cursor) (cursor, bool)
	// walkBound is the most candidates a walk offers, the first included.
	walkBound() int
	// size is the number of endpoints the table was built from.
	size() int
	// stats reports what the table costs.
	stats() tableStats
}

// tableStats is what a table costs in memory and build time, reported for
// tests, benchmarks and the balancer's logs.
type tableStats struct {
	// kind names the algorithm: "ring", "maglev" or "rendezvous".
	kind string
	// endpoints is the number of endpoints placed.
	endpoints int
	// entries is the number of lookup entries: ring positions, Maglev
	// slots, or endpoints for rendezvous, which has no other table.
	entries int
	// bytes is the table's heap footprint: every slice it keeps, counted
	// at capacity. It excludes the identity strings, which the caller owns.
	bytes int
	// buildTime is the wall time the builder took. It is reported, never
	// acted on, so it does not make placement depend on the clock.
	buildTime time.Duration
}

// bytesPerEntry is the table's footprint divided by its entries: the
// marginal cost of a bigger ring or Maglev table, all overheads included.
func (s tableStats) bytesPerEntry() float64 {
	if s.entries == 0 {
		return 0
	}
	return float64(s.bytes) / float64(s.entries)
}

// String formats the stats for logs and test output.
func (s tableStats) String() string {
	return fmt.Sprintf("%s: %d endpoints, %d entries, %d bytes (%.1f B/entry), built in %v",
		s.kind, s.endpoints, s.entries, s.bytes, s.bytesPerEntry(), s.buildTime)
}

// errNoEndpoints is returned by every builder for an empty endpoint list:
// a table with nothing to map to has no meaning, and the balancer handles
// "no endpoints" before it builds one.
var errNoEndpoints = errors.New("pickwise_ring_hash: no endpoints")

// canonical is the endpoint set in the order placement is defined by.
type canonical struct {
	// order[r] is the caller's index of the endpoint of rank r, ranks
	// assigned by ascending identity.
	order []int32
	// hashes[r] is hashIdentity of the endpoint of rank r; nil when
	// recanonicalize built c, until hashAll.
	hashes []uint64
	// weights[r] is the weight the endpoint of rank r is placed by: its
	// own, 0 raised to 1, then capped (see capWeights).
	weights []uint32
	// median is the upper median of weights (the cap leaves it as it
	// was), or 0 if canonicalize did not need it; see medianWeight.
	median uint32
}

// canonicalize sorts the endpoints by identity, hashes the identities and
// normalizes the weights (capWeights, with maxRatio). It rejects an empty
// set, a duplicate identity, and more endpoints than an int32 index can
// name.
func canonicalize(eps []endpoint, maxRatio uint32) (canonical, error) {
	if len(eps) == 0 {
		return canonical{}, errNoEndpoints
	}
	if len(eps) > 1<<31-1 {
		return canonical{}, fmt.Errorf("pickwise_ring_hash: %d endpoints: more than a table can index", len(eps))
	}
	order := make([]int32, len(eps))
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortFunc(order, func(a, b int32) int { return strings.Compare(eps[a].id, eps[b].id) })
	c := canonical{
		order:   order,
		hashes:  make([]uint64, len(eps)),
		weights: make([]uint32, len(eps)),
	}
	for r, i := range order {
		if r > 0 && eps[order[r-1]].id == eps[i].id {
			return canonical{}, fmt.Errorf("pickwise_ring_hash: duplicate endpoint identity %q", eps[i].id)
		}
		c.hashes[r] = hashIdentity(eps[i].id)
		c.weights[r] = max(eps[i].weight, 1)
	}
	c.median = capWeights(c.weights, maxRatio)
	return c, nil
}

// hashAll fills c.hashes if recanonicalize left them out.
func (c *canonical) hashAll(eps []endpoint) {
	if c.hashes != nil {
		return
	}
	c.hashes = make([]uint64, len(c.order))
	for r, i := range c.order {
		c.hashes[r] = hashIdentity(eps[i].id)
	}
}

// matchEndpoints returns, for each endpoint of eps, the index in prevEps
// of the endpoint with the same identity, or -1. Both are free of
// duplicates as far as a caller knows; if eps is not, at most one of a
// duplicated identity is matched, and the canonical order rejects it.
//
// Resolvers mostly keep their order from one update to the next, so the
// same index is tried first and only the endpoints that moved go through
// a map.
func matchEndpoints(prevEps, eps []endpoint) []int32 {
	prevOf := make([]int32, len(eps))
	var moved []int // indices of eps not matched in place
	for i := range eps {
		if i < len(prevEps) && eps[i].id == prevEps[i].id {
			prevOf[i] = int32(i)
		} else {
			prevOf[i] = -1
			moved = append(moved, i)
		}
	}
	if len(moved) == 0 || len(prevEps) == 0 {
		return prevOf
	}
	old := make(map[string]int32)
	for j := range prevEps {
		if j >= len(eps) || eps[j].id != prevEps[j].id {
			old[prevEps[j].id] = int32(j)
		}
	}
	for _, i := range moved {
		if j, ok := old[eps[i].id]; ok {
			prevOf[i] = j
			delete(old, eps[i].id) // a duplicate in eps stays unmatched
		}
	}
	return prevOf
}

// maxReorderShare bounds recanonicalize: it is used while at most
// 1/maxReorderShare of the endpoints are new, each then costing a binary
// search among the rest; past that a full sort is as cheap.
const maxReorderShare = 8

// recanonicalize is canonicalize for eps given the canonical order
// prevOrder of prevEps and the match prevOf between them
// (matchEndpoints): the endpoints both have keep their relative order,
// so only the new ones are sorted and merged in. It leaves c.hashes nil
// (see hashAll). It reports false, and canonicalize must be used, when
// too many endpoints are new and when an identity is duplicated, which
// canonicalize then reports.
func recanonicalize(prevEps []endpoint, prevOrder []int32, eps []endpoint, prevOf []int32, maxRatio uint32) (canonical, bool) {
	if len(eps) == 0 || len(eps) > 1<<31-1 {
		return canonical{}, false
	}
	var fresh []int32
	newOf := make([]int32, len(prevEps))
	for j := range newOf {
		newOf[j] = -1
	}
	for i, j := range prevOf {
		if j < 0 {
			if fresh = append(fresh, int32(i)); len(fresh) > len(eps)/maxReorderShare+1 {
				return canonical{}, false
			}
			continue
		}
		newOf[j] = int32(i)
	}
	byID := func(a, b int32) int { return strings.Compare(eps[a].id, eps[b].id) }
	slices.SortFunc(fresh, byID)
	kept := make([]int32, 0, len(eps)-len(fresh))
	for _, j := range prevOrder {
		if i := newOf[j]; i >= 0 {
			kept = append(kept, i)
		}
	}
	order := make([]int32, 0, len(eps))
	for x, i := range fresh {
		if x > 0 && eps[fresh[x-1]].id == eps[i].id {
			return canonical{}, false
		}
		at, dup := slices.BinarySearchFunc(kept, i, byID)
		if dup {
			return canonical{}, false
		}
		order = append(order, kept[:at]...)
		order = append(order, i)
		kept = kept[at:]
	}
	order = append(order, kept...)
	c := canonical{order: order, weights: make([]uint32, len(eps))}
	for r, i := range order {
		c.weights[r] = max(eps[i].weight, 1)
	}
	c.median = capWeights(c.weights, maxRatio)
	return c, true
}

// capWeights lowers every weight above maxRatio times the upper median to
// that cap, in place. It returns the upper median (the weight of rank len/2
// in ascending order), which the cap leaves unchanged, if it had to find
// it, else 0.
//
// Why the median: it is the one reference a single weight cannot move. A
// mean or a total is dragged up by the very weight it should bound, and
// the minimum is dragged down by a single light endpoint. The upper median
// m has at least ceil(n/2) endpoints weighing m or more, the capped one
// possibly among them, so no endpoint's share of the total weight exceeds
//
//	maxRatio / (maxRatio + ceil(n/2) - 1)
//
// whatever the weights (TestWeightCap checks it). The upper median rather
// than the lower one so that a fleet split evenly between two hardware
// generations keeps its heavier half's weights.
//
// The cap is the same in every table, so switching tables never changes
// which weights are honoured, and it bounds what the ring and Maglev must
// express: together with their fixed budgets it is what makes their build
// cost independent of the weights.
func capWeights(weights []uint32, maxRatio uint32) uint32 {
	lo, hi := weights[0], weights[0]
	for _, w := range weights {
		lo, hi = min(lo, w), max(hi, w)
	}
	// Nothing can exceed the cap: the median is at least the lightest
	// weight. This is every unweighted and most weighted fleets, and it
	// spares them the sort below.
	if uint64(hi) <= uint64(maxRatio)*uint64(lo) {
		if lo == hi {
			return lo
		}
		return 0
	}
	m := nthWeight(weights, len(weights)/2)
	limit := uint32(min(uint64(maxRatio)*uint64(m), math.MaxUint32))
	for r, w := range weights {
		weights[r] = min(w, limit)
	}
	return m
}

// medianWeight returns the upper median of the (capped) weights.
func (c *canonical) medianWeight() uint32 {
	if c.median == 0 {
		c.median = nthWeight(c.weights, len(c.weights)/2)
	}
	return c.median
}

// nthWeight returns the k-th smallest of weights (k from 0), leaving
// weights as they are.
func nthWeight(weights []uint32, k int) uint32 {
	return sortedWeights(weights)[k]
}

// sortedWeights returns weights sorted, leaving weights as they are. Large
// sets are radix sorted, a byte at a time from the lowest, skipping the
// bytes every weight shares: most weights fit in one or two bytes, so a
// fleet's weights sort in one or two linear passes.
func sortedWeights(weights []uint32) []uint32 {
	s := slices.Clone(weights)
	if len(s) < 256 {
		slices.Sort(s)
		return s
	}
	and, or := ^uint32(0), uint32(0)
	for _, w := range s {
		and, or = and&w, or|w
	}
	tmp := make([]uint32, len(s))
	for shift := uint(0); shift < 32; shift += 8 {
		if (and^or)>>shift&0xff == 0 {
			continue // every weight has the same byte here
		}
		var starts [256]int
		for _, w := range s {
			starts[w>>shift&0xff]++
		}
		at := 0
		for d, n := range starts {
			starts[d], at = at, at+n
		}
		for _, w := range s {
			d := w >> shift & 0xff
			tmp[starts[d]] = w
			starts[d]++
		}
		s, tmp = tmp, s
	}
	return s
}

// weightStats returns the smallest, largest and total weight.
func (c *canonical) weightStats() (lo, hi, sum uint64) {
	lo = uint64(c.weights[0])
	for _, w := range c.weights {
		lo = min(lo, uint64(w))
		hi = max(hi, uint64(w))
		sum += uint64(w)
	}
	return lo, hi, sum
}

// sweep is the second phase of the ring and Maglev walks: one pass over all
// endpoints in canonical order, starting at an offset drawn from the key.
//
// Probing neighbouring table positions is what keeps a key's fallback
// stable and spread out, but it has no useful bound on how many positions
// it takes to meet every endpoint (a light endpoint may own one Maglev slot
// in 65537, or a few ring entries in millions). So a walk probes only n
// positions, then sweeps: every endpoint is offered within 2n steps, each
// O(1). Starting the sweep at a key-derived offset, rather than at rank 0
// or next to the first candidate, keeps the rare keys that get this far
// from all landing on one endpoint.
type sweep struct {
	order []int32 // canonical order, as in canonical.order
}

// next offers the next endpoint of the sweep; steps counts the walk's steps
// so far, the sweep's own being those past n. It skips the walk's first
// candidate, which was offered before the probe phase, and the candidate
// just offered, which would otherwise come twice in a row where the probe
// phase hands over to the sweep; both have been offered, so the sweep still
// completes the set.
func (s sweep) next(c cursor, steps uint32) (cursor, bool) {
	n := uint32(len(s.order))
	start := uint32(reduce(mix.Mix64(c.key^golden), uint64(n)))
	for steps < 2*n {
		r := start + (steps - n)
		if r >= n {
			r -= n
		}
		steps++
		if ep := s.order[r]; ep != c.ref && ep != c.endpoint {
			c.endpoint = ep
			c.at = probeCursor(steps, 0)
			return c, true
		}
	}
	return c, false
}
