package ringhash

import (
	"cmp"
	"fmt"
	"slices"
	"time"
)

// This file is Maglev hashing (Eisenbud et al., NSDI 2016): a lookup table
// of M slots, M prime, each naming one endpoint, filled so that every
// endpoint owns its share of slots almost exactly; a key's endpoint is the
// slot its hash lands on, O(1) with no search.
//
// Permutations. Endpoint i has a preference order over the slots,
// (offset_i + j*skip_i) mod M for j = 0, 1, ..., with offset_i in [0, M)
// and skip_i in [1, M), both drawn from its identity hash. Since M is prime
// every skip is coprime with it and each order visits every slot once.
// Endpoints take turns claiming the next slot of their order that is still
// free, until the table is full.
//
// Quotas. Each endpoint owns exactly q_i slots, fixed before the fill: one
// each, so that every endpoint is reachable, plus its weight's share of the
// other M - n by largest remainder (Hamilton's method; equal remainders go
// to the lower canonical rank). So q_i = 1 + (M - n)*p_i + d, |d| < 1, for
// the weight share p_i = w_i/W, and |q_i/M - p_i| < (1 + max(1, n*p_i))/M:
// within 2/M for an endpoint of at most twice the mean weight, and a
// relative n/M (0.15% at n = 100, M = 65537) for a heavier one, whose
// reserved slot is worth less than its share of the others. With equal
// weights every endpoint owns floor(M/n) or ceil(M/n) slots, a share
// within 1/floor(M/n) of 1/n. Weights are capped first (see capWeights),
// so one absurd weight cannot take the table either.
//
// Turns. The fill runs in rounds t = 1 .. Q, Q the largest quota; endpoint
// i claims its j-th slot (j from 0) in round floor(j*Q/q_i) + 1, so every
// endpoint spreads its claims evenly over the fill and the heaviest claims
// in every round. Within a round, endpoints claim in the order they were
// scheduled into it: canonical order in round 1, and for each later round
// the order in which the earlier rounds scheduled them. With equal weights
// that is canonical order in every round, and the table is the one the
// paper's (and Envoy's) weighted fill builds: each endpoint claims once per
// round and the first M mod n ranks once more. Rather than scanning all n
// endpoints in each of Q rounds, which with one endpoint 2^32 times
// heavier than the rest is Q*n = M*n steps (35 s at M = 5000011 and
// n = 10000), each round keeps the list of the endpoints due in it, so the
// schedule costs O(M + Q) = O(M) whatever the weights. What remains is the
// probing, O(M log M) expected over the whole fill (the paper's analysis),
// for equal and unequal weights alike: it is what bounds the table size
// (maxMaglevTableSize).
//
// Slots store the caller's endpoint index in 16 bits when every index fits
// (all realistic fleets), halving the table to 128 KiB at M = 65537, and in
// 32 bits otherwise. The fill writes into those very slots (rank + 1, 0
// while free), so it needs no second table.
//
// Disruption. Removing an endpoint frees its slots, but the survivors also
// reach contested slots in a different order, so some slots change hands
// between survivors; Envoy measures about twice the ring's key movement, and
// TestMovement holds Maglev to at most 2/11 when 10 endpoints become 11.

