package subsetting

import (
	"fmt"
	"math"
	"math/bits"
	"slices"
	"strings"
)

// BalancedCache computes [Balanced] subsets and keeps, from one call to the
// next, what makes the next call over a slightly different backend list
// cheap. Its answer is exactly [Balanced]'s for the same arguments,
// whatever the cache saw before: the cache changes the cost, never the
// answer.
//
// Why it pays: the assignment is sequential (row c depends on every row
// before it), and each row walks its client's backends from the highest
// score down until it has its subset, which almost always happens long
// before the end of the list. So the cache keeps, per client, its
// best-scoring backends in order (its candidates: exactly the backends
// scoring at least a per-client cutoff), and replaying the rows walks
// those short lists. The scores are two-level (see [pairScore]): a
// client's order is its own permutation of a fixed set of buckets, then
// the pair's mix within a bucket, so its best backends are the members of
// its first buckets, which the inverse permutation lists in order. A list
// therefore costs a few dozen table reads and one mix per candidate, not
// one mix per backend. The first call, like a change of half the list or
// more, builds every list: for the last of 10,000 clients with subsets of
// 20, about 1 to 1.4 microseconds per client over 100 to 10,000 backends
// and 2 over 50,000, up to a third more than what [Balanced] pays, which
// keeps no lists (BenchmarkBalancedCacheFirst beside BenchmarkBalanced). In
// a small fleet the lists are found by ranking every backend's bucket,
// since a client's first buckets hold too few, and in a large one the
// buckets are larger and the late rows' lists longer. A smaller change
// scores only the backends that joined (one score per client each) and
// drops the ones that left, because a surviving backend keeps its scores.
//
// Where walking buckets pays, a list is built as its row first walks it,
// and holds what the walk went through, to the end of its last bucket,
// except that a bucket whose members were all full then is held as a
// mark, which stands for the bucket's live members: the walk did not
// need their order, and a later one sorts them only if one has room
// again. Elsewhere a list is built as long as its row is expected to
// walk: about subsetSize plus a few while most backends have room, longer
// for the late rows, which skip the backends already full (sized from the
// fraction of backends with room when the row is reached). A walk that
// runs past the end extends the list by walking further buckets, up to
// [maxCandidates]; past that, or in a fleet too small for buckets to pay,
// it continues over the backends that still have room (overflow), so no
// answer depends on how long the lists are.
//
// Memory: the lists hold 1.2 to 2.1 subsetSize entries of 4 bytes per
// client up to clientIndex (the more, the fewer clients per backend, as
// the late rows skip the backends already full), with room for a quarter
// more once built by build or extend, or entered by a new backend (the
// lists a first call's walks build have none, see firstWalk), and the
// rest is a few dozen bytes per backend and 16 KB for the buckets.
// Measured (heap retained after the first call) for client 9,999 of
// 10,000 with subsets of 20: 2.1 MB over 100 backends, 2.7 MB over
// 10,000, 4.8 MB over 50,000. Changes of the backends make lists move; the
// space they leave is reclaimed (see compact), so the lists never take
// much more than 1.25 times their capacity (TestBalancedCacheMemory).
//
// A BalancedCache is not safe for concurrent use. The zero value is ready
// to use.
type BalancedCache struct {
	// Backends, by slot: a backend keeps its slot while it stays in the
	// list, so candidate lists survive changes of the others. Slots of
	// backends that left are reused.
	id     []string
	hash   []uint64
	alive  []bool
	free   []int32
	bucket []uint16 // bucketOf(hash[s])
	order  []int32  // live slots in identity order
	spare  []int32  // the previous order's array, for the next reorder
	ohash  []uint64 // hash[order[i]]: the scan loop reads dense arrays
	obuck  []uint16 // bucket[order[i]]
	bySlot bool     // ohash and obuck are hash and bucket (order[i] == i)

	// The live slots grouped by bucket, in identity order within one:
	// bucket g's are bslot[bstart[g]:bstart[g+1]], their hashes beside
	// them in bhash. Regrouped after every change of the list (one pass,
	// like reorder), for build's walk over a client's first buckets.
	bstart []int32
	bslot  []int32
	bhash  []uint64

	// Candidates of clients 0..len(lists)-1. lists[c] holds, best first
	// (score descending, identity ascending), exactly the live backends
	// whose score for client c is >= cutoff[c], a bucket's members being
	// held either one by one or by its mark (markOf); nil from resize
	// until replay builds it, so that between calls every list is built.
	// want[c] is the length it was built with: an insertion into a full
	// list (len == cap) cuts it back to its best want[c] first.
	lists  [][]int32
	cutoff []uint64
	want   []int32
	seed   []uint64 // clientSeed(c)

	// fixedWant, when > 0, replaces the computed list length: tests make
	// lists tiny so that walks overflow and insertions cut.
	fixedWant int
	// noExtend, set by tests, leaves every walk past the end of a list to
	// overflow.
	noExtend bool
	// discard, set by Balanced and BalancedAll, which throw the cache
	// away after one call, keeps no lists: every call starts from scratch,
	// the rows whose buckets pay for it walk them without a list
	// (walkRow), and the others drop their list once the row is done, the
	// next row's reusing its array (see alloc).
	discard bool

	// What alloc carves lists from, and how much it has carved since the
	// lists were last compacted into one array (see compact).
	slab   []int32
	carved int

	buf []scored // scratch for building lists and for overflow walks
	run run      // scratch for replaying rows
}

// scored is a backend slot with its score for one client.
type scored struct {
	score uint64
	slot  int32
}

// maxCandidates bounds a list's length for subsets of k, so that the
// latest rows, which would have to walk most of the fleet to find the
// few backends with room left, do not keep lists that long. A row whose
// walk is expected to go deeper than the bound finds fewer than about
// (k+4) x backends / maxCandidates backends with room, and scanning
// those (overflow) costs about what walking a list of the bound does.
func maxCandidates(k int) int { return 16*k + 64 }

// wantFor is how many candidates a row should have when open of the nb
// backends still have room: its walk takes k backends from those, so it
// is expected to go about k x nb/open deep (k+4: the feasibility rules
// skip a few). The margin, three standard deviations of that depth (a
// negative binomial: the backends without room are spread over the
// client's order independently of it), makes a walk past the end rare,
// which matters while open is large, since such a walk scans every
// backend with room. Lists are built to exactly their length, so the
// margin need not cover any noise of the length itself, and the early
// rows, which skip almost nothing, get short lists.
func wantFor(k, nb, open int) int {
	p := float64(max(open, 1)) / float64(nb)
	depth := float64(k+4) / p
	w := depth + 3*math.Sqrt(float64(k+4)*(1-p))/p + 4
	return int(min(w, float64(maxCandidates(k)), float64(nb)))
}

// Subset returns what [Balanced] returns for the same arguments, reusing
// the work of the previous call. It retains the candidate lists of
// clients 0..clientIndex until the next call.
func (bc *BalancedCache) Subset(backends []string, subsetSize, clientIndex, clientCount int) ([]string, error) {
	if err := checkArgs(subsetSize, clientIndex, clientCount); err != nil {
		return nil, err
	}
	ids := Normalize(backends)
	if subsetSize >= len(ids) {
		return ids, nil
	}
	bc.sync(ids, clientIndex+1)
	row := bc.replay(subsetSize, clientCount, clientIndex, nil)
	bc.compact()
	return bc.names(row), nil
}

// all returns every client's row, as BalancedAll does; ids are
// normalized and more than k.
func (bc *BalancedCache) all(ids []string, k, count int) [][]string {
	bc.sync(ids, count)
	rows := make([][]int32, count)
	bc.replay(k, count, count-1, rows)
	bc.compact()
	out := make([][]string, count)
	for i, row := range rows {
		out[i] = bc.names(row)
	}
	return out
}

