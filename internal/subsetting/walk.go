package subsetting

import (
	"math/bits"
	"slices"
)

// This file walks a client's buckets from its best down, which is how
// most rows find their backends: about as many buckets as the backends
// the row walks past, at a few table reads each, instead of scoring the
// fleet.

// groupPad is the most members gather scores at a time, and how far the
// grouped arrays (bslot, bhash) run past their end to let it.
const groupPad = 8

// walkRow is client c's row walked straight from its buckets: gather takes
// them from the top, a batch at a time, each as many as the picks left
// are expected to walk, and the picker takes their members in order. Past
// maxCandidates, or where a batch would cost more than scanning the
// backends with room, it stops, and returns the cutoff below the buckets
// walked, where overflow goes on.
func (a *assignment) walkRow(c, k int, p *picker) uint64 {
	o := a.orderOf(c)
	r := &a.run
	out := r.slots[:cap(r.slots)]
	top, depth := buckets-1, 0
	for p.room > 0 && top >= 0 {
		// The members of the buckets not skipped, of which a fraction
		// open/live has room.
		want := min(p.room*r.live/max(len(r.open), 1), maxCandidates(k)-depth)
		if depth > 0 && (want <= 0 || !a.walkable(want)) {
			break
		}
		if len(out) < want+groupPad {
			out = make([]int32, 2*want+64)
		}
		var n int
		out, n, top = a.gather(o, out, top, want)
		for _, s := range out[:n] {
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
	// Every backend in the buckets of rank top+1 and up has been
	// considered.
	return uint64(top+1) << (64 - bucketBits)
}

// gather writes to out the members of the client's buckets of ranks top,
// top-1, ... in walk order, whole buckets, until it holds at least want
// (or the ranks run out), and returns out (grown if a large bucket needed
// it), its length and the next rank to walk (-1 if none). out must have
// room for want+groupPad. It skips the buckets whose members are all
// full, which the picker would skip one by one: most of them, in the late
// rows.
//
// This is most of a computation's time, so few branches depend on a
// bucket's size, which is random, and none on a score: a bucket of 2 to
// 4 members (or of 5 to 8) is sorted as 4 (or 8) by a sorting network,
// the slots past its end standing in for missing members. A single
// member, the usual case in a fleet of fewer backends than buckets, is
// taken as it is; only buckets of more than 8 are sorted by comparisons.
func (a *assignment) gather(o *bucketOrder, out []int32, top, want int) ([]int32, int, int) {
	r := &a.run
	seed := o.seed
	sparse := len(a.id) < buckets // most buckets empty or single
	n := 0
walk:
	for top >= 0 && n < want {
		// The next ranks' buckets, about as many as the backends still
		// wanted fill.
		gs := r.gs[:min((want-n)*buckets/max(r.live, 1)+2, len(r.gs), top+1)]
		o.buckets(top, gs)
		for j, g := range gs {
			if r.roomIn[g] == 0 {
				continue
			}
			from := int(a.bstart[g])
			m := int(a.bstart[g+1]) - from
			if m <= 4 && (!sparse || m > 1) {
				// The usual case in a dense fleet, empty and single buckets
				// included, so that their sizes cost no branch.
				sort4(seed, m, (*[4]uint64)(a.bhash[from:]), (*[4]int32)(a.bslot[from:]), (*[4]int32)(out[n:]))
			} else {
				switch {
				case m == 0:
					continue
				case m == 1:
					// The usual case in a sparse fleet.
					out[n] = a.bslot[from]
				case m <= groupPad:
					sort8(seed, m, (*[8]uint64)(a.bhash[from:]), (*[8]int32)(a.bslot[from:]), (*[8]int32)(out[n:]))
				default:
					if n+m+groupPad > len(out) {
						out = append(out[:n], make([]int32, m+groupPad+len(out))...)
					}
					a.sortMembers(seed, uint16(top-j), from, m, out[n:n+m])
				}
			}
			n += m
			if n >= want {
				top -= j + 1
				break walk
			}
		}
		top -= len(gs)
	}
	return out, n, top
}

// sortMembers writes to d the slots of the m members of the bucket of
// rank rank whose grouped entries start at from, in walk order for the
// client with seed seed: gather's way for buckets of more than groupPad.
// It sorts their keys (memberKey) as plain integers, faster than sorting
// scored pairs, unless the positions do not fit in the keys' low bits (a
// bucket of more than 4,096, in a fleet of tens of millions).
func (a *assignment) sortMembers(seed uint64, rank uint16, from, m int, d []int32) {
	const low = 1<<bucketBits - 1
	if m > low+1 {
		members := a.buf[:0]
		for i := from; i < from+m; i++ {
			members = append(members, scored{pairScore(rank, seed, a.bhash[i]), a.bslot[i]})
		}
		a.sortBucket(members)
		for i, x := range members {
			d[i] = x.slot
		}
		a.buf = members
		return
	}
	keys := a.run.keys[:0]
	for i, h := range a.bhash[from : from+m] {
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
		d[i] = a.bslot[from+int(k&low)]
	}
	a.run.keys = keys
}

// memberKey is the sort key of member i of a bucket of m, whose identity
// hash is h, for the client with seed seed: the pair's mix (pairScore's
// order within a bucket) with the position in the bits the score drops,
// so ascending keys are descending scores, then identity order. A slot
// past the bucket's end (i >= m) gets the highest key, without a branch.
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
// the optimal network of 5 comparators. It is a function of its own so
// that the mixes and the network run with all their values in registers.
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

// insertionSort sorts buf by descending score, stably: members that come
// in identity order keep it on equal scores, as compare wants.
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

// sortBucket sorts one bucket's members, which come in identity order,
// into walk order: buckets hold a few backends, for which an insertion
// sort beats any other; a large one goes to sortScored.
func (a *assignment) sortBucket(buf []scored) {
	if len(buf) > 16 {
		a.sortScored(buf)
		return
	}
	insertionSort(buf)
}

// sortScored sorts candidates into walk order. Sorting the scores as
// plain integers (with the candidate's position in the low bits) is
// several times faster than sorting the pairs with a comparison function;
// the rare pairs whose scores agree above the position bits are then put
// in exact order.
func (a *assignment) sortScored(buf []scored) {
	if len(buf) < 2 {
		return
	}
	bits := 1
	for 1<<bits < len(buf) {
		bits++
	}
	mask := uint64(1)<<bits - 1
	keys := a.run.keys[:0]
	for i, x := range buf {
		keys = append(keys, ^x.score&^mask|uint64(i)) // ascending keys: descending scores
	}
	slices.Sort(keys)
	tmp := append(a.run.tmp[:0], buf...)
	for i, key := range keys {
		buf[i] = tmp[key&mask]
	}
	for i := 0; i < len(keys); {
		j := i + 1
		for j < len(keys) && keys[j]&^mask == keys[i]&^mask {
			j++
		}
		if j-i > 1 {
			slices.SortFunc(buf[i:j], a.compare)
		}
		i = j
	}
	a.run.keys, a.run.tmp = keys, tmp
}
