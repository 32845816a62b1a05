package engine

import (
	"sync/atomic"
	"time"
)

// LatencyConfig configures the peak-sensitive latency average the engine
// keeps per endpoint for latency-aware policies (Finagle's Peak EWMA).
type LatencyConfig struct {
	// DecayTime is the average's time constant: a sample below the average
	// pulls it down with weight 1-exp(-elapsed/DecayTime), where elapsed is
	// the time since the previous sample, and with no samples the cost an
	// endpoint shows to pickers decays towards zero at the same rate.
	DecayTime time.Duration
}

// latency is a LatencyConfig in nanoseconds, as the pick and done paths
// use it.
type latency struct {
	tau         float64
	perNano     float64 // 1/tau: picks multiply instead of dividing
	sampleEvery int64   // see sampleShare
}

func newLatency(c *LatencyConfig) *latency {
	if c == nil {
		return nil
	}
	return &latency{
		tau:         float64(c.DecayTime),
		perNano:     1 / float64(c.DecayTime),
		sampleEvery: int64(c.DecayTime / sampleShare),
	}
}

// rtt is the latency state of an endpoint. Done updates the average with a
// compare-and-swap and then the stamp; Pick reads both without a lock and
// may see them from different updates, which only blurs one estimate.
// Under a WeightedRR picker, which no latency-aware picker shares a
// balancer with, the same words hold the baseline latency and its timed
// call (expected.go).
type rtt struct {
	bits      atomic.Uint64 // math.Float64bits of the average, ns; 0 = no sample
	stamp     atomic.Int64  // Nanotime of the last sample
	lastTimed atomic.Int64  // Nanotime the last timed call started
}

// sampleShare sets how often a busy endpoint's calls are timed over a
// small fleet: at most one in DecayTime/sampleShare (150µs at the default
// 10s), and every call until its first answer (docs/design/timed-calls.md).
const sampleShare = 1 << 16

// sampleGapPerEndpoint caps a whole picker at about one timed call per
// microsecond: an endpoint among n is timed at most once every
// n*sampleGapPerEndpoint, never more than sampleGapMaxShare of the decay
// time apart.
const sampleGapPerEndpoint = int64(time.Microsecond)

// sampleGapMaxShare bounds the gap between timed calls at this fraction of
// the decay time: far below staleAfter, so that samples of a busy
// endpoint are never stale for want of timing.
const sampleGapMaxShare = 256

// sampleGap is the least time between timed calls to one endpoint of a
// picker over n endpoints: see sampleShare and sampleGapPerEndpoint.
func (l *latency) sampleGap(n int) int64 {
	return max(l.sampleEvery, min(int64(n)*sampleGapPerEndpoint, int64(l.tau/sampleGapMaxShare)))
}