// names maps slots to their identities, sorted.
func (bc *BalancedCache) names(row []int32) []string {
	out := make([]string, len(row))
	for i, s := range row {
		out[i] = bc.id[s]
	}
	slices.Sort(out)
	return out
}

// compare is the order of a client's walk: higher score first, and on the
// (astronomically rare) equal score the smaller identity, which is the
// order of the sorted identities the original algorithm broke ties by.
func (bc *BalancedCache) compare(a, b scored) int {
	if a.score != b.score {
		if a.score > b.score {
			return -1
		}
		return 1
	}
	return strings.Compare(bc.id[a.slot], bc.id[b.slot])
}

// sync makes ids (sorted, distinct) the backends, keeping what it can of
// the lists, and keeps lists for clients 0..clients-1 only; replay builds
// the missing ones.
func (bc *BalancedCache) sync(ids []string, clients int) {
	if bc.discard {
		bc.reset(ids, clients)
		return
	}
	if len(bc.order) == 0 {
		// A first call: every backend is new.
		bc.reset(ids, clients)
		return
	}
	removed, added := bc.diff(ids)
	// A change of half the list or more costs about as much to apply as
	// a rebuild, which leaves no slot garbage behind.
	if len(removed)+len(added) >= len(ids)/2 {
		bc.reset(ids, clients)
		return
	}
	// Removed backends leave the lists and the order before their slots
	// are reused, so that a new backend is never mistaken for one that
	// left.
	for _, s := range removed {
		bc.alive[s] = false
	}
	switch {
	case len(removed) == 0:
	case len(removed) <= 16:
		for _, s := range removed {
			bc.removeEverywhere(s)
		}
		bc.reorder(nil)
	default:
		bc.dropDead()
		bc.reorder(nil)
	}
	for _, s := range removed {
		bc.id[s] = ""
		bc.free = append(bc.free, s)
	}
	if len(added) > 0 {
		newSlots := make([]int32, len(added))
		for i, id := range added {
			newSlots[i] = bc.newSlot(id)
		}
		bc.reorder(newSlots)
		for _, s := range newSlots {
			bc.insertEverywhere(s)
		}
	}
	if len(removed)+len(added) > 0 {
		bc.group()
	}
	bc.resize(clients)
}

// diff compares ids with the current backends, both sorted: the slots of
// backends that left and the identities that joined.
func (bc *BalancedCache) diff(ids []string) (removed []int32, added []string) {
	i, j := 0, 0
	for i < len(bc.order) || j < len(ids) {
		switch {
		case j == len(ids) || i < len(bc.order) && bc.id[bc.order[i]] < ids[j]:
			removed = append(removed, bc.order[i])
			i++
		case i == len(bc.order) || ids[j] < bc.id[bc.order[i]]:
			added = append(added, ids[j])
			j++
		default:
			i++
			j++
		}
	}
	return removed, added
}

// reset forgets every list and gives the backends ids slots 0..len-1.
// It keeps ids, which its callers normalized into a slice of their own.
func (bc *BalancedCache) reset(ids []string, clients int) {
	n := len(ids)
	bc.id = ids
	bc.hash = idHashes(ids)
	bc.bucket = slices.Grow(bc.bucket[:0], n)[:n]
	for i, h := range bc.hash {
		bc.bucket[i] = bucketOf(h)
	}
	bc.alive = slices.Grow(bc.alive[:0], n)[:n]
	bc.order = slices.Grow(bc.order[:0], n)[:n]
	for i := range ids {
		bc.alive[i] = true
		bc.order[i] = int32(i)
	}
	// The order is the slots' until a change of the backends reorders
	// them, so until then the arrays by order are those by slot: a first
	// call copies neither (see reorder).
	bc.ohash, bc.obuck, bc.bySlot = bc.hash, bc.bucket, true
	bc.group()
	bc.free = bc.free[:0]
	clear(bc.lists) // keeps nothing alive; resize re-slices
	bc.lists = bc.lists[:0]
	bc.carved = 0 // what the lists took is garbage now, but for the array being carved
	bc.cutoff, bc.want, bc.seed = bc.cutoff[:0], bc.want[:0], bc.seed[:0]
	if !bc.discard {
		// With discard, replay makes room for lists only if a row needs
		// one (see walkRow): most rows of a large fleet do not.
		bc.resize(clients)
	}
}

// newSlot gives identity id a slot, reusing a free one if any.
func (bc *BalancedCache) newSlot(id string) int32 {
	h := idHash(id)
	if n := len(bc.free); n > 0 {
		s := bc.free[n-1]
		bc.free = bc.free[:n-1]
		bc.id[s], bc.hash[s], bc.bucket[s], bc.alive[s] = id, h, bucketOf(h), true
		return s
	}
	bc.id = append(bc.id, id)
	bc.hash = append(bc.hash, h)
	bc.bucket = append(bc.bucket, bucketOf(h))
	bc.alive = append(bc.alive, true)
	return int32(len(bc.id) - 1)
}

// reorder rebuilds the identity order of the live slots after a change,
// merging the survivors (in order already) with the new slots added (in
// identity order too).
func (bc *BalancedCache) reorder(added []int32) {
	merged := slices.Grow(bc.spare[:0], len(bc.order)+len(added))
	i := 0
	for _, s := range bc.order {
		if !bc.alive[s] {
			continue
		}
		for i < len(added) && bc.id[added[i]] < bc.id[s] {
			merged = append(merged, added[i])
			i++
		}
		merged = append(merged, s)
	}
	merged = append(merged, added[i:]...)
	bc.order, bc.spare = merged, bc.order
	if bc.bySlot {
		// The arrays by slot, as reset left them, which newSlot may
		// have written to or moved since: the arrays by order get
		// arrays of their own.
		bc.ohash, bc.obuck, bc.bySlot = nil, nil, false
	}
	bc.ohash = slices.Grow(bc.ohash[:0], len(merged))[:len(merged)]
	bc.obuck = slices.Grow(bc.obuck[:0], len(merged))[:len(merged)]
	for i, s := range merged {
		bc.ohash[i], bc.obuck[i] = bc.hash[s], bc.bucket[s]
	}
}

// group rebuilds the grouping of the live slots by bucket from the order
// (a counting sort), keeping identity order within a bucket.
func (bc *BalancedCache) group() {
	start := clearedInt32(bc.bstart, buckets+1)
	for _, g := range bc.obuck {
		start[g+1]++
	}
	for g := range buckets {
		start[g+1] += start[g]
	}
	// The arrays run groupPad entries past the last bucket, which gather
	// reads (and ignores) when it scores a bucket as 4 or 8 members.
	n := len(bc.order)
	bc.bslot = slices.Grow(bc.bslot[:0], n+groupPad)[:n+groupPad]
	bc.bhash = slices.Grow(bc.bhash[:0], n+groupPad)[:n+groupPad]
	clear(bc.bslot[n:])
	clear(bc.bhash[n:])
	for i, g := range bc.obuck {
		p := start[g]
		bc.bslot[p], bc.bhash[p] = bc.order[i], bc.ohash[i]
		start[g]++
	}
	// Each start[g] has moved to its bucket's end, the next one's start.
	copy(start[1:], start[:buckets])
	start[0] = 0
	bc.bstart = start
}

