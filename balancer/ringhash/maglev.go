package ringhash

import (
	"fmt"
	"time"
)

// This file is Maglev hashing (Eisenbud et al., NSDI 2016): a lookup table
// of M slots, M prime, each naming one endpoint, filled so that every
// endpoint owns its share of slots almost exactly; a key's endpoint is the
// slot its hash lands on, O(1) with no search.
//
// Fill. Endpoint i has a preference order over the slots,
// (offset_i + j*skip_i) mod M for j = 0, 1, ..., with offset_i in [0, M)
// and skip_i in [1, M), both drawn from its identity hash. Since M is prime
// every skip is coprime with it and each order visits every slot once.
// Endpoints take turns, in canonical (identity) order, each claiming the
// next slot of its order that is still free, until the table is full.
//
// Weights, as Envoy does them: in round t = 1, 2, ... endpoint i claims a
// slot only if it holds fewer than t * w_i / w_max, so the heaviest claims
// every round and one of half its weight every other round. The comparison
// is done in integers (claimed * w_max < t * w_i), so every platform builds
// the same table. Every endpoint claims in round 1, so with M >= n each owns
// at least one slot whatever its weight; a weight ratio larger than M can
// express (an endpoint owed less than one slot) is rounded up to that one.
// With equal weights each endpoint owns floor(M/n) or ceil(M/n) slots, a
// share within 1/floor(M/n) of 1/n: 0.15% at n = 100, M = 65537.
//
// Rounds run until the table fills, at most M of them (the heaviest endpoint
// claims each round), and the expected probing work over the whole fill is
// O(M log M) (the paper's analysis); a round costs O(n) to scan. A pathological
// weight spread (one endpoint 2^32 times heavier than n-1 others) therefore
// costs up to M*n cheap comparisons, tens of milliseconds at n = 1000.
//
// Slots store the caller's endpoint index in 16 bits when every index fits
// (all realistic fleets), halving the table to 128 KiB at M = 65537, and in
// 32 bits otherwise.
//
// Disruption. Removing an endpoint frees its slots, but the survivors also
// reach contested slots in a different order, so some slots change hands
// between survivors; Envoy measures about twice the ring's key movement, and
// TestMovement holds Maglev to at most 2/11 when 10 endpoints become 11.

const (
	// defaultMaglevTableSize is Envoy's default table_size, the smallest
	// prime above 2^16: M > 100n keeps every share within 1% of 1/n for up
	// to 655 endpoints, which the paper gives as its sizing rule.
	defaultMaglevTableSize = 65537
	// maxMaglevTableSize is Envoy's upper limit on table_size, a prime: 20
	// MB of 32-bit slots or 10 MB of 16-bit ones.
	maxMaglevTableSize = 5000011
)

// maglev is an immutable Maglev lookup table.
type maglev struct {
	// Immutable after newMaglev.

	// Exactly one of narrow and wide holds the slots: slot s names the
	// caller's endpoint index narrow[s] (or wide[s]).
	narrow []uint16
	wide   []uint32
	// m is the table size M.
	m uint64
	// sweep is the walk's fallback phase.
	sweep sweep
	// buildTime is how long newMaglev took.
	buildTime time.Duration
}

var _ table = (*maglev)(nil)

