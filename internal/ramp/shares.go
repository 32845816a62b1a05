package ramp

import (
	"sync/atomic"
	"time"
)

// Shares holds a d-choice picker's ramping endpoints to the share of its
// picks their ramped weight gives them, f*w / (total - (1-f)*w) at factor
// f, by passing over one that has taken it; a ramped cost would not.
type Shares struct {
	total    float64 // the snapshot's summed weight, unramped
	perDraw  float64 // picks per time an endpoint is drawn: n/min(d, n)
	byWeight bool    // first candidates are drawn by weight: only they earn
}

// NewShares returns the shares of a picker over n endpoints whose weights
// sum to total, drawing choices candidates a pick, the first by weight if
// byWeight.
func NewShares(total float64, n, choices int, byWeight bool) *Shares {
	return &Shares{total: total, perDraw: float64(n) / float64(min(choices, n)), byWeight: byWeight}
}

// Count is one endpoint's picks in its current ramp, earned and taken.
type Count struct{ earned, took atomic.Int64 }

// Reset starts the counts over, for a new ramp.
func (c *Count) Reset() {
	c.earned.Store(0)
	c.took.Store(0)
}

// Take counts a pick the endpoint took.
func (c *Count) Take() { c.took.Add(1) }

const (
	unit  = 1 << 20 // a pick in Count's fixed point: a draw earns a fraction of one
	burst = 4       // the most earned picks kept untaken, spent in one run at most
)

// DrawnFull credits c, the counts of an endpoint of weight w at factor f,
// drawn as a pick's first candidate or not, with its share of the picks a
// draw stands for, and reports whether it has taken all it earned. While
// its opening is under way (elapsed nanoseconds into the ramp), it may
// also take what it would earn over openingHorizon, up to QuickAnswers.
func (s *Shares) DrawnFull(c *Count, w, f float64, first, opening bool, elapsed int64) bool {
	if f >= 1 {
		return false
	}
	perDraw := s.perDraw
	if s.byWeight {
		perDraw = s.total / w
	}
	var earned int64
	if s.byWeight && !first {
		earned = c.earned.Load()
	} else {
		earned = c.earned.Add(int64(f * w / (s.total - (1-f)*w) * perDraw * unit))
	}
	took := c.took.Load() * unit
	limit := earned
	if opening {
		ahead := float64(earned) * float64(openingHorizon) / float64(max(elapsed, int64(time.Millisecond)))
		limit += int64(min(ahead, QuickAnswers*unit))
	}
	if took >= limit {
		return true
	}
	if most := took + burst*unit; earned > most {
		// Racing picks may both lower it; either value forgets the rest.
		c.earned.CompareAndSwap(earned, most)
	}
	return false
}
