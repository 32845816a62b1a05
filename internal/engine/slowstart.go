package engine

import (
	"math"
	"sync/atomic"
	"time"

	"github.com/pickwise/pickwise/lbconfig"
)

// SlowStartConfig is lbconfig.SlowStartConfig, under the name the
// engine's code uses.
type SlowStartConfig = lbconfig.SlowStartConfig

// ramp is a validated SlowStartConfig in the form the pick path uses.
type ramp struct {
	window        int64 // nanoseconds
	invAggression float64
	minFactor     float64
}

func newRamp(c *SlowStartConfig) *ramp {
	if c == nil || !c.Enabled {
		return nil
	}
	return &ramp{
		window:        int64(c.Window),
		invAggression: 1 / c.Aggression,
		minFactor:     c.MinWeightPercent / 100,
	}
}

// factor is the share of its weight an endpoint that became ready elapsed
// nanoseconds ago gets.
func (r *ramp) factor(elapsed int64) float64 {
	if elapsed >= r.window {
		return 1
	}
	// Envoy counts at least one millisecond so the first pick after READY
	// does not see a zero time factor.
	elapsed = max(elapsed, int64(time.Millisecond))
	f := float64(elapsed) / float64(r.window)
	if r.invAggression != 1 {
		f = math.Pow(f, r.invAggression)
	}
	return max(f, r.minFactor)
}

// rampShares holds a d-choice picker's ramping endpoints to the share of
// its picks that their ramped weight gives them. Dividing a ramping
// endpoint's cost by its factor, as weighted schedules do with its weight,
// does not ramp a least-loaded choice: among idle candidates it made the
// newcomer lose every comparison until its ramp ended, and against
// long-lived calls, where a newcomer with nothing in flight is cheaper
// than peers holding hundreds, it won most comparisons it entered (15%
// of new streams against eight peers in the simulator's cold start,
// where its fair share is 11%). So a ramping endpoint competes at its
// full weight, and is passed over while it has taken its share of the
// picks,
//
//	f*w / (total - (1-f)*w)
//
// at ramp factor f, its weighted share with its own weight ramped and the
// others' full; where the loads alone keep it under that share, nothing
// changes. Each time a pick draws it as a candidate, it earns that share
// of n/min(d, n) picks (each pick draws a given endpoint with probability
// min(d, n)/n), at the factor of the moment, so that a share that grows
// with the ramp applies to the picks to come and not to those already
// made; and it keeps at most rampBurst picks of what it earned and did
// not take. The counts are the endpoint's own (rampCount), from the start
// of its ramp, whatever pickers come and go meanwhile, and only the picks
// that draw a ramping endpoint write them: counting the picker's own
// picks would write one line on every pick from every core.
//
// The share assumes the others at full weight: it holds one newcomer, or
// a few, to their ramped shares. When most of the fleet ramps at once
// (a client that lost every connection), every candidate is over its
// share, and the pick goes to the best of them as if none ramped.
type rampShares struct {
	total   float64 // the snapshot's summed weight, unramped
	perDraw float64 // picks per time an endpoint is drawn: n/min(d, n)
}

// rampCount is one endpoint's counts in its current slow-start ramp: the
// share of picks it has earned, in rampUnits, and the picks it took.
type rampCount struct{ earned, took atomic.Int64 }

// reset starts the counts over, for a new ramp.
func (c *rampCount) reset() {
	c.earned.Store(0)
	c.took.Store(0)
}

// rampUnit is a pick in rampCount's fixed point: a share earned a draw is
// a fraction of a pick.
const rampUnit = 1 << 20

// newRampShares returns the shares of a picker over n endpoints whose
// weights sum to total, drawing choices candidates a pick.
func newRampShares(total float64, n, choices int) *rampShares {
	return &rampShares{total: total, perDraw: float64(n) / float64(min(choices, n))}
}

// rampBurst bounds what a ramping endpoint keeps of the share it earned
// and did not take: one that the loads kept under its share would
// otherwise spend all of it in one run of picks once they let it. (A run
// can be a pick or two longer: any part of a pick earned admits one.)
const rampBurst = 4

// drawnFull credits c, the counts of an endpoint of weight w at ramp
// factor f, with its share of the picks a draw stands for, and reports
// whether it has taken all it earned.
func (s *rampShares) drawnFull(c *rampCount, w, f float64) bool {
	if f >= 1 {
		return false
	}
	earned := c.earned.Add(int64(f * w / (s.total - (1-f)*w) * s.perDraw * rampUnit))
	took := c.took.Load() * rampUnit
	if took >= earned {
		return true
	}
	if most := took + rampBurst*rampUnit; earned > most {
		// Racing picks may both lower it; either value forgets the rest.
		c.earned.CompareAndSwap(earned, most)
	}
	return false
}
