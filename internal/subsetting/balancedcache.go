package subsetting

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/cespare/xxhash/v2"
	"github.com/pickwise/pickwise/internal/mix"
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
// those short lists. Building them takes every (client, backend) score,
// (clientIndex+1) x backends mixes, which nothing can skip because one
// score says nothing about another; that is the cost of the first call
// and of a change of half the list or more. A smaller change scores only
// the backends that joined (one mix per client each) and drops the ones
// that left, because a surviving backend keeps its scores.
//
// A list is as long as its row is expected to walk: about 2.5 subsetSize
// while most backends have room, longer for the late rows, which skip
// the backends already full (sized from the fraction of backends with
// room when the row is reached, up to [maxCandidates]). A walk that runs
// past its list anyway continues over the backends that still have room,
// so no answer depends on how long the lists are.
//
// Memory: the lists hold about 3.5 subsetSize entries of 4 bytes per
// client up to clientIndex (more when most backends fill before the last
// rows), and the rest is a few dozen bytes per backend. Measured for
// client 9,999 of 10,000 with subsets of 20: 3.3 MB over 100 backends,
// 4.7 MB over 10,000, 7.8 MB over 50,000.
//
// A BalancedCache is not safe for concurrent use. The zero value is ready
// to use.
type BalancedCache struct {
	// Backends, by slot: a backend keeps its slot while it stays in the
	// list, so candidate lists survive changes of the others. Slots of
	// backends that left are reused.
	id    []string
	hash  []uint64
	alive []bool
	free  []int32
	order []int32  // live slots in identity order
	spare []int32  // the previous order's array, for the next reorder
	ohash []uint64 // hash[order[i]]: the scan loop reads one dense array

	// Candidates of clients 0..len(lists)-1. lists[c] holds, best first
	// (score descending, identity ascending), exactly the live backends
	// whose score for client c is >= cutoff[c]; nil until first built.
	// want[c] is the length it was built for: an insertion into a full
	// list (len == cap) raises the cutoff back to want[c]'s threshold.
	lists  [][]int32
	cutoff []uint64
	want   []int32
	seed   []uint64 // clientSeed(c)

	// fixedWant, when > 0, replaces the computed list length: tests make
	// lists tiny so that walks overflow and insertions cut.
	fixedWant int

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

// covers is how many of nb backends are expected to score at least
// cutoff: the walk depth a list with that cutoff serves.
func covers(cutoff uint64, nb int) int {
	return int(float64(nb) * (float64(math.MaxUint64-cutoff) / math.MaxUint64))
}

// wantFor is how many candidates a row should have when open of the nb
// backends still have room: its walk takes k backends from those, so it
// is expected to go about k x nb/open deep (k+4: the feasibility rules
// skip a few). The margin, three standard deviations of a list's Poisson
// length, makes a walk past the end rare, which matters while open is
// large, since such a walk scans every backend with room.
func wantFor(k, nb, open int) int {
	depth := float64(k+4) * float64(nb) / float64(max(open, 1))
	w := depth + 3*math.Sqrt(depth) + 4
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
	return bc.names(bc.replay(subsetSize, clientCount, clientIndex, nil)), nil
}

// all returns every client's row, as BalancedAll does; ids are
// normalized and more than k.
func (bc *BalancedCache) all(ids []string, k, count int) [][]string {
	bc.sync(ids, count)
	rows := make([][]int32, count)
	bc.replay(k, count, count-1, rows)
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
	bc.alive = slices.Grow(bc.alive[:0], n)[:n]
	bc.order = slices.Grow(bc.order[:0], n)[:n]
	for i := range ids {
		bc.alive[i] = true
		bc.order[i] = int32(i)
	}
	bc.ohash = append(bc.ohash[:0], bc.hash...)
	bc.free = bc.free[:0]
	clear(bc.lists) // keeps nothing alive; resize re-slices
	bc.lists = bc.lists[:0]
	bc.cutoff, bc.want, bc.seed = bc.cutoff[:0], bc.want[:0], bc.seed[:0]
	bc.resize(clients)
}

// newSlot gives identity id a slot, reusing a free one if any.
func (bc *BalancedCache) newSlot(id string) int32 {
	h := xxhash.Sum64String(id)
	if n := len(bc.free); n > 0 {
		s := bc.free[n-1]
		bc.free = bc.free[:n-1]
		bc.id[s], bc.hash[s], bc.alive[s] = id, h, true
		return s
	}
	bc.id = append(bc.id, id)
	bc.hash = append(bc.hash, h)
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
	for i, s := range merged {
		bc.ohash[i] = bc.hash[s]
	}
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

// build computes client c's candidates from scratch, about want of them:
// one mix per backend, the bulk of a first call's time.
func (bc *BalancedCache) build(c, want int) {
	seed, t := bc.seed[c], threshold(want, len(bc.order))
	buf := bc.buf[:0]
	for i, h := range bc.ohash {
		if s := mix.Mix64(h ^ seed); s >= t {
			buf = append(buf, scored{s, bc.order[i]})
		}
	}
	bc.sortScored(buf)
	// Room for insertions: a list grows by about want/backends per new
	// backend; insertEverywhere raises the cutoff back to want's when it
	// fills.
	capacity := len(buf) + len(buf)/4 + 2
	list := bc.lists[c][:0]
	if cap(list) < capacity || cap(list) > 2*capacity {
		list = make([]int32, 0, capacity)
	}
	for _, x := range buf {
		list = append(list, x.slot)
	}
	bc.lists[c], bc.cutoff[c], bc.want[c] = list, t, int32(want)
	bc.buf = buf
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
// least the cutoff. One mix per client instead of dropDead's pass over
// every list entry.
func (bc *BalancedCache) removeEverywhere(s int32) {
	h := bc.hash[s]
	for c, list := range bc.lists {
		if list == nil {
			continue
		}
		seed := bc.seed[c]
		x := scored{mix.Mix64(h ^ seed), s}
		if x.score < bc.cutoff[c] {
			continue
		}
		i, found := slices.BinarySearchFunc(list, x, func(e int32, x scored) int {
			return bc.compare(scored{mix.Mix64(bc.hash[e] ^ seed), e}, x)
		})
		if found {
			bc.lists[c] = slices.Delete(list, i, i+1)
		}
	}
}

// insertEverywhere adds the new backend in slot s to the lists of the
// clients for which it scores at least the cutoff.
func (bc *BalancedCache) insertEverywhere(s int32) {
	h := bc.hash[s]
	for c, list := range bc.lists {
		if list == nil {
			continue // not built yet
		}
		seed := bc.seed[c]
		sc := mix.Mix64(h ^ seed)
		if sc < bc.cutoff[c] {
			continue
		}
		if len(list) == cap(list) {
			// Full: drop what scores below the cutoff of a fresh list of
			// want[c], and if that leaves the list full (a client with
			// unusually many high scores), give it more room. Cutting by
			// score rather than to a length keeps the list exactly the
			// backends at or above the cutoff, ties included.
			if t := threshold(int(bc.want[c]), len(bc.order)); t > bc.cutoff[c] {
				p, _ := slices.BinarySearchFunc(list, t, func(e int32, t uint64) int {
					if mix.Mix64(bc.hash[e]^seed) >= t {
						return -1
					}
					return 1
				})
				list, bc.cutoff[c] = list[:p], t
				if sc < t {
					bc.lists[c] = list
					continue
				}
			}
			if len(list) == cap(list) {
				list = append(make([]int32, 0, 2*cap(list)), list...)
			}
		}
		x := scored{sc, s}
		i, _ := slices.BinarySearchFunc(list, x, func(e int32, x scored) int {
			return bc.compare(scored{mix.Mix64(bc.hash[e] ^ seed), e}, x)
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
	keys             []uint64 // sortScored's
	tmp              []scored // sortScored's
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
	for c := 0; c <= last; c++ {
		want := bc.fixedWant
		if want == 0 {
			want = wantFor(k, nb, len(r.open))
		}
		// A list that covers less than its row's expected walk is rebuilt,
		// a quarter longer so that small changes of the walk do not
		// rebuild it again; one built for a longer walk is kept, being
		// merely generous. Coverage is read from the cutoff, not the
		// length, whose Poisson noise would trigger rebuilds.
		if list := bc.lists[c]; list == nil || len(list) < nb && covers(bc.cutoff[c], nb) < want {
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
		for _, s := range bc.lists[c] {
			if p.room == 0 {
				break
			}
			// Late rows' lists are mostly full backends: skip them here,
			// without the call.
			if r.n[s] < p.hi {
				p.consider(s)
			}
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
// Rows whose lists are capped end up here; the backends with room are
// then few, which is what keeps this cheap.
func (bc *BalancedCache) overflow(c int, p *picker) {
	seed, cut := bc.seed[c], bc.cutoff[c]
	// A category the walk has stopped accepting stays closed for the rest
	// of the row (maxLow and room-needDef only fall), so it is left out.
	noLow, defOnly := p.maxLow <= 0, p.room <= p.needDef
	rest := bc.buf[:0]
	for _, s := range bc.run.open {
		n := p.n[s]
		if n >= p.hi || noLow && p.hi-n < p.left || defOnly && n >= p.lo {
			continue
		}
		if sc := mix.Mix64(bc.hash[s] ^ seed); sc < cut {
			rest = append(rest, scored{sc, s})
		}
	}
	bc.buf = rest
	// The walk usually needs a few of them, so they are taken in bands of
	// about twice the picks left, best band first, each sorted: the
	// scores are uniform below the cutoff (they do not depend on which
	// backends earlier rows filled), so a band's bounds follow from its
	// size.
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
