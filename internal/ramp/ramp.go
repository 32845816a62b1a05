// Package ramp is the math of slow start: Envoy's ramp factor, the share
// of picks a ramping endpoint is held to, and the evidence that ends a
// ramp early (docs/design/slow-start.md).
package ramp

import (
	"math"
	"time"

	"github.com/pickwise/pickwise/lbconfig"
)

// Curve is a validated lbconfig.SlowStartConfig in the form picks use.
type Curve struct {
	window        int64 // nanoseconds
	invAggression float64
	minFactor     float64
	proves        bool // TimeOnly unset: answers that show an endpoint warm end its ramp
}

// New returns c's curve, or nil if slow start is off.
func New(c *lbconfig.SlowStartConfig) *Curve {
	if c == nil || !c.Enabled {
		return nil
	}
	return &Curve{
		window:        int64(c.Window),
		invAggression: 1 / c.Aggression,
		minFactor:     c.MinWeightPercent / 100,
		proves:        !c.TimeOnly,
	}
}

// Window is the ramp's length in nanoseconds.
func (r *Curve) Window() int64 { return r.window }

// Proves reports whether ramps end once answers show the endpoint warm (Proof).
func (r *Curve) Proves() bool { return r.proves }

// Factor is the share of its weight an endpoint that became ready elapsed
// nanoseconds ago gets.
func (r *Curve) Factor(elapsed int64) float64 {
	if elapsed >= r.window {
		return 1
	}
	// Envoy's floor: the first pick after READY sees no zero factor.
	elapsed = max(elapsed, int64(time.Millisecond))
	f := float64(elapsed) / float64(r.window)
	if r.invAggression != 1 {
		f = math.Pow(f, r.invAggression)
	}
	return max(f, r.minFactor)
}

// openingHorizon is how far ahead of its share a ramping endpoint may take
// picks while its opening is under way.
const openingHorizon = 100 * time.Millisecond

// Lends reports whether a weighted schedule lends a ramping endpoint,
// elapsed nanoseconds into its ramp, another of its opening's calls: its
// visits come at about twice its full pace, so lending while elapsed is
// within half its factor's share of openingHorizon matches Shares.DrawnFull.
func (r *Curve) Lends(elapsed int64) bool {
	return elapsed >= 0 && float64(elapsed) <= r.Factor(elapsed)*float64(openingHorizon)/2
}