// resize keeps the lists of clients 0..clients-1 and makes room for the
// missing ones, which replay builds when it reaches them.
func (bc *BalancedCache) resize(clients int) {
	have := len(bc.lists)
	if clients <= have {
		clear(bc.lists[clients:])
		bc.lists, bc.cutoff, bc.want, bc.seed = bc.lists[:clients], bc.cutoff[:clients], bc.want[:clients], bc.seed[:clients]
		return
	}
	bc.lists = slices.Grow(bc.lists, clients-have)[:clients]
	bc.cutoff = slices.Grow(bc.cutoff, clients-have)[:clients]
	bc.want = slices.Grow(bc.want, clients-have)[:clients]
	bc.seed = slices.Grow(bc.seed, clients-have)[:clients]
	for c := have; c < clients; c++ {
		bc.lists[c], bc.cutoff[c], bc.want[c] = nil, 0, 0
		bc.seed[c] = clientSeed(c)
	}
}

// seedOf is clientSeed(c), from the clients' array where the cache keeps
// one (the updates read it for every client), else computed.
func (bc *BalancedCache) seedOf(c int) uint64 {
	if c < len(bc.seed) {
		return bc.seed[c]
	}
	return clientSeed(c)
}

// walkable reports whether n more candidates are cheaper to find by
// walking a client's buckets (about n x buckets/backends of them) than by
// scoring every backend.
func (bc *BalancedCache) walkable(n int) bool {
	nb := len(bc.order)
	return n < nb && n*buckets < nb*nb
}

// build computes client c's candidates from scratch: its best want
// backends (more only on equal scores), and the cutoff is the last one's
// score, so the list is exactly the backends scoring at least that.
//
// It is for lists too long to find by walking the client's buckets
// ([BalancedCache.walkable]; the others are built by firstWalk): small
// fleets, or the long lists of the late rows, where the walk would visit
// more buckets than there are backends. It ranks every
// backend's bucket, at a few table reads each, and scores and sorts only
// the backends in the blocks of 64 ranks from the top that hold want of
// them. A rank's top bits are a score's, so those blocks hold the best
// want backends and little more (a block holds backends/64 of them), and
// grouping the candidates by block (a counting sort) leaves each block's
// few to sort. Ranking and grouping have no branch that depends on a
// rank: in a small fleet every row pays them for every backend, and
// mispredicted branches would cost more than the table reads.
func (bc *BalancedCache) build(c, want int) {
	seed, nb := bc.seedOf(c), len(bc.order)
	o := bc.orderOf(c)
	o.full()
	r := &bc.run
	const blocks = buckets >> halfBits
	var count, pos [blocks]int32
	ranks := slices.Grow(r.ranks[:0], nb)[:nb]
	for i, g := range bc.obuck {
		rank := o.rank(g)
		ranks[i] = rank
		count[rank>>halfBits]++
	}
	// The candidates: the members of blocks low and up, the fewest from
	// the top that hold want (every backend if there are fewer), placed
	// by block, best first, and in identity order within one; the others
	// all go to one slot past them.
	low, n := blocks, 0
	for low > 0 && n < want {
		low--
		n += int(count[low])
	}
	big := int32(0) // the most candidates in one block
	at := int32(0)
	for b := blocks - 1; b >= low; b-- {
		pos[b] = at
		at += count[b]
		big = max(big, count[b])
	}
	for b := range low {
		pos[b] = int32(n)
	}
	idx := slices.Grow(r.idx[:0], n+1)[:n+1]
	for i, rank := range ranks {
		b := int32(rank >> halfBits)
		p := pos[b&(blocks-1)]
		idx[p] = int32(i)
		pos[b&(blocks-1)] = p + 1 + (b-int32(low))>>31 // + 1 for a candidate, + 0 otherwise
	}
	buf := slices.Grow(bc.buf[:0], n)[:n]
	for j, i := range idx[:n] {
		buf[j] = scored{pairScore(ranks[i], seed, bc.ohash[i]), bc.order[i]}
	}
	r.ranks, r.idx = ranks, idx
	// A block's members rank above the next block's, so an insertion
	// sort of the whole never moves one across a block's boundary and
	// costs what sorting each block would; being stable, it leaves equal
	// scores in identity order, as compare wants. Blocks of more than a
	// few dozen (a fleet of thousands with lists of hundreds, or the
	// crowding of the tests) go to sortScored.
	if big > 32 {
		bc.sortScored(buf)
	} else {
		insertionSort(buf)
	}
	// Cut to want, keeping the backends that tie with the last one kept.
	if len(buf) > want {
		n := want
		for n < len(buf) && buf[n].score == buf[want-1].score {
			n++
		}
		buf = buf[:n]
	}
	var cut uint64
	if len(buf) < nb {
		cut = buf[len(buf)-1].score
	}
	list := bc.room(bc.lists[c][:0], len(buf))
	for _, x := range buf {
		list = append(list, x.slot)
	}
	bc.lists[c], bc.cutoff[c], bc.want[c] = list, cut, int32(len(list))
	bc.buf = buf
}

// groupPad is the most members gather scores at a time, and how far the
// grouped arrays (bslot, bhash) run past their end to let it.
const groupPad = 8

// walkRow is a row's walk when its list is not kept (discard): gather
// takes the client's buckets from the top, a batch at a time, each as
// many as the picks left are expected to walk, and the picker takes them
// as the row's list would give them. Past maxCandidates, or where a
// batch would cost more than scanning the backends with room, it leaves
// the rest to overflow, and returns the cutoff below the buckets walked.
// Without a list there is nothing to cut or to copy, and no margin to
// walk past the row's needs: an early row walks about a quarter fewer
// buckets than building its list would. And gather skips the buckets
// whose members are all full (see run.roomIn), which the picker would
// skip one by one: most of them, in the last rows.
func (bc *BalancedCache) walkRow(c, k int, p *picker) uint64 {
	seed := bc.seedOf(c)
	o := bc.orderOf(c)
	r := &bc.run
	out := r.slots[:cap(r.slots)]
	top, depth := buckets-1, 0
	for p.room > 0 && top >= 0 {
		// The members of the buckets not skipped, of which a fraction
		// open/live has room.
		want := min(p.room*r.live/max(len(r.open), 1), maxCandidates(k)-depth)
		if depth > 0 && (want <= 0 || !bc.walkable(want)) {
			break
		}
		if len(out) < want+groupPad {
			out = make([]int32, 2*want+64)
		}
		var n int
		out, n, top, _ = bc.gather(seed, o, out, 0, top, want, r.roomIn, r.live, false)
		for _, s := range out[:n] {
			// As in replay's walk of a list.
			if p.n[s] < p.hi {
				p.consider(s)
				if p.room == 0 {
					break
				}
			}
		}
		depth += n
	}
	r.slots = out[:0]
	// Every backend in the buckets walked, those of rank top+1 and up,
	// has been considered.
	return uint64(top+1) << (64 - bucketBits)
}