// newMaglev builds a Maglev table of tableSize slots over eps. tableSize
// must be a prime no larger than maxMaglevTableSize and at least the number
// of endpoints, so that each owns a slot; the set must be non-empty and free
// of duplicate identities.
func newMaglev(eps []endpoint, tableSize uint64) (*maglev, error) {
	start := time.Now()
	switch {
	case tableSize > maxMaglevTableSize:
		return nil, fmt.Errorf("pickwise_ring_hash: tableSize %d: must be <= %d", tableSize, maxMaglevTableSize)
	case !isPrime(tableSize):
		return nil, fmt.Errorf("pickwise_ring_hash: tableSize %d: must be prime", tableSize)
	case uint64(len(eps)) > tableSize:
		return nil, fmt.Errorf("pickwise_ring_hash: %d endpoints: more than tableSize %d", len(eps), tableSize)
	}
	c, err := canonicalize(eps)
	if err != nil {
		return nil, err
	}
	n, m := len(eps), tableSize

	// The permutation state of each endpoint, by rank: its next preferred
	// slot and its skip.
	pos := make([]uint64, n)
	skip := make([]uint64, n)
	claimed := make([]uint64, n)
	for r, h := range c.hashes {
		pos[r] = reduce(derive(h, 0), m)
		skip[r] = 1 + reduce(derive(h, 1), m-1)
	}
	_, wmax, _ := c.weightStats()

	// owner[s] is the rank owning slot s plus one, 0 while free. Ranks are
	// mapped to caller indices once the table is full.
	owner := make([]uint32, m)
	filled := uint64(0)
fill:
	for round := uint64(1); ; round++ {
		for r := range n {
			if claimed[r]*wmax >= round*uint64(c.weights[r]) {
				continue
			}
			p := pos[r]
			for owner[p] != 0 {
				if p += skip[r]; p >= m {
					p -= m
				}
			}
			owner[p] = uint32(r) + 1
			claimed[r]++
			if p += skip[r]; p >= m {
				p -= m
			}
			pos[r] = p
			if filled++; filled == m {
				break fill
			}
		}
	}

	t := &maglev{m: m, sweep: sweep{order: c.order}}
	if n <= 1<<16 {
		t.narrow = make([]uint16, m)
		for s, o := range owner {
			t.narrow[s] = uint16(c.order[o-1])
		}
	} else {
		t.wide = make([]uint32, m)
		for s, o := range owner {
			t.wide[s] = uint32(c.order[o-1])
		}
	}
	t.buildTime = time.Since(start)
	return t, nil
}

// isPrime reports whether m is prime, by trial division: m is at most
// maxMaglevTableSize, so this is at most about 1100 odd divisors, once per
// build.
func isPrime(m uint64) bool {
	if m < 2 {
		return false
	}
	if m%2 == 0 {
		return m == 2
	}
	for d := uint64(3); d*d <= m; d += 2 {
		if m%d == 0 {
			return false
		}
	}
	return true
}

// at returns the caller's endpoint index in slot s.
func (t *maglev) at(s uint64) int32 {
	if t.narrow != nil {
		return int32(t.narrow[s])
	}
	return int32(t.wide[s])
}

// first returns a walk at the owner of the key's slot. The slot is the key
// hash scaled onto [0, M) by multiplication, which gives every slot an equal
// (to within one) range of hashes, so slot shares are key-space shares.
func (t *maglev) first(keyHash uint64) cursor {
	s := reduce(keyHash, t.m)
	o := t.at(s)
	return cursor{key: keyHash, at: probeCursor(0, uint32(s)), endpoint: o, ref: o}
}

// next walks the lookup table forward from the key's slot: the owners of
// the n slots after it (n the number of endpoints), skipping a slot whose
// owner is the candidate just offered or the first one, then a sweep of
// every other endpoint. So a walk offers at most 2n candidates, every
// endpoint among them, each step O(1).
//
// Neighbouring slots are claimed by unrelated permutations, so the slots
// after a key's own name endpoints close to independently of it, weighted by
// their shares: a busy endpoint's overflow spreads over the others rather
// than onto one neighbour, and the sequence needs nothing but the table.
func (t *maglev) next(c cursor) (cursor, bool) {
	n := uint32(len(t.sweep.order))
	last := uint32(t.m - 1)
	steps, pos := probeState(c.at)
	for steps < n {
		steps++
		if pos == last {
			pos = 0
		} else {
			pos++
		}
		if o := t.at(uint64(pos)); o != c.endpoint && o != c.ref {
			c.endpoint = o
			c.at = probeCursor(steps, pos)
			return c, true
		}
	}
	return t.sweep.next(c, steps)
}

// walkBound is 2n: see next.
func (t *maglev) walkBound() int { return 2 * len(t.sweep.order) }

// size is the number of endpoints in the table.
func (t *maglev) size() int { return len(t.sweep.order) }

// stats reports the table's size, footprint and build time.
func (t *maglev) stats() tableStats {
	return tableStats{
		kind:      "maglev",
		endpoints: len(t.sweep.order),
		entries:   int(t.m),
		bytes:     cap(t.narrow)*2 + cap(t.wide)*4 + cap(t.sweep.order)*4,
		buildTime: t.buildTime,
	}
}
