package engine

import (
	"fmt"
	"math"
	"testing"
	"time"
)

// readCounter is a manualClock that counts its readings.
type readCounter struct {
	manualClock
	reads int
}

func (c *readCounter) Nanotime() int64 { c.reads++; return c.now }

// peakFleet is a Peak EWMA pair picker over n endpoints with the given
// latency averages, each past its first answer and last timed at the
// clock's reading.
func peakFleet(clk Clock, avgs []time.Duration) (*LeastLoaded, *Snapshot) {
	lat := testLatency()
	shared := &doneShared{clock: clk}
	shared.latency.Store(lat)
	snap := &Snapshot{Clock: clk, Rand: NewSeededRand(7), latency: lat}
	now := clk.Nanotime()
	for i, avg := range avgs {
		e := newEndpoint(fmt.Sprint(i), shared, false)
		e.rtt.bits.Store(math.Float64bits(float64(avg)))
		e.rtt.stamp.Store(now)
		e.rtt.lastTimed.Store(now)
		snap.Endpoints = append(snap.Endpoints, readyFixed(e, 1))
	}
	return NewLeastLoaded(snap, 2, NewPeakEWMA(snap)), snap
}

// TestDensePicksSkipTheClock: picks that come densely read the clock on
// about one pick in 16 (the lottery) plus the picks whose endpoint the
// recent reading already shows due for a sample; and an endpoint that
// falls due is still timed, within a burst, once the lottery has
// refreshed the reading.
func TestDensePicksSkipTheClock(t *testing.T) {
	const n, picks = 100, 16000
	clk := &readCounter{manualClock: manualClock{now: int64(time.Hour)}}
	avgs := make([]time.Duration, n)
	for i := range avgs {
		avgs[i] = time.Millisecond
	}
	p, snap := peakFleet(clk, avgs)
	if !p.pair {
		t.Fatal("the picker does not take the pair path")
	}
	burst := func() {
		for range picks {
			pickDone(t, p)(ok())
		}
	}
	clk.reads = 0
	burst()
	// Every endpoint was timed at this instant: none is due, so only the
	// lottery's winners read the clock (one in 16, and the first picks
	// while the clock is not yet known to be dense).
	if max := picks / 12; clk.reads > max {
		t.Errorf("%d clock readings in %d dense picks, want at most %d", clk.reads, picks, max)
	}
	if clk.reads < picks/32 {
		t.Errorf("%d clock readings in %d dense picks, want about one in 16", clk.reads, picks)
	}
	clk.advance(time.Millisecond) // past the 150µs gap
	at := clk.now
	clk.reads = 0
	burst()
	timed := 0
	for _, r := range snap.Endpoints {
		if r.Stats.rtt.lastTimed.Load() == at {
			timed++
		}
	}
	if timed != n {
		t.Errorf("%d of %d endpoints timed after they fell due, want all", timed, n)
	}
	if max := picks/12 + n; clk.reads > max {
		t.Errorf("%d clock readings in %d dense picks with %d endpoints due, want at most %d", clk.reads, picks, n, max)
	}
}

// TestSparsePicksTimeEveryCall: calls 10ms apart, each answered in 50µs,
// over three endpoints of which one is a hundred times faster than the
// others and so takes every call it is a candidate for (two in three):
// every call is timed, as the true time says it should be, though when
// the favourite takes two calls in a row, the reading its first left
// behind does not show it due.
func TestSparsePicksTimeEveryCall(t *testing.T) {
	clk := &manualClock{now: int64(time.Hour)}
	p, snap := peakFleet(clk, []time.Duration{50 * time.Microsecond, 5 * time.Millisecond, 5 * time.Millisecond})
	const calls = 1000
	timed, fav := 0, 0
	for range calls {
		clk.advance(10 * time.Millisecond)
		done := pickDone(t, p)
		for i, r := range snap.Endpoints {
			if r.Stats.rtt.lastTimed.Load() == clk.now {
				timed++
				if i == 0 {
					fav++
				}
			}
		}
		clk.advance(50 * time.Microsecond)
		done(ok())
	}
	if timed != calls {
		t.Errorf("%d of %d sparse calls timed, want every one", timed, calls)
	}
	if fav < calls*6/10 {
		t.Errorf("the fastest endpoint took %d of %d calls, want two in three", fav, calls)
	}
}

// TestPicksAfterABurstAreTimed: a dense burst leaves the pickers thinking
// picks are dense, with every endpoint timed in its last gap; calls then
// come 100ms apart. Those that go untimed before a reading finds picks
// sparse are few (a lottery winner comes one pick in 16 on average, and
// after 64 picks in 98% of bursts), and every call after that is timed.
func TestPicksAfterABurstAreTimed(t *testing.T) {
	const n, calls = 10, 200
	clk := &manualClock{now: int64(time.Hour)}
	avgs := make([]time.Duration, n)
	for i := range avgs {
		avgs[i] = time.Millisecond
	}
	p, snap := peakFleet(clk, avgs)
	for range 2000 {
		clk.advance(100 * time.Nanosecond)
		pickDone(t, p)(ok())
	}
	if p.turns.clock.dense.Load() != 1 {
		t.Fatal("picks 100ns apart are not found dense")
	}
	untimed, last := 0, -1
	for k := range calls {
		clk.advance(100 * time.Millisecond)
		done := pickDone(t, p)
		timed := false
		for _, r := range snap.Endpoints {
			timed = timed || r.Stats.rtt.lastTimed.Load() == clk.now
		}
		if !timed {
			untimed++
			last = k
		}
		clk.advance(time.Millisecond)
		done(ok())
	}
	if untimed > 64 {
		t.Errorf("%d of %d calls after the burst untimed, want 16 or so, 64 at most", untimed, calls)
	}
	if last >= untimed {
		t.Errorf("call %d of %d after the burst untimed, after %d timed ones: the pickers went back to skipping the clock", last+1, calls, last+1-untimed)
	}
	t.Logf("%d calls untimed after the burst, the last the %dth", untimed, last+1)
}