// gather writes to out, from out[n] on, the members of the client's
// buckets of ranks top, top-1, ... in walk order, whole buckets, until it
// holds at least want (or the ranks run out), and returns out (grown if
// a large bucket needed it), its new length, the next rank to walk (-1
// if none) and the rank of the last bucket it took members from. out
// must have room for want+groupPad. With skip non-nil it leaves out the
// buckets g with skip[g] == 0, or with mark set writes a mark for each
// that has members (see markOf) in their place, which do not count
// towards want; density is the members of the buckets it does not skip,
// which sizes its batches of ranks.
//
// Every row walks its buckets once, so this is most of a first call's
// time, and it is written so that few branches depend on a bucket's size,
// which is random, and none on a score: a bucket of 2 to 4 members (or
// of 5 to 8) is scored as 4 (or 8), the slots past its end standing in
// for the missing members with the highest key, and sorted by a sorting
// network. A single member, the usual case in a fleet of fewer backends
// than buckets, is taken as it is, and only buckets of more than 8 are
// sorted by comparisons. The keys are the pair's mix (see pairScore)
// with the member's position in the bucket in place of the bits the
// score drops: within a bucket, where the rank is the same, they sort
// like the scores, equal scores by position, which is identity order, as
// compare wants.
func (bc *BalancedCache) gather(seed uint64, o *bucketOrder, out []int32, n, top, want int, skip []int32, density int, mark bool) ([]int32, int, int, int) {
	r := &bc.run
	sparse := len(bc.order) < buckets // most buckets empty or single
	last := top
walk:
	for top >= 0 && n < want {
		// The next ranks' buckets, about as many as the backends still
		// wanted fill.
		gs := r.gs[:min((want-n)*buckets/max(density, 1)+2, len(r.gs), top+1)]
		o.buckets(top, gs)
		for j, g := range gs {
			if skip != nil && skip[g] == 0 {
				if mark && bc.bstart[g+1] > bc.bstart[g] {
					// A mark is not a member: the batch goes on as far.
					out[n] = markOf(g)
					n++
					if want++; want+groupPad > len(out) {
						out = append(out, make([]int32, len(out))...)
					}
				}
				continue
			}
			from := int(bc.bstart[g])
			m := int(bc.bstart[g+1]) - from
			if m <= 4 && (!sparse || m > 1) {
				// The usual case in a dense fleet, empty and single buckets
				// included, so that their sizes cost no branch.
				sort4(seed, m, (*[4]uint64)(bc.bhash[from:]), (*[4]int32)(bc.bslot[from:]), (*[4]int32)(out[n:]))
			} else {
				switch {
				case m == 0:
					continue
				case m == 1:
					// The usual case in a sparse fleet.
					out[n] = bc.bslot[from]
				case m <= groupPad:
					sort8(seed, m, (*[8]uint64)(bc.bhash[from:]), (*[8]int32)(bc.bslot[from:]), (*[8]int32)(out[n:]))
				default:
					if n+m+groupPad > len(out) {
						out = append(out[:n], make([]int32, m+groupPad+len(out))...)
					}
					bc.sortMembers(seed, uint16(top-j), from, m, out[n:n+m])
				}
			}
			if m > 0 {
				last = top - j
			}
			n += m
			if n >= want {
				top -= j + 1
				break walk
			}
		}
		top -= len(gs)
	}
	return out, n, top, last
}

// sortMembers writes to d the slots of the m members of the bucket of
// rank rank whose grouped entries start at from, in walk order for the
// client with seed seed: gather's way for buckets of more than groupPad.
// It sorts their keys (memberKey) as plain integers, which is faster than
// sorting scored pairs (sortBucket), unless the positions do not fit in
// the bits the keys have for them (a bucket of more than 4,096, in a
// fleet of tens of millions).
func (bc *BalancedCache) sortMembers(seed uint64, rank uint16, from, m int, d []int32) {
	const low = 1<<bucketBits - 1
	if m > low+1 {
		members := bc.buf[:0]
		for i := from; i < from+m; i++ {
			members = append(members, scored{pairScore(rank, seed, bc.bhash[i]), bc.bslot[i]})
		}
		bc.sortBucket(members)
		for i, x := range members {
			d[i] = x.slot
		}
		bc.buf = members
		return
	}
	keys := bc.run.keys[:0]
	for i, h := range bc.bhash[from : from+m] {
		keys = append(keys, memberKey(seed, h, i, m))
	}
	if m <= 16 {
		for i := 1; i < m; i++ {
			x, j := keys[i], i
			for ; j > 0 && keys[j-1] > x; j-- {
				keys[j] = keys[j-1]
			}
			keys[j] = x
		}
	} else {
		slices.Sort(keys)
	}
	for i, k := range keys {
		d[i] = bc.bslot[from+int(k&low)]
	}
	bc.run.keys = keys
}

// memberKey is gather's sort key of member i of a bucket of m, whose
// identity hash is h, for the client with seed seed: ascending keys are
// descending scores, then ascending positions (i < 4,096). A slot past
// the bucket's end (i >= m) gets the highest key, without a branch.
func memberKey(seed, h uint64, i, m int) uint64 {
	const low = 1<<bucketBits - 1 // the bits of the mix that a score drops
	return ^pairMix(seed, h)&^low | uint64(i) | uint64(int64(m-1-i)>>63)
}

// sort2 returns a and b in ascending order, without a branch (the
// compiler makes a branch of min and max, which random keys mispredict).
func sort2(a, b uint64) (uint64, uint64) {
	_, lt := bits.Sub64(b, a, 0) // 1 if b < a
	t := (a ^ b) & -lt
	return a ^ t, b ^ t
}

// sort4 writes to d the slots s of the m members (m <= 4) of a bucket
// with identity hashes h, in walk order for the client with seed seed,
// and after them copies of the last slot: the keys (memberKey) sorted by
// the optimal network of 5 comparators. It is a function of its own
// because its caller, gather, has more live values than registers, and
// the mixes and the network run faster with all of them in registers.
func sort4(seed uint64, m int, h *[4]uint64, s *[4]int32, d *[4]int32) {
	k0, k1 := memberKey(seed, h[0], 0, m), memberKey(seed, h[1], 1, m)
	k2, k3 := memberKey(seed, h[2], 2, m), memberKey(seed, h[3], 3, m)
	k0, k1 = sort2(k0, k1)
	k2, k3 = sort2(k2, k3)
	k0, k2 = sort2(k0, k2)
	k1, k3 = sort2(k1, k3)
	k1, k2 = sort2(k1, k2)
	// A missing member's key, the highest, picks the last slot.
	d[0], d[1], d[2], d[3] = s[k0&3], s[k1&3], s[k2&3], s[k3&3]
}

// sort8 is sort4 for a bucket of m <= 8, by the optimal network of 19
// comparators for 8 inputs, in 6 rounds (Knuth, TAOCP 5.3.4).
func sort8(seed uint64, m int, h *[8]uint64, s *[8]int32, d *[8]int32) {
	k0, k1 := memberKey(seed, h[0], 0, m), memberKey(seed, h[1], 1, m)
	k2, k3 := memberKey(seed, h[2], 2, m), memberKey(seed, h[3], 3, m)
	k4, k5 := memberKey(seed, h[4], 4, m), memberKey(seed, h[5], 5, m)
	k6, k7 := memberKey(seed, h[6], 6, m), memberKey(seed, h[7], 7, m)
	k0, k2 = sort2(k0, k2)
	k1, k3 = sort2(k1, k3)
	k4, k6 = sort2(k4, k6)
	k5, k7 = sort2(k5, k7)
	k0, k4 = sort2(k0, k4)
	k1, k5 = sort2(k1, k5)
	k2, k6 = sort2(k2, k6)
	k3, k7 = sort2(k3, k7)
	k0, k1 = sort2(k0, k1)
	k2, k3 = sort2(k2, k3)
	k4, k5 = sort2(k4, k5)
	k6, k7 = sort2(k6, k7)
	k2, k4 = sort2(k2, k4)
	k3, k5 = sort2(k3, k5)
	k1, k4 = sort2(k1, k4)
	k3, k6 = sort2(k3, k6)
	k1, k2 = sort2(k1, k2)
	k3, k4 = sort2(k3, k4)
	k5, k6 = sort2(k5, k6)
	d[0], d[1], d[2], d[3] = s[k0&7], s[k1&7], s[k2&7], s[k3&7]
	d[4], d[5], d[6], d[7] = s[k4&7], s[k5&7], s[k6&7], s[k7&7]
}

// insertionSort sorts buf by descending score, stably.
func insertionSort(buf []scored) {
	for i := 1; i < len(buf); i++ {
		x := buf[i]
		j := i
		for ; j > 0 && buf[j-1].score < x.score; j-- {
			buf[j] = buf[j-1]
		}
		buf[j] = x
	}
}

