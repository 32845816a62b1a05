package engine

import (
	"sync/atomic"
	"time"
)

// recentClock lets a Peak EWMA pick decide without reading the clock that
// its call is not to be timed. Reading the clock is most of a pick's cost
// on virtual machines (about 30ns under kvm-clock, against 25ns for the
// rest of a two-choice pick), and under load most calls are not timed
// (sampleShare): a pick that read the clock only to learn that spent most
// of its time for nothing.
//
// So pickers keep a recent reading here, and while picks come densely, a
// pick reads the clock only when that reading already says that its
// endpoint is due for a sample (Endpoint.wantsSample at the reading, which
// implies it at the true time, which is later), or when it wins a lottery
// of one pick in 16 (the picks that update the busy estimate, see turns),
// whose reading refreshes the recent one. The reading then lags the true
// time by about 16 picks or recentResolution, whichever is more: a few
// microseconds under load, against the 150µs between an endpoint's samples
// at the default decay time. A pick that reads the clock still decides by
// the true time, so no call is timed that would not be; what the lag costs
// is that an endpoint due for a sample may wait that long for it, which
// matters only at decay times far below the default.
//
// While picks are sparse, every pick reads the clock, as it did before
// there was a recent reading: there the recent reading could be stale by
// more than a gap, and the calls a stale reading skipped would be the
// samples of a slow channel, which has few; the clock costs it nothing
// that matters. Picks are dense while the lottery's winners come less
// than denseLotteryGap apart (more than about 250,000 picks a second;
// less some of recentResolution, see note).
// When a burst ends, picks are found sparse by the first reading that
// finds the recent one older than sparseAfter: the first lottery winner
// (16 picks on average, 64 or fewer after 98% of bursts), or sooner, a
// pick whose endpoint the recent reading shows due. Until then a call to
// an endpoint timed in the burst's last gap goes untimed: over a fleet of
// ten that is one or two samples an endpoint, once per burst
// (TestPicksAfterABurstAreTimed).
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
