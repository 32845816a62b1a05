// Package evidence is the math of failure evidence: decayed outcome counts
// in one word, and how often a pick avoids them (docs/design/failure-evidence.md).
package evidence

import "math"

// Counts are an endpoint's decayed counts of server-side failures and of
// all outcomes, two float32s so that they pack into one atomic word.
type Counts struct {
	Failures, Total float32
}

// Pack is c as one word: Failures' bits above, Total's below.
func (c Counts) Pack() uint64 {
	return uint64(math.Float32bits(c.Failures))<<32 | uint64(math.Float32bits(c.Total))
}

// Unpack is the Counts that Pack made v from.
func Unpack(v uint64) Counts {
	return Counts{Failures: math.Float32frombits(uint32(v >> 32)), Total: math.Float32frombits(uint32(v))}
}

// Healthy is the counts of an endpoint whose window is full of successes:
// one more changes nothing, so its Done writes nothing. Its +Inf total
// stands for the full count (Counted).
var Healthy = Counts{Failures: 0, Total: float32(math.Inf(1))}

// HealthyBits is Healthy.Pack(), a constant so a Done compares without a load.
const HealthyBits = 0x7f800000

// minTracked is where failures snap to zero: a recovered endpoint is healthy again.
const minTracked = 0.05

// Counted is c with Healthy's stand-in total replaced by full.
func (c Counts) Counted(full float32) Counts {
	if math.IsInf(float64(c.Total), 1) {
		c.Total = full
	}
	return c
}

// Step folds one outcome into c, keep being what it leaves of the older ones.
func (c Counts) Step(failed bool, keep float32) Counts {
	c.Failures *= keep
	c.Total = c.Total*keep + 1
	if failed {
		c.Failures++
	}
	if c.Failures < minTracked {
		c.Failures = 0
	}
	return c
}

// Scaled is c with both counts multiplied by f.
func (c Counts) Scaled(f float32) Counts {
	c.Failures *= f
	c.Total *= f
	if c.Failures < minTracked {
		c.Failures = 0
	}
	return c
}

// prior is the weight, in outcomes, of the belief that an endpoint fails
// at the fleet's rate: one lone failure reads as one in three, not one in one.
const prior = 2

// Avoidance is the probability, at most maxAvoid, that a pick passes over
// counts c: their excess over the fleet's rate, weighed by its significance.
func Avoidance(c Counts, fleet, maxAvoid float64) float64 {
	x := Excess(c, fleet)
	if x == 0 {
		return 0
	}
	if z, finite := ZScore(c, fleet); finite {
		x *= max(0, min(1, (z-1)/2))
	}
	s := 1 - x
	return min(1-s*s, maxAvoid)
}

// Excess is c's failure rate above rate, in [0, 1], with the prior.
func Excess(c Counts, rate float64) float64 {
	if c.Failures == 0 || rate >= 1 {
		return 0
	}
	own := (float64(c.Failures) + prior*rate) / (float64(c.Total) + prior)
	return max(0, min((own-rate)/(1-rate), 1))
}

// ZScore is how many standard deviations c's failures stand above what
// rate predicts for as many outcomes. With rate 0 (or no outcomes) any
// failure is beyond chance: finite is false.
func ZScore(c Counts, rate float64) (z float64, finite bool) {
	v := float64(c.Total) * rate * (1 - rate)
	if v <= 0 {
		return 0, false
	}
	return (float64(c.Failures) - float64(c.Total)*rate) / math.Sqrt(v), true
}