// extend appends to client c's list its next n backends (more only on
// equal scores, fewer only when none are left), those just below the
// cutoff, and lowers the cutoff to the last one's score. It walks the
// client's buckets from the cutoff's down (the permutation's inverse)
// and scores only their members: about n x buckets/backends buckets and
// n mixes, whatever the fleet's size.
//
// Lists are built short, for the walk their row is expected to take, and
// extended when a walk runs past the end: extending costs about what
// building longer would have, but only for the rows that need it.
func (bc *BalancedCache) extend(c, n int) {
	seed := bc.seedOf(c)
	list := bc.lists[c]
	want := len(list) + n
	list = bc.room(list, want)
	o := bc.orderOf(c)
	cut := bc.cutoff[c]
	r := int(cut >> (64 - bucketBits))
	nb := len(bc.order)
	members := bc.buf[:0]
	for r >= 0 && len(list) < want {
		// The next ranks' buckets first, about as many as the backends
		// still wanted fill, in a loop without branches that the
		// processor overlaps; the walk below mispredicts on every
		// bucket's size anyway.
		gs := bc.run.gs[:min((want-len(list))*buckets/nb+2, len(bc.run.gs), r+1)]
		o.buckets(r, gs)
		r0 := r
		r -= len(gs)
		for j, g := range gs {
			from, to := bc.bstart[g], bc.bstart[g+1]
			if from == to {
				continue
			}
			rank := uint16(r0 - j)
			members = members[:0]
			for i := from; i < to; i++ {
				if sc := pairScore(rank, seed, bc.bhash[i]); sc < cut {
					members = append(members, scored{sc, bc.bslot[i]})
				}
			}
			// Buckets come in descending rank, the top bits of the score,
			// so sorting each one sorts the list.
			bc.sortBucket(members)
			if need := want - len(list); len(members) >= need && need > 0 {
				// The last bucket needed: keep its best, and those that
				// tie with the last one kept.
				m := need
				for m < len(members) && members[m].score == members[need-1].score {
					m++
				}
				members = members[:m]
			}
			for _, x := range members {
				list = append(list, x.slot)
			}
			if len(members) > 0 {
				cut = members[len(members)-1].score
			}
			if len(list) >= want {
				r = r0 - j - 1
				break
			}
		}
	}
	bc.buf = members
	if len(list) < want {
		cut = 0 // every backend is in the list
	}
	bc.lists[c], bc.cutoff[c], bc.want[c] = list, cut, int32(len(list))
}

// room returns list with room for n entries and a quarter more for
// insertions (see roomFor), moving it if it has too little room or far
// too much.
func (bc *BalancedCache) room(list []int32, n int) []int32 {
	want := roomFor(n)
	if cap(list) >= want && cap(list) <= 2*want {
		return list
	}
	return append(bc.alloc(want), list...)
}

// roomFor is the capacity a list of n entries gets: a quarter more for
// insertions (a list grows by about its length/backends per new backend;
// insertEverywhere cuts it back when it fills).
func roomFor(n int) int { return n + n/4 + 2 }

// slabTail returns the unused end of the array alloc carves lists from,
// at least need entries long, for firstWalk to gather a list into where
// carve then keeps it. out is what firstWalk has gathered so far, n
// entries: a previous tail, or an array gather grew it into; they are
// moved to the start of the tail returned if they are not there. A tail
// too short for need starts a new array, as alloc does.
func (bc *BalancedCache) slabTail(out []int32, n, need int) []int32 {
	t := bc.slab[len(bc.slab):cap(bc.slab)]
	if len(t) < need {
		if bc.discard {
			// Every list starts at the array's start (see alloc).
			bc.slab = make([]int32, 0, max(2*need, 1<<10))
		} else {
			bc.slab = make([]int32, 0, max(need, min(bc.carved/4, 1<<16), 1<<10))
		}
		t = bc.slab[:cap(bc.slab)]
	}
	if n > 0 && &t[0] != &out[0] {
		copy(t, out[:n])
	}
	return t
}

// carve keeps the first n entries of slabTail's tail as a list with
// capacity c (c >= n, within the tail), as alloc does.
func (bc *BalancedCache) carve(n, c int) []int32 {
	if bc.discard {
		return bc.slab[:n:c]
	}
	l := len(bc.slab)
	bc.slab = bc.slab[:l+c]
	bc.carved += c
	return bc.slab[l : l+n : l+c]
}

// alloc returns an empty list with room for n, carved from a shared
// array: one allocation per many lists instead of one each. The capacity
// is exact, so a list that outgrows it moves out rather than over its
// neighbour. An array holds a quarter of what was carved before it (up to
// 256 KB), so that a first call makes a few dozen allocations and the
// unused end of the last array stays small beside the lists.
//
// With discard set, the only list alive is the row's own, and a new one
// replaces it (room copies it over), so every list starts at the
// array's start, copied onto itself if it moves.
func (bc *BalancedCache) alloc(n int) []int32 {
	if bc.discard {
		if cap(bc.slab) < n {
			bc.slab = make([]int32, 0, max(2*n, 1<<10))
		}
		return bc.slab[:0:n]
	}
	if cap(bc.slab)-len(bc.slab) < n {
		bc.slab = make([]int32, 0, max(n, min(bc.carved/4, 1<<16), 1<<10))
	}
	l := len(bc.slab)
	bc.slab = bc.slab[:l+n]
	bc.carved += n
	return bc.slab[l : l : l+n]
}

// compact copies the lists into one new array once the space that lists
// moving out (or dropped by resize) left behind in the shared arrays
// exceeds a quarter of the lists' own. That space stays allocated while
// any list carved next to it lives, so without this it would grow with
// every change of the backends that moves a few lists (by half over 3,000
// rolling restarts at 10,000 clients x 10,000 backends, and rising). With
// it the shared arrays hold at most 1.25 times the lists' capacity plus
// the unused end of the one being carved, for a copy of the lists each
// time moves have carved a quarter of their size again. Called between
// calls, when nothing holds a list but bc.lists.
func (bc *BalancedCache) compact() {
	live := 0
	for _, list := range bc.lists {
		live += cap(list)
	}
	if bc.carved-live <= live/4 {
		return
	}
	slab := make([]int32, live)
	at := 0
	for c, list := range bc.lists {
		n := copy(slab[at:], list)
		bc.lists[c] = slab[at : at+n : at+cap(list)]
		at += cap(list)
	}
	bc.slab, bc.carved = slab, live
}

// sortBucket sorts one bucket's members into walk order. Buckets hold a
// few backends each, for which an insertion sort beats any other; a large
// one (a fleet of hundreds of thousands) goes to sortScored. The members
// come in identity order and the insertion sort is stable, so comparing
// the scores alone leaves equal scores in identity order, as compare
// wants.
func (bc *BalancedCache) sortBucket(buf []scored) {
	if len(buf) > 16 {
		bc.sortScored(buf)
		return
	}
	insertionSort(buf)
}

// scoreOf is slot s's score for the client with seed seed, computed
// directly: rounds+1 mixes, for the insertions, which score the entries
// of the few lists a new backend enters as they search them.
func (bc *BalancedCache) scoreOf(seed uint64, s int32) uint64 {
	return pairScore(bucketRank(seed, bc.bucket[s]), seed, bc.hash[s])
}

