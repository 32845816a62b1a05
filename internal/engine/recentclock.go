package engine

import (
	"sync/atomic"
	"time"
)

// recentClock lets a Peak EWMA pick decide without reading the clock that
// its call is not to be timed: while picks are dense, a pick reads the
// clock only when the recent reading already shows its endpoint due for a
// sample, or when it wins a lottery of one pick in 16, whose reading
// refreshes the recent one. While picks are sparse every pick reads it
// (docs/design/timed-calls.md).
type recentClock struct {
	at      atomic.Int64  // the latest reading noted (note), Clock.Nanotime
	drawnAt atomic.Int64  // the reading of a recent lottery winner: the last, to recentResolution
	dense   atomic.Uint32 // 1 while picks are dense; 0, the start: every pick reads the clock
}

const (
	// recentResolution is how far the clock must have moved before a
	// reading replaces the recent one: the line is shared by every core
	// that picks, and a write per reading would have them take it from
	// each other on every timed pick. 10µs is far below any sample gap.
	recentResolution = int64(10 * time.Microsecond)
	// denseLotteryGap is the longest time between lottery winners (one
	// pick in 16 on average) at which picks count as dense: 16 picks in
	// 64µs, or 250,000 picks a second. Below that rate the clock's cost is
	// under a hundredth of a core.
	denseLotteryGap = int64(64 * time.Microsecond)
	// sparseAfter is the age of the recent reading at which any reading
	// finds picks sparse: while picks are dense, the lottery refreshes it
	// every 64µs or less on average, and an age of four times that is
	// rare (about 2% of the gaps at 250,000 picks a second).
	sparseAfter = 4 * denseLotteryGap
)

// note records the clock reading now, taken by a pick whose spare
// randomness made it a lottery winner or not.
func (r *recentClock) note(now int64, winner bool) {
	age := now - r.at.Load()
	switch {
	case winner:
		dense := uint32(0)
		if now-r.drawnAt.Load() < denseLotteryGap && age < sparseAfter {
			dense = 1
		}
		if now-r.drawnAt.Load() >= recentResolution {
			// As at, not every winner's reading: a store on every
			// winner had the cores take the line from each other on
			// one pick in 16, and miss it on the next read. drawnAt
			// may then be up to recentResolution older than the last
			// winner, so the gap that finds picks dense is, between
			// winners, 54-64µs rather than 64µs: the same rate within
			// a sixth, and picks that dense are dense either way.
			r.drawnAt.Store(now)
		}
		if r.dense.Load() != dense {
			r.dense.Store(dense)
		}
	case age >= sparseAfter && r.dense.Load() != 0:
		r.dense.Store(0)
	}
	if age >= recentResolution {
		r.at.Store(now)
	}
}
