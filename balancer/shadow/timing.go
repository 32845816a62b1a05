package shadow

import (
	"sync/atomic"
	"time"

	"github.com/pickwise/pickwise/internal/engine"
)

// timing decides which recorded calls read the clock. A reading costs
// 30-40 ns on a VM's clock, more than the rest of a sampled pick, and a
// timed call takes two. When recorded calls come close together, only one
// in 2^shift is timed (chosen by spare bits of the pick's draw, or of its
// shard's xorshift when it took none, so the timed ones are a fair
// sample); the others take the latest reading any
// timed call took, which is then at most about maxStale old. When calls
// are sparse every one is timed, as the clock's cost per second is then
// small, and a reading kept from an earlier call would be too old to
// start or end a held prediction by. Calls are found sparse by a timed
// pick's reading: when a busy spell ends, the calls before the next timed
// one (up to 2^shift, 64 at most, on average) still take the latest
// reading, as old as the spell's end, and the held predictions due in
// that time wait for that timed call.
//
// What the latest reading is used for, and why its age is harmless there:
// it only places the candidate's held predictions in time (releases): an
// untimed compared pick holds its prediction from the latest reading, and
// later picks and calls' ends let it go by the latest reading of their
// time, both late by about the same amount, so a held prediction lasts
// as long as it should on average, give or take about maxStale. Latencies (the arms', the endpoints'
// estimates, the candidate's evidence) are taken from timed calls only.
type timing struct {
	clock engine.Clock

	latest   atomic.Int64  // the latest reading a recorded call took
	lastPick atomic.Int64  // the reading of the last timed pick; 0 before any
	gap      atomic.Int64  // smoothed nanoseconds between recorded picks
	shift    atomic.Uint32 // one recorded call in 2^shift is timed
}

const (
	// maxStale is how old the latest reading may be, about, when an
	// untimed call takes it: far under a call across a network (a
	// loopback gRPC call takes 50-100 µs), so that a held prediction's
	// timing stays within a small share of the call it stands for.
	maxStale = int64(20 * time.Microsecond)
	// maxShift times one call in 64 at most, reached when recorded calls
	// come under about 300 ns apart (maxStale / 64): the arms' latencies
	// and the endpoints' estimates still get a sample every 20 µs or so,
	// and the clock's cost per pick falls to about 2 x 35 / 64 = 1 ns,
	// where one in 16 left it at 4 ns, a tenth of the recording's cost.
	maxShift = 6
	// gapWeight is the share of each timed pick in the smoothed gap:
	// 1/8, so that one short gap among sparse calls does not stop timing.
	gapWeight = 8
)

// timed reports whether a call whose draw left bits spare is timed.
func (t *timing) timed(bits uint32) bool {
	return t.timedAt(bits, t.shift.Load())
}

// timedAt is timed at a shift already read.
func (t *timing) timedAt(bits uint32, shift uint32) bool {
	return bits&(1<<shift-1) == 0
}

// pickReading is a timed pick's reading of the clock. It keeps the
// reading for untimed calls and, from the time since the last timed pick,
// sets how many calls are timed.
func (t *timing) pickReading() int64 {
	now := t.clock.Nanotime()
	t.latest.Store(now)
	prev := t.lastPick.Swap(now)
	if prev == 0 || now < prev {
		// The first pick, or two picks' readings stored out of order.
		return now
	}
	shift := t.shift.Load()
	// The timed picks are one in 2^shift of all: the gap between two is
	// that many recorded picks' worth.
	per := (now - prev) >> shift
	gap := t.gap.Load()
	if gap == 0 {
		gap = per
	} else {
		gap += (per - gap) / gapWeight
	}
	// Racing picks may lose each other's update; the next one corrects it.
	t.gap.Store(gap)
	next := uint32(0)
	for next < maxShift && gap<<(next+1) <= maxStale {
		next++
	}
	if next != shift {
		t.shift.Store(next)
	}
	return now
}

// endReading is a timed call's reading of the clock at its end, kept for
// untimed calls.
func (t *timing) endReading() int64 {
	now := t.clock.Nanotime()
	t.latest.Store(now)
	return now
}