// sortScored sorts a client's candidates into walk order. Sorting the
// scores as plain integers (with the candidate's position in the low
// bits) is several times faster than sorting the pairs with a comparison
// function, and this sort is most of a first call's time after the
// mixing; the rare pairs whose scores agree above the position bits are
// then put in exact order.
func (bc *BalancedCache) sortScored(buf []scored) {
	if len(buf) < 2 {
		return
	}
	bits := 1
	for 1<<bits < len(buf) {
		bits++
	}
	mask := uint64(1)<<bits - 1
	keys := bc.run.keys[:0]
	for i, x := range buf {
		keys = append(keys, ^x.score&^mask|uint64(i)) // ascending keys: descending scores
	}
	slices.Sort(keys)
	tmp := append(bc.run.tmp[:0], buf...)
	for i, key := range keys {
		buf[i] = tmp[key&mask]
	}
	for i := 0; i < len(keys); {
		j := i + 1
		for j < len(keys) && keys[j]&^mask == keys[i]&^mask {
			j++
		}
		if j-i > 1 {
			slices.SortFunc(buf[i:j], bc.compare)
		}
		i = j
	}
	bc.run.keys, bc.run.tmp = keys, tmp
}

// dropDead removes dead slots from every list. A list keeps its cutoff:
// the backends left in it are still exactly the live ones scoring at
// least that.
func (bc *BalancedCache) dropDead() {
	for c, list := range bc.lists {
		kept := list[:0]
		for _, s := range list {
			if s < 0 || bc.alive[s] {
				kept = append(kept, s) // a mark stands for the live members
			}
		}
		bc.lists[c] = kept
	}
}

// removeEverywhere takes the backend in slot s, which is leaving, out of
// the lists that hold it: those of the clients for which it scores at
// least the cutoff. One score per client instead of dropDead's pass over
// every list entry. Every list is built by then (see lists).
func (bc *BalancedCache) removeEverywhere(s int32) {
	g, h := bc.bucket[s], bc.hash[s]
	for c, list := range bc.lists {
		seed := bc.seed[c]
		// As in insertEverywhere, the rank alone rules out most clients.
		rank, ok := bucketRankFrom(seed, g, uint16(bc.cutoff[c]>>(64-bucketBits)))
		if !ok || pairScore(rank, seed, h) < bc.cutoff[c] {
			continue
		}
		// A linear search: a binary one would score every entry it
		// probes, at rounds+1 mixes each, while the slots compare at a
		// load each, and only the few lists that hold s are searched.
		if i := slices.Index(list, s); i >= 0 {
			bc.lists[c] = slices.Delete(list, i, i+1)
		}
	}
}

// insertEverywhere adds the new backend in slot s to the lists of the
// clients for which it scores at least the cutoff.
func (bc *BalancedCache) insertEverywhere(s int32) {
	g, h := bc.bucket[s], bc.hash[s]
	for c, list := range bc.lists {
		seed := bc.seed[c]
		// The rank alone rules out most clients (few buckets reach a
		// cutoff's), sparing the pair's mix, and mostly at three of its
		// four mixes.
		rank, ok := bucketRankFrom(seed, g, uint16(bc.cutoff[c]>>(64-bucketBits)))
		if !ok {
			continue
		}
		sc := pairScore(rank, seed, h)
		if sc < bc.cutoff[c] {
			continue
		}
		i := bc.insertAt(seed, list, scored{sc, s})
		if i > 0 && list[i-1] == markOf(g) {
			continue // the bucket's mark stands for it
		}
		if len(list) == cap(list) {
			// Full: cut it back to its best want[c], as built (keeping
			// the backends that tie with the last one kept), and if that
			// leaves it full (ties, a list built with every backend, or
			// one a first call built without room, see firstWalk), give
			// it room. The cutoff rises to the last one kept, so the
			// list stays exactly the backends at or above it.
			if w := int(bc.want[c]); w < len(list) {
				t := bc.entryScore(seed, list[w-1])
				for w < len(list) && list[w] >= 0 && bc.scoreOf(seed, list[w]) == t {
					w++
				}
				list, bc.cutoff[c] = list[:w], t
				if sc < t {
					bc.lists[c] = list
					continue
				}
			}
			if len(list) == cap(list) {
				list = append(bc.alloc(roomFor(len(list)+1)), list...)
			}
		}
		list = list[:len(list)+1]
		copy(list[i+1:], list[i:])
		list[i] = s
		bc.lists[c] = list
	}
}

// insertAt is where x goes in list, the list of the client with seed
// seed. A mark goes before every member of its bucket, so a backend
// whose bucket's mark is in the list goes right after it.
func (bc *BalancedCache) insertAt(seed uint64, list []int32, x scored) int {
	i, _ := slices.BinarySearchFunc(list, x, func(e int32, x scored) int {
		if e < 0 {
			if bc.entryScore(seed, e)|(1<<(64-bucketBits)-1) >= x.score {
				return -1
			}
			return 1
		}
		return bc.compare(scored{bc.scoreOf(seed, e), e}, x)
	})
	return i
}

// taken is added to a backend's count while the row being built holds it
// (see run.n): far above any count, far below overflow.
const taken = 1 << 30

// run is the state of one replay of the rows, per slot unless noted.
type run struct {
	// Clients so far; while the row being built holds a slot, its count
	// is raised by taken, so that one test (n >= hi) skips both the full
	// backends and those already in the row.
	n []int32
	// Slots with fewer than lo clients, linked per count, so that a row
	// finds the backends it is forced to take without a scan. Only the
	// last lo rows can be forced to take any, so the lists are built when
	// the first of them is reached (linked is then true) and kept from
	// there on.
	head, next, prev []int32
	linked           bool
	open             []int32 // slots with fewer than hi clients, any order
	// Per bucket, its members with fewer than hi clients, and the
	// members of the buckets that have any: walkRow and firstWalk skip
	// the others, and a list's walk skips their marks.
	roomIn []int32
	live   int
	pos    []int32 // index in open
	rooms  []int32 // backends per room (hi - n), 0..hi
	row    []int32
	keys   []uint64   // sortScored's and sortMembers'
	slots  []int32    // gather's output, for walkRow
	ranks  []uint16   // build's
	idx    []int32    // build's
	gs     [64]uint16 // gather's and extend's next buckets
	tmp    []scored   // sortScored's
	o      bucketOrder
	oc     int // the client whose order o is, plus one (0: none)
}

// orderOf is client c's bucket order, started only if the last one
// started was another client's, so that a row which builds, extends and
// overflows its list fills each word once. The words of the last rounds
// are filled as they are needed (see bucketOrder): the callers that read
// arbitrary ranks fill them all. A client's seed depends on its index
// alone, so the order stays valid from one call to the next.
func (bc *BalancedCache) orderOf(c int) *bucketOrder {
	r := &bc.run
	if r.oc != c+1 {
		r.o.start(bc.seedOf(c))
		r.oc = c + 1
	}
	return &r.o
}

