package subsetting

import (
	"fmt"
	"math"
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
// more, was measured (BenchmarkBalanced, the last of 10,000 clients with
// subsets of 20) at about 2 microseconds per client over 10,000 backends
// and 4 to 5 over 100 or over 50,000: in a small fleet the lists are found
// by scoring every backend, since a client's first buckets hold too few,
// and in a large one sorting the identities and the late rows' longer
// lists add to it. A smaller change scores only the backends that joined (one score
// per client each) and drops the ones that left, because a surviving
// backend keeps its scores.
//
// A list starts as long as its row is expected to walk: about subsetSize
// plus a few while most backends have room, longer for the late rows,
// which skip the backends already full (sized from the fraction of
// backends with room when the row is reached). A walk that runs past the
// end extends the list by walking further buckets, up to [maxCandidates];
// past that, or in a fleet too small for buckets to pay, it continues
// over the backends that still have room (overflow), so no answer depends
// on how long the lists are.
//
// Memory: the lists hold 1.5 to 3 subsetSize entries of 4 bytes per
// client up to clientIndex (the more, the fewer clients per backend, as
// the late rows skip the backends already full), with room for a quarter
// more, and the rest is a few dozen bytes per backend and 16 KB for the
// buckets. Measured (heap retained after the first call) for client 9,999
// of 10,000 with subsets of 20: 2.2 MB over 100 backends, 3.7 MB over
// 10,000, 7.5 MB over 50,000. Changes of the backends make lists move; the
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

	// The live slots grouped by bucket, in identity order within one:
	// bucket g's are bslot[bstart[g]:bstart[g+1]], their hashes beside
	// them in bhash. Regrouped after every change of the list (one pass,
	// like reorder), for build's walk over a client's first buckets.
	bstart []int32
	bslot  []int32
	bhash  []uint64

	// Candidates of clients 0..len(lists)-1. lists[c] holds, best first
	// (score descending, identity ascending), exactly the live backends
	// whose score for client c is >= cutoff[c]; nil from resize until
	// replay builds it, so that between calls every list is built.
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

// startFor is the length an extendable list starts with: the walk its
// row is expected to take (see wantFor), without the margin, since a
// walk that goes further extends the list at about the cost of having
// built it longer.
func startFor(k, nb, open int) int {
	return (k+4)*nb/max(open, 1) + 4
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
func (bc *BalancedCache) reset(ids []string, clients int) {
	n := len(ids)
	bc.id = append(bc.id[:0], ids...)
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
	bc.ohash = append(bc.ohash[:0], bc.hash...)
	bc.obuck = append(bc.obuck[:0], bc.bucket...)
	bc.group()
	bc.free = bc.free[:0]
	clear(bc.lists) // keeps nothing alive; resize re-slices
	bc.lists = bc.lists[:0]
	bc.carved = 0 // what the lists took is garbage now, but for the array being carved
	bc.cutoff, bc.want, bc.seed = bc.cutoff[:0], bc.want[:0], bc.seed[:0]
	bc.resize(clients)
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
	n := len(bc.order)
	bc.bslot = slices.Grow(bc.bslot[:0], n)[:n]
	bc.bhash = slices.Grow(bc.bhash[:0], n)[:n]
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

// threshold is the score above which about want of n uniformly spread
// scores lie.
func threshold(want, n int) uint64 {
	if n <= want {
		return 0
	}
	return math.MaxUint64 - (math.MaxUint64/uint64(n))*uint64(want)
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
// In a fleet large enough that the client's first buckets hold them
// ([BalancedCache.walkable]) it walks its buckets in order: see extend.
// Otherwise (small fleets, or the long lists of the late rows, where the
// walk would visit more buckets than there are backends) it scores every
// backend at a few table reads and a mix each and sorts those above a
// threshold.
func (bc *BalancedCache) build(c, want int) {
	if bc.walkable(want) {
		bc.lists[c] = bc.lists[c][:0]
		bc.extend(c, want, true)
		return
	}
	seed, nb := bc.seed[c], len(bc.order)
	o := bc.orderOf(c)
	// The scores are uniform over the uint64 range (a uniform rank above
	// uniform mix bits), so a threshold set for a little more than want
	// usually keeps enough; if not, it is lowered.
	buf := bc.buf[:0]
	for extra := want/4 + 8; ; extra *= 4 {
		t := threshold(want+extra, nb)
		buf = buf[:0]
		for i, h := range bc.ohash {
			if s := pairScore(o.rank(bc.obuck[i]), seed, h); s >= t {
				buf = append(buf, scored{s, bc.order[i]})
			}
		}
		if len(buf) >= want || t == 0 {
			break
		}
	}
	bc.sortScored(buf)
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

// extend appends to client c's list its next n backends (more only on
// equal scores, fewer only when none are left), those just below the
// cutoff, or from the top when fresh, and lowers the cutoff to the last
// one's score. It walks the client's buckets from the cutoff's down (the
// permutation's inverse) and scores only their members: about n x
// buckets/backends buckets and n mixes, whatever the fleet's size.
//
// Lists are built short, for the walk their row is expected to take, and
// extended when a walk runs past the end: extending costs about what
// building longer would have, but only for the rows that need it.
func (bc *BalancedCache) extend(c, n int, fresh bool) {
	seed := bc.seed[c]
	list := bc.lists[c]
	want := len(list) + n
	list = bc.room(list, want)
	o := bc.orderOf(c)
	cut := bc.cutoff[c]
	r := buckets - 1
	if !fresh {
		r = int(cut >> (64 - bucketBits))
	}
	nb := len(bc.order)
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
			members := bc.buf[:0]
			for i := from; i < to; i++ {
				if sc := pairScore(rank, seed, bc.bhash[i]); fresh || sc < cut {
					members = append(members, scored{sc, bc.bslot[i]})
				}
			}
			bc.buf = members
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
	if len(list) < want {
		cut = 0 // every backend is in the list
	}
	bc.lists[c], bc.cutoff[c], bc.want[c] = list, cut, int32(len(list))
}

// room returns list with room for n entries and a quarter more for
// insertions (a list grows by about its length/backends per new backend;
// insertEverywhere cuts it back when it fills), moving it if it has too
// little room or far too much.
func (bc *BalancedCache) room(list []int32, n int) []int32 {
	want := n + n/4 + 2
	if cap(list) >= want && cap(list) <= 2*want {
		return list
	}
	return append(bc.alloc(want), list...)
}

// alloc returns an empty list with room for n, carved from a shared
// array: one allocation per many lists instead of one each. The capacity
// is exact, so a list that outgrows it moves out rather than over its
// neighbour. An array holds a quarter of what was carved before it (up to
// 256 KB), so that a first call makes a few dozen allocations and the
// unused end of the last array stays small beside the lists.
func (bc *BalancedCache) alloc(n int) []int32 {
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
	for i := 1; i < len(buf); i++ {
		x := buf[i]
		j := i
		for ; j > 0 && buf[j-1].score < x.score; j-- {
			buf[j] = buf[j-1]
		}
		buf[j] = x
	}
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
			if bc.alive[s] {
				kept = append(kept, s)
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
		if len(list) == cap(list) {
			// Full: cut it back to its best want[c], as built (keeping
			// the backends that tie with the last one kept), and if that
			// leaves it full (ties, or a list built with every backend),
			// give it more room. The cutoff rises to the last one kept,
			// so the list stays exactly the backends at or above it.
			if w := int(bc.want[c]); w < len(list) {
				t := bc.scoreOf(seed, list[w-1])
				for w < len(list) && bc.scoreOf(seed, list[w]) == t {
					w++
				}
				list, bc.cutoff[c] = list[:w], t
				if sc < t {
					bc.lists[c] = list
					continue
				}
			}
			if len(list) == cap(list) {
				list = append(bc.alloc(2*cap(list)), list...)
			}
		}
		x := scored{sc, s}
		i, _ := slices.BinarySearchFunc(list, x, func(e int32, x scored) int {
			return bc.compare(scored{bc.scoreOf(seed, e), e}, x)
		})
		list = list[:len(list)+1]
		copy(list[i+1:], list[i:])
		list[i] = s
		bc.lists[c] = list
	}
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
	pos              []int32 // index in open
	rooms            []int32 // backends per room (hi - n), 0..hi
	row              []int32
	keys             []uint64   // sortScored's
	gs               [64]uint16 // extend's next buckets
	tmp              []scored   // sortScored's
	o                bucketOrder
	oc               int // the client whose order o is, plus one (0: none)
}

// orderOf is client c's bucket order, filled only if the last one filled
// was another client's, so that a row which builds, extends and overflows
// its list pays rounds x 8 mixes once. A client's seed depends on its
// index alone, so the order stays valid from one call to the next.
func (bc *BalancedCache) orderOf(c int) *bucketOrder {
	r := &bc.run
	if r.oc != c+1 {
		r.o.init(bc.seed[c])
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
		// A list is built for the row's expected walk. Where lists can be
		// extended (walkable), a walk that runs past the end extends it
		// below. Elsewhere a list shorter than that is rebuilt, a quarter
		// longer so that small changes of the walk, or a few removals, do
		// not rebuild it again; a longer one is kept, being merely
		// generous. Lists are built to an exact length, so the length is
		// the coverage.
		if list := bc.lists[c]; list == nil {
			w := want
			if bc.fixedWant == 0 && bc.walkable(w) {
				// Lists that can be extended start at the expected walk.
				w = min(w, startFor(k, nb, len(r.open)))
			}
			bc.build(c, w)
		} else if len(list) < want && bc.cutoff[c] != 0 && !bc.walkable(want) {
			bc.build(c, want+want/4)
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
		list := bc.lists[c]
		for i := 0; ; {
			for ; i < len(list) && p.room > 0; i++ {
				// Late rows' lists are mostly full backends: skip them
				// here, without the call.
				if s := list[i]; r.n[s] < p.hi {
					p.consider(s)
				}
			}
			if p.room == 0 || bc.cutoff[c] == 0 {
				break
			}
			// Extend by the walk the picks left are expected to take,
			// unless the list is at its bound or the extension would cost
			// more than overflow's scan of the backends with room.
			n := bc.fixedWant
			if n == 0 {
				n = (p.room+4)*nb/max(len(r.open), 1) + 4
			}
			if bc.noExtend || len(list)+n > maxCandidates(k) || !bc.walkable(n) {
				break
			}
			bc.extend(c, n, false)
			list = bc.lists[c]
		}
		if p.room > 0 {
			bc.overflow(c, &p)
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
			}
		}
		if rows != nil {
			rows[c] = append(flat[c*k:c*k:(c+1)*k], row...)
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
func (bc *BalancedCache) overflow(c int, p *picker) {
	seed, cut := bc.seed[c], bc.cutoff[c]
	o := bc.orderOf(c)
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
