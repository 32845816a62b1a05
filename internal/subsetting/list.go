package subsetting

import (
	"math"
	"slices"
)

// This file is the candidate list, for the rows whose buckets do not pay
// for a walk: those of small fleets, where a client's first buckets hold
// too few backends, and the late rows of larger ones, which walk long
// past the backends already full. A list holds a row's best backends,
// ranked from every backend's bucket at a few table reads each, and is
// extended by walking buckets when the row's walk runs past its end.

// Set only by tests, which restore them: listWant > 0 makes every list
// and extension that long, and noExtend leaves every walk past a list's
// end to overflow, so that small fleets take the paths large ones do.
var (
	listWant int
	noExtend bool
)

// maxCandidates bounds a list's length for subsets of k, so that the
// latest rows, which would have to walk most of the fleet to find the
// few backends with room left, scan those few (overflow) instead.
func maxCandidates(k int) int { return 16*k + 64 }

// wantFor is how many candidates a row should have when open of the nb
// backends still have room: its walk takes k backends from those, so it
// is expected to go about k x nb/open deep (k+4: the feasibility rules
// skip a few). The margin, three standard deviations of that depth (a
// negative binomial), makes a walk past the end rare, since such a walk
// costs more than a slightly longer list.
func wantFor(k, nb, open int) int {
	p := float64(max(open, 1)) / float64(nb)
	depth := float64(k+4) / p
	w := depth + 3*math.Sqrt(float64(k+4)*(1-p))/p + 4
	return int(min(w, float64(maxCandidates(k)), float64(nb)))
}

// walkList is client c's row, expected to walk want backends, walked over
// its list, built first and extended as the walk runs past its end; where
// buckets pay for want, it walks them instead (walkRow). It returns the
// cutoff, where overflow goes on.
func (a *assignment) walkList(c, k, want int, p *picker) uint64 {
	if a.walkable(want) {
		return a.walkRow(c, k, p)
	}
	a.build(c, want)
	list := a.list
	for i := 0; ; {
		for ; i < len(list) && p.room > 0; i++ {
			if s := list[i]; p.n[s] < p.hi {
				p.consider(s)
			}
		}
		if p.room == 0 || a.cut == 0 {
			break
		}
		n := a.extension(k, len(list), p.room)
		if n == 0 {
			break
		}
		a.extend(c, n)
		list = a.list
	}
	return a.cut
}

// extension is how many backends to add to a list of length have whose
// row has room picks left: the walk those picks are expected to take,
// or 0 where the list is at its bound or the extension would cost more
// than overflow's scan of the backends with room.
func (a *assignment) extension(k, have, room int) int {
	n := listWant
	if n == 0 {
		n = (room+4)*len(a.id)/max(len(a.run.open), 1) + 4
	}
	if noExtend || have+n > maxCandidates(k) || !a.walkable(n) {
		return 0
	}
	return n
}

// build makes client c's list its best want backends (more only on equal
// scores), the cutoff being the last one's score. It ranks every
// backend's bucket, and scores and sorts only the backends in the blocks
// of 64 ranks from the top that hold want of them: a rank's top bits are
// a score's, so those blocks hold the best want and little more, and
// grouping them by block (a counting sort) leaves each block's few to
// sort. Ranking and grouping have no branch that depends on a rank: in a
// small fleet every row pays them for every backend, and mispredicted
// branches would cost more than the table reads.
func (a *assignment) build(c, want int) {
	nb := len(a.id)
	o := a.orderOf(c)
	seed := o.seed
	o.full()
	r := &a.run
	const blocks = buckets >> halfBits
	var count, pos [blocks]int32
	ranks := slices.Grow(r.ranks[:0], nb)[:nb]
	for i, g := range a.bucket {
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
	buf := slices.Grow(a.buf[:0], n)[:n]
	for j, i := range idx[:n] {
		buf[j] = scored{pairScore(ranks[i], seed, a.hash[i]), i}
	}
	r.ranks, r.idx = ranks, idx
	// A block's members rank above the next block's, so an insertion
	// sort of the whole never moves one across a block's boundary and
	// costs what sorting each block would; being stable, it leaves equal
	// scores in identity order. Large blocks go to sortScored.
	if big > 32 {
		a.sortScored(buf)
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
	list := a.list[:0]
	for _, x := range buf {
		list = append(list, x.slot)
	}
	a.list, a.cut = list, cut
	a.buf = buf
}

// extend appends to client c's list its next n backends (more only on
// equal scores, fewer only when none are left), those just below the
// cutoff, and lowers the cutoff to the last one's score. It walks the
// client's buckets from the cutoff's down and scores only their members:
// about n x buckets/backends buckets and n mixes.
func (a *assignment) extend(c, n int) {
	o := a.orderOf(c)
	seed := o.seed
	list := a.list
	want := len(list) + n
	cut := a.cut
	r := int(cut >> (64 - bucketBits))
	nb := len(a.id)
	members := a.buf[:0]
	for r >= 0 && len(list) < want {
		// The next ranks' buckets first, about as many as the backends
		// still wanted fill, in a loop without branches that the
		// processor overlaps.
		gs := a.run.gs[:min((want-len(list))*buckets/nb+2, len(a.run.gs), r+1)]
		o.buckets(r, gs)
		r0 := r
		r -= len(gs)
		for j, g := range gs {
			from, to := a.bstart[g], a.bstart[g+1]
			if from == to {
				continue
			}
			rank := uint16(r0 - j)
			members = members[:0]
			for i := from; i < to; i++ {
				if sc := pairScore(rank, seed, a.bhash[i]); sc < cut {
					members = append(members, scored{sc, a.bslot[i]})
				}
			}
			// Buckets come in descending rank, the top bits of the score,
			// so sorting each one sorts the list.
			a.sortBucket(members)
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
	a.buf = members
	if len(list) < want {
		cut = 0 // every backend is in the list
	}
	a.list, a.cut = list, cut
}