// replay computes rows 0..last of the assignment of k backends to each of
// count clients from the candidate lists, building those that are missing
// or too short, and returns row last. With rows non-nil it also stores
// every row there. The decisions are exactly those of the original
// algorithm (assignRef in the tests): only the bookkeeping differs, each
// row's feasibility terms being kept up to date per pick instead of
// summed over all backends.
func (bc *BalancedCache) replay(k, count, last int, rows [][]int32) []int32 {
	nb := len(bc.order)
	total := count * k
	lo, hi := total/nb, (total+nb-1)/nb
	r := &bc.run
	slots := len(bc.id)
	r.n = clearedInt32(r.n, slots)
	r.next = clearedInt32(r.next, slots)
	r.prev = clearedInt32(r.prev, slots)
	r.pos = clearedInt32(r.pos, slots)
	r.head = clearedInt32(r.head, lo)
	for i := range r.head {
		r.head[i] = -1
	}
	r.rooms = clearedInt32(r.rooms, hi+1)
	r.rooms[hi] = int32(nb)
	r.open = append(r.open[:0], bc.order...)
	for i, s := range r.open {
		r.pos[s] = int32(i)
	}
	r.roomIn = clearedInt32(r.roomIn, buckets)
	for g := range r.roomIn {
		r.roomIn[g] = bc.bstart[g+1] - bc.bstart[g]
	}
	r.live = nb
	r.linked = false
	var flat []int32
	if rows != nil {
		flat = make([]int32, len(rows)*k)
	}

	// The feasibility terms of the original, kept per pick: deficit is
	// the sum of max(lo-n, 0), and usable the sum of min(hi-n, L) with L
	// the clients after this one, as totalRoom - over, over being the sum
	// of max(hi-n-L, 0) and ge the number of backends with room >= L.
	deficit := nb * lo
	totalRoom := nb * hi
	L := count - 1
	over := nb * max(hi-L, 0)
	ge := 0
	if hi >= L {
		ge = nb
	}
	// wantFor's square root and divisions are a tenth of an update's time
	// in a small fleet if taken per row, and its argument, the backends
	// with room, changes only when one fills.
	want, wantOpen := bc.fixedWant, -1
	for c := 0; c <= last; c++ {
		if bc.fixedWant == 0 && len(r.open) != wantOpen {
			want, wantOpen = wantFor(k, nb, len(r.open)), len(r.open)
		}
		// The clients after this one can complete the assignment iff
		// (Gale-Ryser, all rows summing to k) every backend can still
		// reach lo, the deficits to lo fit in their L*k picks, and the
		// room below hi (at most L per backend) holds them. So: a backend
		// short of lo by left must be taken now (forced); at least needDef
		// picks must go to backends short of lo; and at most maxLow to
		// backends whose room is below left, since only those lose usable
		// room when taken.
		left := L + 1
		row := r.row[:0]
		if v := lo - left; v >= 0 {
			if !r.linked {
				for _, s := range bc.order {
					if n := r.n[s]; int(n) < lo {
						r.link(s, n)
					}
				}
				r.linked = true
			}
			for s := r.head[v]; s >= 0; s = r.next[s] {
				row = append(row, s)
				r.n[s] += taken
			}
		}
		p := picker{
			lo: int32(lo), hi: int32(hi), left: int32(left),
			needDef: deficit - len(row) - L*k,
			maxLow:  totalRoom - over - L*k,
			room:    k - len(row),
			n:       r.n, row: row,
		}
		// Without lists to keep, a row whose walk buckets pay for goes
		// straight from its buckets into the picker; the others walk a
		// list, built (or rebuilt, or extended) as their walk needs.
		var cut uint64 // where the row's walk goes on in overflow
		if bc.discard && bc.walkable(p.room*nb/max(len(r.open), 1)) {
			cut = bc.walkRow(c, k, &p)
		} else {
			if len(bc.lists) <= c {
				bc.resize(last + 1) // with discard: the first row that needs a list
			}
			cut = bc.walkList(c, k, want, &p)
		}
		if p.room > 0 {
			bc.overflow(c, cut, &p)
		}
		if p.room != 0 {
			// Unreachable: the invariant guarantees a valid pick.
			panic(fmt.Sprintf("subset: internal error: no feasible subset for client %d of %d (k=%d, backends=%d)", c, count, k, nb))
		}
		row = p.row
		for _, s := range row {
			v := r.n[s] - taken
			room := hi - int(v)
			totalRoom--
			if room > L {
				over--
			}
			if room == L {
				ge--
			}
			r.rooms[room]--
			r.rooms[room-1]++
			if int(v) < lo {
				deficit--
				if r.linked {
					r.unlink(s, v)
					if int(v)+1 < lo {
						r.link(s, v+1)
					}
				}
			}
			r.n[s] = v + 1
			if room == 1 {
				r.close(s)
				g := bc.bucket[s]
				if r.roomIn[g]--; r.roomIn[g] == 0 {
					r.live -= int(bc.bstart[g+1] - bc.bstart[g])
				}
			}
		}
		if rows != nil {
			rows[c] = append(flat[c*k:c*k:(c+1)*k], row...)
		}
		if bc.discard && c < len(bc.lists) {
			bc.lists[c] = nil
		}
		r.row = row
		over += ge
		L--
		if L >= 0 && L <= hi {
			ge += int(r.rooms[L])
		}
	}
	return r.row
}

// walkList is a row's walk over client c's list, which it builds first
// if missing (or rebuilds if too short, or extends as the walk runs past
// its end), for a row expected to walk want backends; it returns the
// cutoff, where the walk goes on in overflow.
func (bc *BalancedCache) walkList(c, k, want int, p *picker) uint64 {
	// Where buckets pay for the row's expected walk, a missing list is
	// built as the row walks it, and a later walk that runs past its end
	// extends it below. Elsewhere a list is built for the expected walk,
	// and one shorter than that is rebuilt, a quarter longer so that
	// small changes of the walk, or a few removals, do not rebuild it
	// again; a longer one is kept, being merely generous. Lists are built
	// to an exact length, so the length is the coverage.
	if list := bc.lists[c]; list == nil {
		if bc.walkable(want) {
			bc.firstWalk(c, k, p)
			return bc.cutoff[c]
		}
		bc.build(c, want)
	} else if len(list) < want && bc.cutoff[c] != 0 && !bc.walkable(want) {
		bc.build(c, want+want/4)
	}
	list := bc.lists[c]
	for i := 0; ; {
		for ; i < len(list) && p.room > 0; i++ {
			// Late rows' lists are mostly full backends, and marks of
			// buckets whose members all are: skip them here, without the
			// call.
			if s := list[i]; s >= 0 {
				if p.n[s] < p.hi {
					p.consider(s)
				}
			} else if g := uint16(^s); bc.run.roomIn[g] > 0 {
				bc.walkMark(bc.seedOf(c), g, p)
			}
		}
		if p.room == 0 || bc.cutoff[c] == 0 {
			break
		}
		n := bc.extension(k, len(list), p.room)
		if n == 0 {
			break
		}
		bc.extend(c, n)
		list = bc.lists[c]
	}
	return bc.cutoff[c]
}

// extension is how many backends to add to a list of length have whose
// row has room picks left: the walk those picks are expected to take,
// or 0 where the list is at its bound or the extension would cost more
// than overflow's scan of the backends with room.
func (bc *BalancedCache) extension(k, have, room int) int {
	n := bc.fixedWant
	if n == 0 {
		n = (room+4)*len(bc.order)/max(len(bc.run.open), 1) + 4
	}
	if bc.noExtend || have+n > maxCandidates(k) || !bc.walkable(n) {
		return 0
	}
	return n
}

