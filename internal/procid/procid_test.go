package procid

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
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
	// The goroutines run together until two ids are seen or 10 s pass:
	// a fixed number of iterations can end on one P before the other
	// goroutine is scheduled at all.
	var seen [64]atomic.Bool
	var distinct atomic.Int32
	deadline := time.Now().Add(10 * time.Second)
	var wg sync.WaitGroup
	for range procs {
		wg.Go(func() {
			for i := 0; distinct.Load() < 2 && (i%1024 != 0 || time.Now().Before(deadline)); i++ {
				if id := Hint() % len(seen); !seen[id].Load() && seen[id].CompareAndSwap(false, true) {
					distinct.Add(1)
				}
				if i%1024 == 0 {
					runtime.Gosched()
				}
			}
		})
	}
	wg.Wait()
	n := int(distinct.Load())
	if n < 2 {
		t.Errorf("goroutines on %d Ps saw %d distinct ids, want at least 2", procs, n)
	}
}
