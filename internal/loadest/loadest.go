// Package loadest is the load a server reports to pickwise_prequal: its
// requests in flight (RIF) and the latency a call arriving now can expect,
// learnt from recent calls that found about as many calls in flight.
//
// It reads no clock: callers pass time as a monotonic duration since an
// origin of their choosing, so the simulator drives it in virtual time.
// Every method is safe for concurrent use, takes no lock and allocates
// nothing. docs/design/prequal.md explains the choices.
package loadest

import (
	"math"
	"math/bits"
	"sync/atomic"
	"time"

	"github.com/pickwise/pickwise/internal/ewma"
)

const (
	// DecayTime is the time constant of a band's average: a sample's
	// weight is 1-exp(-gap/DecayTime), gap being the time since the
	// band's previous sample, so a band remembers about a second of
	// its history whatever its call rate.
	DecayTime = time.Second
	// MinWeight is the least weight of a sample, so that calls ending
	// within the same millisecond still count: under heavy traffic a
	// band averages about its last 1/MinWeight calls.
	MinWeight = 1.0 / 32
	// StaleAfter is how long a band's average is believed after its last
	// sample. Past it the band counts as empty, so a slowdown that ended
	// stops being reported even where no call comes to correct it.
	StaleAfter = 3 * time.Second
)

// Bands: one per RIF from 0 to 7, where a call more or less changes a
// server's latency most, then two per power of two up to 2^16, above
// which everything shares the last band.
const (
	exactBands = 8
	numBands   = exactBands + 2*(16-3)
)

// Estimator keeps a server's RIF and its latency by RIF band. The zero
// value is ready to use; an Estimator must not be copied after first use.
type Estimator struct {
	rif atomic.Int64
	// bands holds, per band, the time of the last sample and the decayed
	// average in one word (see pack), so a CAS updates both together.
	bands [numBands]atomic.Uint64
}

// Token is what Begin hands a call, for End: the RIF the call found.
type Token struct{ rif int64 }

// RIF is the number of calls in flight when the call began, itself
// excluded.
func (t Token) RIF() int { return int(t.rif) }

// Begin counts a call in.
func (e *Estimator) Begin() Token {
	return Token{rif: e.rif.Add(1) - 1}
}

// End counts a call out and folds its latency into the band of the RIF it
// found. now is the time the call ended.
func (e *Estimator) End(t Token, now, latency time.Duration) {
	e.rif.Add(-1)
	band := &e.bands[bandOf(t.rif)]
	ms := stamp(now)
	x := float64(max(latency, 0))
	for {
		old := band.Load()
		avg := x
		if last, prev, ok := unpack(old); ok && ms-min(last, ms) < staleMillis {
			gap := float64(ms-min(last, ms)) / float64(DecayTime/time.Millisecond)
			w := max(1-ewma.Decay(gap), MinWeight)
			avg = prev + w*(x-prev)
			ms = max(ms, last) // a call that read the clock earlier but ends later
		}
		if band.CompareAndSwap(old, pack(ms, avg)) {
			return
		}
		ms = stamp(now)
	}
}

// Drop counts a call out without a latency sample: for calls whose
// duration says nothing about the server's speed.
func (e *Estimator) Drop(Token) {
	e.rif.Add(-1)
}

// Load returns the calls in flight at now and the latency a call arriving
// now can expect; 0 means unknown. A call found at RIF r uses r's band;
// when that band has no recent data, the estimate is interpolated in RIF
// between the nearest bands with data on either side, or, with data on
// one side only, scaled from it by (r+1)/(bandRIF+1) as a server that
// shares itself among its calls would slow down.
func (e *Estimator) Load(now time.Duration) (rif int, latency time.Duration) {
	r := max(e.rif.Load(), 0)
	b := bandOf(r)
	ms := stamp(now)
	if v, ok := e.read(b, ms); ok {
		return int(r), estimate(v)
	}
	lo, hi := -1, -1
	var loV, hiV float64
	for i := b - 1; i >= 0; i-- {
		if v, ok := e.read(i, ms); ok {
			lo, loV = i, v
			break
		}
	}
	for i := b + 1; i < numBands; i++ {
		if v, ok := e.read(i, ms); ok {
			hi, hiV = i, v
			break
		}
	}
	x := float64(r)
	switch {
	case lo < 0 && hi < 0:
		return int(r), 0
	case hi < 0:
		return int(r), estimate(loV * (x + 1) / (bandRIF[lo] + 1))
	case lo < 0:
		return int(r), estimate(hiV * (x + 1) / (bandRIF[hi] + 1))
	}
	f := (x - bandRIF[lo]) / (bandRIF[hi] - bandRIF[lo])
	return int(r), estimate(loV + f*(hiV-loV))
}

// read returns band i's average if its last sample is recent at ms.
func (e *Estimator) read(i int, ms uint64) (float64, bool) {
	last, v, ok := unpack(e.bands[i].Load())
	if !ok || ms-min(last, ms) >= staleMillis {
		return 0, false
	}
	return v, true
}

// estimate rounds an average to a Duration of at least 1 ns, as 0 means
// unknown.
func estimate(v float64) time.Duration {
	return max(time.Duration(v+0.5), 1)
}

// bandOf maps a RIF to its band.
func bandOf(rif int64) int {
	if rif < exactBands {
		return int(max(rif, 0))
	}
	e := bits.Len64(uint64(rif)) - 1 // 2^e <= rif < 2^(e+1), e >= 3
	half := int(rif>>(e-1)) & 1
	return min(exactBands+2*(e-3)+half, numBands-1)
}

// bandRIF is each band's representative RIF: its middle.
var bandRIF = func() (mid [numBands]float64) {
	for i := range mid {
		if i < exactBands {
			mid[i] = float64(i)
			continue
		}
		e := 3 + (i-exactBands)/2
		width := 1 << (e - 1)
		lo := 1<<e + (i-exactBands)%2*width
		mid[i] = float64(lo) + float64(width-1)/2
	}
	return mid
}()

// A band's word: the millisecond of its last sample plus one (0: never
// sampled) in the top 41 bits, which last 69 years, and the average
// latency in ns as a float32 without its sign bit and lowest 8 mantissa
// bits (15 remain: 3e-5 relative precision) in the low 23.
const (
	latBits     = 23
	staleMillis = uint64(StaleAfter / time.Millisecond)
)

func stamp(now time.Duration) uint64 {
	return uint64(max(now, 0) / time.Millisecond)
}

func pack(ms uint64, avg float64) uint64 {
	f := uint64(math.Float32bits(float32(avg))) + 1<<7 // round to nearest
	return (ms+1)<<latBits | f>>8
}

func unpack(w uint64) (ms uint64, avg float64, ok bool) {
	if w == 0 {
		return 0, 0, false
	}
	f := math.Float32frombits(uint32(w&(1<<latBits-1)) << 8)
	return w>>latBits - 1, float64(f), true
}