// firstWalk builds client c's missing list while its row walks it: it
// gathers the client's buckets from the top, a batch at a time, each
// about as many members as the picks left are expected to walk, and the
// picker takes each batch's members as they come, so that the list ends
// where the walk ends (at the end of a bucket) and the cutoff is the
// lowest score the last bucket's members can have. A bucket whose
// members are all full is not sorted: the list holds a mark in its place
// (see markOf), which a later walk sorts only if one of them has room
// again. So the rows of a first call sort about the buckets that
// Balanced's do, where building every list to the expected walk first
// and then walking it sorted twice as many (the late rows' lists are
// mostly full backends), and the lists hold about what their rows
// walked, a quarter less. A later walk that goes further extends the
// list.
func (bc *BalancedCache) firstWalk(c, k int, p *picker) {
	seed := bc.seedOf(c)
	o := bc.orderOf(c)
	r := &bc.run
	open := max(len(r.open), 1)
	top, n, want := buckets-1, 0, bc.fixedWant
	if want == 0 {
		// At least one, even for a row whose forced picks filled it: an
		// empty list would need a cutoff above every score.
		want = max(p.room*r.live/open, 1)
	}
	// The list is gathered where it will stay, the unused end of the
	// shared array, rather than into scratch and then copied.
	out := bc.slabTail(nil, 0, want+groupPad)
	for {
		if len(out) < n+want+groupPad {
			out = bc.slabTail(out, n, n+2*want+64)
		}
		from := n
		out, n, top, _ = bc.gather(seed, o, out, n, top, n+want, r.roomIn, r.live, true)
		for _, s := range out[from:n] {
			// As in walkList's walk of a list; a mark's members are full.
			if s >= 0 && p.n[s] < p.hi {
				p.consider(s)
				if p.room == 0 {
					break
				}
			}
		}
		if p.room == 0 || top < 0 {
			break
		}
		if want = bc.extension(k, n, p.room); want == 0 {
			break
		}
	}
	var cut uint64 // 0 if the walk took every backend
	if top >= 0 {
		cut = uint64(top+1) << (64 - bucketBits)
	}
	// No room for insertions, unlike the lists that room sizes: the
	// first call builds every list, and that room would be a quarter of
	// its memory, fresh memory being much of its cost, while a change of
	// the backends enters a few lists (a list's length x clients /
	// backends), which then move to where they get room.
	bc.slabTail(out, n, n)
	bc.lists[c], bc.cutoff[c], bc.want[c] = bc.carve(n, n), cut, int32(n)
}

// markOf is the list entry that stands for every member of bucket g:
// negative, so that no slot is taken for one. firstWalk writes one for
// each bucket whose members are all full when its row walks past, which
// the walk need not sort. The mark stands for the bucket's live members
// whatever they are, so the changes of the backends leave it as it is:
// a backend that joins the bucket is in the list already, and one that
// leaves is not in it. An entry e < 0 is the mark of bucket ^e.
func markOf(g uint16) int32 { return ^int32(g) }

// walkMark is a list's walk over the mark of bucket g, one of whose
// members has room: the members in walk order for client seed, to the
// picker.
func (bc *BalancedCache) walkMark(seed uint64, g uint16, p *picker) {
	r := &bc.run
	from := int(bc.bstart[g])
	m := int(bc.bstart[g+1]) - from
	d := slices.Grow(r.slots[:0], m)[:m]
	bc.sortMembers(seed, bucketRank(seed, g), from, m, d)
	for _, s := range d {
		if p.n[s] < p.hi {
			p.consider(s)
			if p.room == 0 {
				break
			}
		}
	}
	r.slots = d[:0]
}

// entryScore is the score of list entry e for client seed, and for a
// mark the lowest score its bucket's members can have: cutting a list
// after e at that score keeps exactly what the list holds up to e.
func (bc *BalancedCache) entryScore(seed uint64, e int32) uint64 {
	if e < 0 {
		return uint64(bucketRank(seed, uint16(^e))) << (64 - bucketBits)
	}
	return bc.scoreOf(seed, e)
}

// overflow continues client c's walk past its candidates, over the
// backends that still have room and score below the cutoff, best first.
//
// While many backends have room it continues down the client's buckets
// from the cutoff's, as build does: the rows that get here then have a
// few picks left, found within a few buckets. (They are not that rare:
// the members of a bucket tend to fill together, the clients that rank
// it first taking them all, so the number of full backends in a list
// varies more than if they filled one by one.) When few have room, which
// is where the capped lists of the late rows end up, going through those
// few is cheaper than the buckets that hold them.
func (bc *BalancedCache) overflow(c int, cut uint64, p *picker) {
	seed := bc.seedOf(c)
	o := bc.orderOf(c)
	o.full()
	if open := len(bc.run.open); open*open >= 2*p.room*buckets {
		// About room x buckets/open buckets to walk, against open to scan.
		for r := int(cut >> (64 - bucketBits)); r >= 0 && p.room > 0; r-- {
			g := o.bucket(uint16(r))
			band := bc.buf[:0]
			for i := bc.bstart[g]; i < bc.bstart[g+1]; i++ {
				s := bc.bslot[i]
				if p.n[s] >= p.hi {
					continue // full, or in the row
				}
				if sc := pairScore(uint16(r), seed, bc.bhash[i]); sc < cut {
					band = append(band, scored{sc, s})
				}
			}
			bc.sortBucket(band)
			for _, x := range band {
				if p.room == 0 {
					break
				}
				p.consider(x.slot)
			}
			bc.buf = band
		}
		return
	}
	// A category the walk has stopped accepting stays closed for the rest
	// of the row (maxLow and room-needDef only fall), so it is left out.
	noLow, defOnly := p.maxLow <= 0, p.room <= p.needDef
	rest := bc.buf[:0]
	for _, s := range bc.run.open {
		n := p.n[s]
		if n >= p.hi || noLow && p.hi-n < p.left || defOnly && n >= p.lo {
			continue
		}
		if sc := pairScore(o.rank(bc.bucket[s]), seed, bc.hash[s]); sc < cut {
			rest = append(rest, scored{sc, s})
		}
	}
	bc.buf = rest
	// The walk usually needs a few of them, so they are taken in bands of
	// about twice the picks left, best band first, each sorted: the
	// scores are uniform below the cutoff (they do not depend on which
	// backends earlier rows filled; buckets make them lumpy, which only
	// makes a band larger or smaller than planned), so a band's bounds
	// follow from its size.
	top := cut
	for size := 2*p.room + 8; p.room > 0 && len(rest) > 0; size *= 2 {
		var bottom uint64
		if len(rest) > size {
			bottom = top - top/uint64(len(rest))*uint64(size)
		}
		j := 0
		for i, x := range rest {
			if x.score >= bottom {
				rest[i], rest[j] = rest[j], x
				j++
			}
		}
		band := rest[:j]
		bc.sortScored(band)
		for _, x := range band {
			if p.room == 0 {
				break
			}
			p.consider(x.slot)
		}
		rest, top = rest[j:], bottom
	}
}

// picker is one row's walk: the reference's acceptance rules over the
// backends in the client's order.
type picker struct {
	lo, hi, left    int32
	needDef, maxLow int // see the reference: picks reserved for deficits; picks allowed on nearly full backends
	room            int // picks still to make
	n               []int32
	row             []int32
}

// consider takes slot s into the row if the rules allow it.
func (p *picker) consider(s int32) {
	n := p.n[s]
	if n >= p.hi {
		return
	}
	isDef, isLow := n < p.lo, p.hi-n < p.left
	if isLow && p.maxLow <= 0 {
		return
	}
	if !isDef && p.room <= p.needDef {
		return // the remaining picks are reserved for deficits
	}
	p.row = append(p.row, s)
	p.n[s] += taken
	p.room--
	if isDef {
		p.needDef--
	}
	if isLow {
		p.maxLow--
	}
}

// link puts slot s in the list of backends with v clients.
func (r *run) link(s, v int32) {
	h := r.head[v]
	r.next[s], r.prev[s] = h, -1
	if h >= 0 {
		r.prev[h] = s
	}
	r.head[v] = s
}

// unlink takes slot s out of the list of backends with v clients.
func (r *run) unlink(s, v int32) {
	nx, pv := r.next[s], r.prev[s]
	if pv >= 0 {
		r.next[pv] = nx
	} else {
		r.head[v] = nx
	}
	if nx >= 0 {
		r.prev[nx] = pv
	}
}

// close takes slot s, now full, out of the open backends.
func (r *run) close(s int32) {
	i := r.pos[s]
	last := r.open[len(r.open)-1]
	r.open[i] = last
	r.pos[last] = i
	r.open = r.open[:len(r.open)-1]
}

// clearedInt32 returns b resized to n zeros, reusing its array.
func clearedInt32(b []int32, n int) []int32 {
	b = slices.Grow(b[:0], n)[:n]
	clear(b)
	return b
}
