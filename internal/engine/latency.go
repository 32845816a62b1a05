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
type rtt struct {
	bits      atomic.Uint64 // math.Float64bits of the average, ns; 0 = no sample
	stamp     atomic.Int64  // Nanotime of the last sample
	lastTimed atomic.Int64  // Nanotime the last timed call started
}

// sampleShare sets how often a busy endpoint's calls are timed over a
// small fleet: a call is timed unless another call to the same endpoint
// started being timed less than DecayTime/sampleShare ago (150µs at the
// default 10s); until the endpoint's first answer, every call is. Timing a
// call costs two clock reads, on virtual machines most of a pick's cost,
// while a sample 150µs after the previous one moves the average by 1/65536
// of the difference: at thousands of calls a second to one endpoint,
// timing each buys nothing. A call that starts that long after the last
// timed one is timed; the average gets a sample started every 150µs or
// less, so a slowdown shows within that time plus the slow call's latency,
// and every server-side failure enters it whether timed or not
// (Endpoint.finish). In-flight counts are exact regardless. Over a large
// fleet the gap is longer: see sampleGapPerEndpoint.
const sampleShare = 1 << 16

// sampleGapPerEndpoint caps the rate of timed calls over a whole picker:
// an endpoint among n is timed at most once every n*sampleGapPerEndpoint,
// when that is longer than DecayTime/sampleShare, so that the picker as a
// whole times about one call per microsecond at most. It matters only for
// large fleets under heavy load: at 10k endpoints it is a sample every
// 10ms per endpoint, so an endpoint whose calls come 10ms apart or more
// still has every call timed. Timing more would cost the pick more than
// half its time (two clock reads and the pooled Done, against a pick that
// otherwise reads no clock while picks are dense) for samples a hundred times a
// second that a 10s average cannot tell apart. The gap never exceeds
// sampleGapMaxShare of the decay time (39ms at the default 10s), so that
// a short decay time still gets hundreds of samples per time constant.
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
