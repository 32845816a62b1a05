package shadow

import (
	"testing"
	"time"

	"github.com/pickwise/pickwise/internal/engine"
)

// stepClock is a clock that advances by step at every reading.
type stepClock struct{ now, step int64 }

func (c *stepClock) Nanotime() int64 { c.now += c.step; return c.now }

func (c *stepClock) AfterFunc(time.Duration, func()) engine.Timer { return nil }

// TestTimingFollowsGap: recorded picks far apart are all timed; close
// together, one in 64 is; and timing comes back as they spread out again.
func TestTimingFollowsGap(t *testing.T) {
	clock := &stepClock{step: int64(time.Millisecond)}
	tm := &timing{clock: clock}
	// Only timed picks read the clock: a step of 2^shift picks' worth
	// stands for the untimed ones between two.
	pick := func() { tm.pickReading() }
	for range 50 {
		pick()
	}
	if s := tm.shift.Load(); s != 0 {
		t.Fatalf("picks 1 ms apart: shift %d, want 0 (every call timed)", s)
	}
	for range 200 {
		clock.step = 100 << tm.shift.Load() // 100 ns a pick
		pick()
	}
	if s := tm.shift.Load(); s != maxShift {
		t.Fatalf("picks 100 ns apart: shift %d, want %d", s, maxShift)
	}
	if tm.latest.Load() != clock.now {
		t.Errorf("latest reading %d, want the clock's %d", tm.latest.Load(), clock.now)
	}
	for range 200 {
		clock.step = int64(100*time.Microsecond) << tm.shift.Load()
		pick()
	}
	if s := tm.shift.Load(); s != 0 {
		t.Fatalf("picks 100 µs apart again: shift %d, want 0", s)
	}
}
