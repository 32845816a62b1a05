package procid

import (
	"runtime"
	"sync"
	"testing"
)

// TestHintInRange: every goroutine gets an id below GOMAXPROCS.
func TestHintInRange(t *testing.T) {
	procs := runtime.GOMAXPROCS(0)
	var wg sync.WaitGroup
	errs := make(chan int, 64)
	for range 4 * procs {
		wg.Go(func() {
			for range 1000 {
				if id := Hint(); id < 0 || id >= procs {
					errs <- id
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for id := range errs {
		t.Errorf("Hint() = %d, want within [0, %d)", id, procs)
	}
}

// TestHintTellsPsApart: with as many busy goroutines as Ps, the ids they see
// cover more than one P, so the ids tell the Ps apart (a constant would
// make every per-P counter one shared counter again).
func TestHintTellsPsApart(t *testing.T) {
	procs := max(runtime.GOMAXPROCS(0), 2) // Ps need not be CPUs: two on any machine
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
	seen := make([]bool, procs)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range procs {
		wg.Go(func() {
			local := make([]bool, procs)
			for i := range 1 << 20 {
				local[Hint()] = true
				if i%1024 == 0 {
					runtime.Gosched()
				}
			}
			mu.Lock()
			for i, s := range local {
				seen[i] = seen[i] || s
			}
			mu.Unlock()
		})
	}
	wg.Wait()
	n := 0
	for _, s := range seen {
		if s {
			n++
		}
	}
	if n < 2 {
		t.Errorf("goroutines on %d Ps saw %d distinct ids, want at least 2", procs, n)
	}
}
