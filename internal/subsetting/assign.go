package subsetting

import (
	"fmt"
	"slices"
	"strings"
)

// assignment computes the rows of the balanced assignment over one
// backend list. The decisions are exactly those of the direct algorithm
// (assignRef in the tests, which scores and sorts every backend per row);
// what differs is how a row finds its client's best backends: by walking
// the client's first buckets (walk.go), or where buckets do not pay, a
// list of candidates (list.go), and past either, overflow.
type assignment struct {
	// The backends, sorted by identity: a backend's slot is its index.
	id     []string
	hash   []uint64 // idHash(id[s])
	bucket []uint16 // bucketOf(hash[s])

	// The slots grouped by bucket, in identity order within one: bucket
	// g's are bslot[bstart[g]:bstart[g+1]], their hashes beside them in
	// bhash, which the walks read instead of hash.
	bstart []int32
	bslot  []int32
	bhash  []uint64

	// The row's candidates, best first (score descending, identity
	// ascending): exactly the backends whose score is >= cut (0: all).
	list []int32
	cut  uint64

	buf []scored // scratch for building lists and for overflow walks
	run run
}

// scored is a backend slot with its score for one client.
type scored struct {
	score uint64
	slot  int32
}

// newAssignment prepares the assignment over ids, sorted and distinct.
func newAssignment(ids []string) *assignment {
	a := &assignment{id: ids, hash: idHashes(ids), bucket: make([]uint16, len(ids))}
	for s, h := range a.hash {
		a.bucket[s] = bucketOf(h)
	}
	a.group()
	return a
}

// group groups the slots by bucket (a counting sort), keeping identity
// order within a bucket.
func (a *assignment) group() {
	start := make([]int32, buckets+1)
	for _, g := range a.bucket {
		start[g+1]++
	}
	for g := range buckets {
		start[g+1] += start[g]
	}
	// The arrays run groupPad entries past the last bucket, which gather
	// reads (and ignores) when it scores a bucket as 4 or 8 members.
	n := len(a.id)
	a.bslot = make([]int32, n+groupPad)
	a.bhash = make([]uint64, n+groupPad)
	for s, g := range a.bucket {
		p := start[g]
		a.bslot[p], a.bhash[p] = int32(s), a.hash[s]
		start[g]++
	}
	// Each start[g] has moved to its bucket's end, the next one's start.
	copy(start[1:], start[:buckets])
	start[0] = 0
	a.bstart = start
}

// names maps slots to their identities, sorted.
func (a *assignment) names(row []int32) []string {
	out := make([]string, len(row))
	for i, s := range row {
		out[i] = a.id[s]
	}
	slices.Sort(out)
	return out
}

// compare is the order of a client's walk: higher score first, and on the
// (astronomically rare) equal score the smaller identity, as the direct
// algorithm breaks ties.
func (a *assignment) compare(x, y scored) int {
	if x.score != y.score {
		if x.score > y.score {
			return -1
		}
		return 1
	}
	return strings.Compare(a.id[x.slot], a.id[y.slot])
}

// taken is added to a backend's count while the row being built holds it
// (see run.n): far above any count, far below overflow.
const taken = 1 << 30

