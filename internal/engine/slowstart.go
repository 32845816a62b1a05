package engine

import (
	"math"
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
	if c == nil {
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
