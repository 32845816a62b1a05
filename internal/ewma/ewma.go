// Package ewma is the math of Finagle's Peak EWMA cost: a latency average
// decayed by idle time, times (in-flight + 1). docs/design/peak-ewma.md
// explains the choices.
package ewma

import "math"

// Decay is exp(-x) for x >= 0, to about 1e-7 relative error, at a fraction
// of math.Exp's cost: every timed pick computes it per candidate. Small x,
// the common case under load, inlines.
func Decay(x float64) float64 {
	if x < 1e-3 {
		x = max(x, 0)
		return 1 - x*(1-x/2)
	}
	return decayFar(x)
}

// decayFar is Decay for x >= 1e-3: 2^-(k+f), the integer k into the
// exponent, 2^-f by its Taylor series to the 8th power.
func decayFar(x float64) float64 {
	if x > 700 {
		return 0
	}
	y := x * math.Log2E
	k := math.Floor(y)
	f := y - k
	t := f * math.Ln2
	p := 1 - t*(1-t/2*(1-t/3*(1-t/4*(1-t/5*(1-t/6*(1-t/7*(1-t/8)))))))
	return math.Ldexp(p, -int(k))
}

// PendingPenalty is the load of an endpoint with calls in flight and no
// sample yet, so that a newcomer gets one call at a time until it answers.
const PendingPenalty = 1e15

// Reading is what an endpoint's load is computed from, read at once.
type Reading struct {
	InFlight int64
	Avg      float64 // latency average in ns as last updated; 0: no sample
	Stamp    int64   // Nanotime of the last sample
}

// Load is the load at now, given 1/decay time in ns, and whether calls
// are in flight.
func (r Reading) Load(now int64, perNano float64) (load float64, busy bool) {
	pending := float64(r.InFlight)
	avg := r.Avg
	if avg == 0 {
		if pending > 0 {
			return PendingPenalty + pending, true
		}
		return 0, false
	}
	if idle := now - r.Stamp; idle > 0 {
		avg *= Decay(float64(idle) * perNano)
	}
	return avg * (pending + 1), r.InFlight > 0
}

// Pair is the loads of a and b at the later of their stamps: they compare
// as their loads at any later time do, so a picker compares before it
// reads the clock. Both are decayed, the later by zero, to avoid a branch.
func Pair(a, b Reading, perNano float64) (la, lb float64, busyA, busyB bool) {
	at := max(a.Stamp, b.Stamp)
	if a.Avg == 0 || b.Avg == 0 {
		la, busyA = a.Load(at, perNano)
		lb, busyB = b.Load(at, perNano)
		return la, lb, busyA, busyB
	}
	la = a.Avg * Decay(float64(at-a.Stamp)*perNano) * float64(a.InFlight+1)
	lb = b.Avg * Decay(float64(at-b.Stamp)*perNano) * float64(b.InFlight+1)
	return la, lb, a.InFlight > 0, b.InFlight > 0
}