const (
	// maxMaglevTableSize is ours, a prime: Envoy accepts table_size up to
	// 5000011, but filling a table costs O(M log M) probes into it
	// whatever the weights, and at 5000011 slots (10 MB) that is about
	// 0.4 s of cache misses at n = 10000 (BenchmarkBuild). 262139, the
	// largest prime below 2^18, fills in 7 to 15 ms at n = 10000 (twice
	// that, 524287, took 17 to 23 ms), and is enough for M > 100n up to
	// 2621 endpoints.
	maxMaglevTableSize = 262139
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

// newMaglev builds a Maglev table of tableSize slots over eps, weights
// capped at maxWeightRatio times the median. tableSize must be a prime no
// larger than maxMaglevTableSize and at least the number of endpoints, so
// that each owns a slot; the set must be non-empty and free of duplicate
// identities.
func newMaglev(eps []endpoint, tableSize uint64, maxWeightRatio uint32) (*maglev, error) {
	start := time.Now()
	switch {
	case tableSize > maxMaglevTableSize:
		return nil, fmt.Errorf("pickwise_ring_hash: tableSize %d: must be <= %d", tableSize, maxMaglevTableSize)
	case !isPrime(tableSize):
		return nil, fmt.Errorf("pickwise_ring_hash: tableSize %d: must be prime", tableSize)
	case uint64(len(eps)) > tableSize:
		return nil, fmt.Errorf("pickwise_ring_hash: %d endpoints: more than tableSize %d", len(eps), tableSize)
	case maxWeightRatio == 0:
		return nil, fmt.Errorf("pickwise_ring_hash: maxWeightRatio 0: must be >= 1")
	}
	c, err := canonicalize(eps, maxWeightRatio)
	if err != nil {
		return nil, err
	}
	t := &maglev{m: tableSize, sweep: sweep{order: c.order}}
	// Ranks + 1 fit the narrow slots when n < 2^16, and the caller's
	// indices then fit too.
	if len(eps) < 1<<16 {
		t.narrow = make([]uint16, tableSize)
		fillMaglev(t.narrow, &c)
		for s, o := range t.narrow {
			t.narrow[s] = uint16(c.order[o-1])
		}
	} else {
		t.wide = make([]uint32, tableSize)
		fillMaglev(t.wide, &c)
		for s, o := range t.wide {
			t.wide[s] = uint32(c.order[o-1])
		}
	}
	t.buildTime = time.Since(start)
	return t, nil
}

// maglevQuotas returns each rank's slot count (see the file comment): they
// sum to m, each is at least 1, and they are in proportion to the weights
// to within one slot.
func maglevQuotas(weights []uint32, m uint64) []uint32 {
	n := uint64(len(weights))
	var sum uint64
	for _, w := range weights {
		sum += uint64(w)
	}
	// (m - n) * w < 2^23 * 2^32 while m <= maxMaglevTableSize, so the
	// products below cannot overflow.
	spare := m - n
	q := make([]uint32, n)
	rem := make([]uint64, n)
	var given uint64
	for r, w := range weights {
		x := spare * uint64(w)
		q[r] = uint32(1 + x/sum)
		rem[r] = x % sum
		given += x / sum
	}
	left := spare - given // < n
	if left == 0 {
		return q
	}
	// The left-over slots go to the largest remainders, ties to the lower
	// rank. Equal remainders (equal weights) need no sort: the first ranks
	// win.
	if !slices.ContainsFunc(rem, func(x uint64) bool { return x != rem[0] }) {
		for r := range left {
			q[r]++
		}
		return q
	}
	type remainder struct {
		rem  uint64
		rank uint32
	}
	byRem := make([]remainder, n)
	for r := range byRem {
		byRem[r] = remainder{rem[r], uint32(r)}
	}
	// A total order (ranks are distinct), so the unstable sort is
	// deterministic.
	slices.SortFunc(byRem, func(a, b remainder) int {
		if c := cmp.Compare(b.rem, a.rem); c != 0 {
			return c
		}
		return cmp.Compare(a.rank, b.rank)
	})
	for _, x := range byRem[:left] {
		q[x.rank]++
	}
	return q
}

// fillMaglev fills slots with each endpoint's rank + 1 by the turns of the
// file comment. slots must be zero on entry, and a rank + 1 must fit a T.
func fillMaglev[T uint16 | uint32](slots []T, c *canonical) {
	n, m := len(c.hashes), uint64(len(slots))
	quota := maglevQuotas(c.weights, m)
	// The permutation state of each endpoint, by rank: its next preferred
	// slot and its skip.
	pos := make([]uint64, n)
	skip := make([]uint64, n)
	for r, h := range c.hashes {
		pos[r] = reduce(derive(h, 0), m)
		skip[r] = 1 + reduce(derive(h, 1), m-1)
	}
	claim := func(r int) {
		p := pos[r]
		for slots[p] != 0 {
			if p += skip[r]; p >= m {
				p -= m
			}
		}
		slots[p] = T(r + 1)
		if p += skip[r]; p >= m {
			p -= m
		}
		pos[r] = p
	}
	var top uint32
	for _, q := range quota {
		top = max(top, q)
	}
	uniform := true
	for _, q := range quota {
		uniform = uniform && q+1 >= top
	}
	if uniform {
		// Equal weights, or nearly: everyone claims in every round, those
		// one short sit out the last. No schedule needed.
		for round := range top {
			for r := range n {
				if round < quota[r] {
					claim(r)
				}
			}
		}
		return
	}
	// due[t] heads round t's list, linked through after[] and appended at
	// tail[t]; -1 ends a list. Every endpoint is in round 1's, in rank
	// order.
	due := make([]int32, top+1)
	tail := make([]int32, top+1)
	for t := range due {
		due[t], tail[t] = -1, -1
	}
	after := make([]int32, n)
	claimed := make([]uint32, n)
	for r := range n {
		after[r] = -1
		if r > 0 {
			after[r-1] = int32(r)
		}
	}
	due[1], tail[1] = 0, int32(n-1)
	for t := uint64(1); t <= uint64(top); t++ {
		for r := due[t]; r >= 0; {
			nextR := after[r]
			claim(int(r))
			claimed[r]++
			if j := claimed[r]; j < quota[r] {
				// Round floor(j*Q/q) + 1 > t: j*Q/q grows by at
				// least 1 per claim, since q <= Q.
				u := uint64(j)*uint64(top)/uint64(quota[r]) + 1
				after[r] = -1
				if tail[u] < 0 {
					due[u] = r
				} else {
					after[tail[u]] = r
				}
				tail[u] = r
			}
			r = nextR
		}
	}
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
