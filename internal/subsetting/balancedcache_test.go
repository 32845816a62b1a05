package subsetting

import (
	"fmt"
	"runtime"
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
