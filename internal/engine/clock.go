package engine

import (
	"math/rand/v2"
	"sync"
	"time"

	"github.com/pickwise/pickwise/internal/mix"
)

// Clock is the engine's source of time. Production code uses SystemClock;
// tests and the simulator substitute a virtual clock so that slow-start
// ramps and timers advance only when they say so.
type Clock interface {
	// Nanotime returns a monotonic reading in nanoseconds from an arbitrary
	// origin. Latency-aware pickers read it twice per call, so it must be
	// cheap: it never needs the wall clock.
	Nanotime() int64
	// AfterFunc calls f in its own goroutine once d has elapsed, unless the
	// returned Timer is stopped first.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a pending AfterFunc call.
type Timer interface {
	// Stop prevents the call if it has not started; it reports whether it
	// did so.
	Stop() bool
}

// SystemClock is the wall clock.
type SystemClock struct{}

// processStart anchors SystemClock's monotonic readings.
var processStart = time.Now()

// Nanotime is the monotonic time since the process started; time.Since
// reads only the monotonic clock, about half the cost of time.Now.
func (SystemClock) Nanotime() int64 { return int64(time.Since(processStart)) }

// AfterFunc wraps time.AfterFunc.
func (SystemClock) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }

// Rand is the engine's source of randomness. Pickers call it on every pick
// from many goroutines at once, so an implementation must be safe for
// concurrent use and should not serialize callers.
type Rand interface {
	// Uint64 returns a uniformly distributed 64-bit value.
	Uint64() uint64
}

// SystemRand draws from math/rand/v2's runtime source, which is per-thread
// and lock-free: the right choice for production pickers.
type SystemRand struct{}

// Uint64 returns rand.Uint64().
func (SystemRand) Uint64() uint64 { return rand.Uint64() }

// SeededRand is a deterministic Rand for tests and the simulator. It is
// safe for concurrent use, but its sequence is reproducible only when a
// single goroutine draws from it.
type SeededRand struct {
	mu  sync.Mutex
	src *rand.PCG
}

// NewSeededRand returns a SeededRand whose sequence is fixed by seed.
func NewSeededRand(seed uint64) *SeededRand {
	return &SeededRand{src: rand.NewPCG(seed, seed^mix.Golden)}
}

// Uint64 returns the next value of the seeded sequence.
func (r *SeededRand) Uint64() uint64 {
	r.mu.Lock()
	v := r.src.Uint64()
	r.mu.Unlock()
	return v
}
