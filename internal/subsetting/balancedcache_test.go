package subsetting

import (
	"fmt"
	"runtime"
	"slices"
	"testing"
)

// TestBalancedCacheMemory runs a rolling restart, one backend replaced by
// a new one per call, 2,000 times through one cache, and checks that the
// heap the cache retains grows only with what its lists hold: by at most
// twice the growth of the lists' capacity (lists grow when their rows walk
// deeper than they ever did) and 64 KB, never by the space that lists
// leave behind when they move. Lists of one candidate, extended one at a
// time, make lists move on most calls, as they do in a large fleet over
// many more calls.
func TestBalancedCacheMemory(t *testing.T) {
	const clients, backends, k, steps = 1000, 200, 3, 2000
	ids := backendIDs(backends)
	retained := func() int {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return int(m.HeapAlloc)
	}
	listBytes := func(bc *BalancedCache) int {
		n := 0
		for _, list := range bc.lists {
			n += 4 * cap(list)
		}
		return n
	}
	base := retained()
	bc := &BalancedCache{fixedWant: 1}
	if _, err := bc.Subset(ids, k, clients-1, clients); err != nil {
		t.Fatal(err)
	}
	first, firstLists := retained()-base, listBytes(bc)
	worst, worstLists := first, firstLists
	for step := 1; step <= steps; step++ {
		ids[step*7919%backends] = fmt.Sprintf("10.7.%d.%d:8080", step/250, step%250)
		if _, err := bc.Subset(ids, k, clients-1, clients); err != nil {
			t.Fatal(err)
		}
		if step%250 == 0 {
			now, lists := retained()-base, listBytes(bc)
			if now > worst {
				worst, worstLists = now, lists
			}
			if limit := first + 2*(lists-firstLists) + 64<<10; now > limit {
				t.Fatalf("after %d replacements the cache retains %d bytes, lists %d; after its first call %d, lists %d: limit %d",
					step, now, lists, first, firstLists, limit)
			}
		}
	}
	t.Logf("retained after the first call %d bytes (lists %d), at most %d (%.2fx; lists %d) over %d replacements",
		first, firstLists, worst, float64(worst)/float64(first), worstLists, steps)
	runtime.KeepAlive(bc)
}

// checkLists checks what every kept list stands for against its
// definition, computed directly: a list, its marks replaced by their
// buckets' live members, is exactly the live backends whose score for its
// client is at least its cutoff, best first, each once. The answers do not
// show a list that holds a backend twice (the second time is skipped as
// taken) or one that a mark, cut too high, also leaves in overflow's walk:
// this does.
func checkLists(t *testing.T, bc *BalancedCache) {
	t.Helper()
	for c, list := range bc.lists {
		if list == nil {
			continue // dropped (discard): nothing to check
		}
		seed := clientSeed(c)
		entry := func(s int32) scored { return scored{bc.scoreOf(seed, s), s} }
		var want []scored
		for _, s := range bc.order {
			if x := entry(s); x.score >= bc.cutoff[c] {
				want = append(want, x)
			}
		}
		slices.SortFunc(want, bc.compare)
		var got []scored
		for _, e := range list {
			if e >= 0 {
				got = append(got, entry(e))
				continue
			}
			g := uint16(^e)
			var members []scored
			for _, s := range bc.bslot[bc.bstart[g]:bc.bstart[g+1]] {
				members = append(members, entry(s))
			}
			slices.SortFunc(members, bc.compare)
			got = append(got, members...)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("client %d: list of %d entries (%d marks) stands for %d backends, want the %d scoring at least %#x",
				c, len(list), len(list)-len(slices.DeleteFunc(slices.Clone(list), func(e int32) bool { return e < 0 })), len(got), len(want), bc.cutoff[c])
		}
	}
}

// TestBalancedCacheCutAtMark inserts a backend into a full list whose
// length as built ends at a mark, which the changes of TestBalancedCache*
// rarely reach: the list must be cut after the mark, at the lowest score
// its bucket's members can have, so that it still stands for exactly the
// backends scoring at least its cutoff (checkLists). The 64 buckets of 30
// members give client 0 buckets of many members; its list is made by hand:
// its first bucket's members, the mark of its second, its third's members.
func TestBalancedCacheCutAtMark(t *testing.T) {
	defer func(b uint16) { bucketMask = b }(bucketMask)
	bucketMask = 63
	ids := backendIDs(2000)
	const k = 5
	var bc BalancedCache
	if _, err := bc.Subset(ids, k, 0, 1); err != nil {
		t.Fatal(err)
	}
	seed := clientSeed(0)
	var o bucketOrder
	o.init(seed)
	var top []uint16 // the client's first three buckets that have members
	for rank := buckets - 1; len(top) < 3; rank-- {
		if g := o.bucket(uint16(rank)); bc.bstart[g+1] > bc.bstart[g] {
			top = append(top, g)
		}
	}
	members := func(g uint16) []int32 {
		var m []scored
		for _, s := range bc.bslot[bc.bstart[g]:bc.bstart[g+1]] {
			m = append(m, scored{bc.scoreOf(seed, s), s})
		}
		slices.SortFunc(m, bc.compare)
		out := make([]int32, len(m))
		for i, x := range m {
			out[i] = x.slot
		}
		return out
	}
	list := append(members(top[0]), markOf(top[1]))
	want := len(list)
	list = append(list, members(top[2])...)
	bc.lists[0] = slices.Clip(list) // full: the insertion cuts it
	bc.want[0] = int32(want)
	bc.cutoff[0] = bc.scoreOf(seed, list[len(list)-1])
	checkLists(t, &bc)

	// A new backend in the first bucket, which scores above the mark.
	var id string
	for i := 0; id == ""; i++ {
		if s := fmt.Sprintf("10.99.%d.%d:8080", i/250, i%250); bucketOf(idHash(s)) == top[0] {
			id = s
		}
	}
	if _, err := bc.Subset(append(slices.Clone(ids), id), k, 0, 1); err != nil {
		t.Fatal(err)
	}
	if got, want := bc.cutoff[0], uint64(o.rank(top[1]))<<(64-bucketBits); got != want {
		t.Errorf("cutoff %#x after the cut, want %#x, the lowest score of the marked bucket", got, want)
	}
	checkLists(t, &bc)
}