// run is the state of one computation of the rows, per slot unless
// noted.
type run struct {
	// Clients so far; while the row being built holds a slot, its count
	// is raised by taken, so that one test (n >= hi) skips both the full
	// backends and those already in the row.
	n []int32
	// Slots with fewer than lo clients, linked per count, so that a row
	// finds the backends it is forced to take without a scan. Only the
	// last lo rows can be forced, so the lists are built when the first
	// of them is reached (linked).
	head, next, prev []int32
	linked           bool
	open             []int32 // slots with fewer than hi clients, any order
	// Per bucket, its members with fewer than hi clients, and the
	// members of the buckets that have any: walks skip the others.
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
// started was another client's, so that a row that walks, extends and
// overflows fills each word once.
func (a *assignment) orderOf(c int) *bucketOrder {
	r := &a.run
	if r.oc != c+1 {
		r.o.start(clientSeed(c))
		r.oc = c + 1
	}
	return &r.o
}

// walkable reports whether n more candidates are cheaper to find by
// walking a client's buckets (about n x buckets/backends of them) than by
// scoring every backend.
func (a *assignment) walkable(n int) bool {
	nb := len(a.id)
	return n < nb && n*buckets < nb*nb
}

// rows computes rows 0..last of the assignment of k backends to each of
// count clients and returns row last; with rows non-nil it also stores
// every row there. Each row's feasibility terms are kept up to date per
// pick instead of summed over all backends, as the direct algorithm does.
func (a *assignment) rows(k, count, last int, rows [][]int32) []int32 {
	nb := len(a.id)
	total := count * k
	lo, hi := total/nb, (total+nb-1)/nb
	r := &a.run
	r.n = make([]int32, nb)
	r.next = make([]int32, nb)
	r.prev = make([]int32, nb)
	r.pos = make([]int32, nb)
	r.open = make([]int32, nb)
	for s := range r.open {
		r.open[s], r.pos[s] = int32(s), int32(s)
	}
	r.head = make([]int32, lo)
	for i := range r.head {
		r.head[i] = -1
	}
	r.rooms = make([]int32, hi+1)
	r.rooms[hi] = int32(nb)
	r.roomIn = make([]int32, buckets)
	for g := range r.roomIn {
		r.roomIn[g] = a.bstart[g+1] - a.bstart[g]
	}
	r.live = nb
	var flat []int32
	if rows != nil {
		flat = make([]int32, len(rows)*k)
	}

	// The feasibility terms of the direct algorithm, kept per pick:
	// deficit is the sum of max(lo-n, 0), and usable the sum of
	// min(hi-n, L) with L the clients after this one, as totalRoom -
	// over, over being the sum of max(hi-n-L, 0) and ge the number of
	// backends with room >= L.
	deficit := nb * lo
	totalRoom := nb * hi
	L := count - 1
	over := nb * max(hi-L, 0)
	ge := 0
	if hi >= L {
		ge = nb
	}
	// wantFor changes only when a backend fills; taken per row, its
	// square root and divisions are a tenth of a small fleet's time.
	want, wantOpen := listWant, -1
	for c := 0; c <= last; c++ {
		if listWant == 0 && len(r.open) != wantOpen {
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
				for s := range int32(nb) {
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
		var cut uint64 // where the row's walk goes on in overflow
		if a.walkable(p.room * nb / max(len(r.open), 1)) {
			cut = a.walkRow(c, k, &p)
		} else {
			cut = a.walkList(c, k, want, &p)
		}
		if p.room > 0 {
			a.overflow(c, cut, &p)
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
				g := a.bucket[s]
				if r.roomIn[g]--; r.roomIn[g] == 0 {
					r.live -= int(a.bstart[g+1] - a.bstart[g])
				}
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
// While many backends have room it walks on down the client's buckets;
// when few have, which is where the late rows end up, scoring those few
// is cheaper than the buckets that hold them.
func (a *assignment) overflow(c int, cut uint64, p *picker) {
	o := a.orderOf(c)
	seed := o.seed
	o.full()
	if open := len(a.run.open); open*open >= 2*p.room*buckets {
		// About room x buckets/open buckets to walk, against open to scan.
		for r := int(cut >> (64 - bucketBits)); r >= 0 && p.room > 0; r-- {
			g := o.bucket(uint16(r))
			band := a.buf[:0]
			for i := a.bstart[g]; i < a.bstart[g+1]; i++ {
				s := a.bslot[i]
				if p.n[s] >= p.hi {
					continue // full, or in the row
				}
				if sc := pairScore(uint16(r), seed, a.bhash[i]); sc < cut {
					band = append(band, scored{sc, s})
				}
			}
			a.sortBucket(band)
			for _, x := range band {
				if p.room == 0 {
					break
				}
				p.consider(x.slot)
			}
			a.buf = band
		}
		return
	}
	// A category the walk has stopped accepting stays closed for the rest
	// of the row (maxLow and room-needDef only fall), so it is left out.
	noLow, defOnly := p.maxLow <= 0, p.room <= p.needDef
	rest := a.buf[:0]
	for _, s := range a.run.open {
		n := p.n[s]
		if n >= p.hi || noLow && p.hi-n < p.left || defOnly && n >= p.lo {
			continue
		}
		if sc := pairScore(o.rank(a.bucket[s]), seed, a.hash[s]); sc < cut {
			rest = append(rest, scored{sc, s})
		}
	}
	a.buf = rest
	// The walk usually needs a few of them, so they are taken in bands of
	// about twice the picks left, best band first, each sorted. The
	// scores below the cutoff are about uniform, so a band's bounds
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
		a.sortScored(band)
		for _, x := range band {
			if p.room == 0 {
				break
			}
			p.consider(x.slot)
		}
		rest, top = rest[j:], bottom
	}
}

// picker is one row's walk: the direct algorithm's acceptance rules over
// the backends in the client's order.
type picker struct {
	lo, hi, left    int32
	needDef, maxLow int // picks reserved for deficits; picks allowed on nearly full backends
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
