package engine

import (
	"math"
	"sync"
	"time"

	"github.com/pickwise/pickwise/internal/ewma"
	"github.com/pickwise/pickwise/internal/ramp"
	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Latency's pick side: which calls are timed, what pickers price, and the
// pooled Done that folds a latency into the average (settings: latency.go).

// wantsSample reports whether a call placed on e at now should be timed,
// gap being the least time between two (latency.sampleGap).
func (e *Endpoint) wantsSample(now, gap int64) bool {
	return now-e.rtt.lastTimed.Load() >= gap || e.rtt.bits.Load() == 0
}

// mayWantSample reports whether a pick that placed its call on e, a
// lottery winner or not, must read the clock to decide (recentClock).
func (e *Endpoint) mayWantSample(r *recentClock, gap int64, winner bool) bool {
	return r.dense.Load() == 0 || winner || e.wantsSample(r.at.Load(), gap)
}

// staleAfter is the gap between samples, in decay times, after which a
// sample starts from the decayed average rather than the stored one.
const staleAfter = 1.0 / 8

// PeakLoad is an endpoint's Peak EWMA load at now: its latency average,
// decayed by the time since its last sample, times (in-flight + 1).
func (e *Endpoint) PeakLoad(now int64, l *latency) float64 {
	load, _ := e.peakLoad(now, l)
	return load
}

// peakLoad is PeakLoad, and whether the endpoint has calls in flight.
func (e *Endpoint) peakLoad(now int64, l *latency) (load float64, busy bool) {
	return e.peakState().Load(now, l.perNano)
}

// peakState is what the endpoint's load is computed from, read at once.
func (e *Endpoint) peakState() ewma.Reading {
	return ewma.Reading{InFlight: e.inFlight(), Avg: math.Float64frombits(e.rtt.bits.Load()), Stamp: e.rtt.stamp.Load()}
}

// PeakEWMA is the load metric of latency-aware policies (PeakLoad). A
// LeastLoaded picker given it compares two candidates without the clock
// (ewma.Pair) and times the calls due for a sample.
type PeakEWMA struct{ snap *Snapshot }

// NewPeakEWMA returns the Peak EWMA metric over snap's endpoints. snap must
// come from a policy whose Settings set Latency.
func NewPeakEWMA(snap *Snapshot) PeakEWMA { return PeakEWMA{snap: snap} }

// Load reads the clock itself; LeastLoaded reads it at most once a pick.
func (m PeakEWMA) Load(r *Ready) float64 {
	return r.Stats.PeakLoad(m.snap.Clock.Nanotime(), m.snap.latency)
}

// LatencyAverage is the endpoint's latency average as last updated (no idle
// decay), and whether it has one.
func (e *Endpoint) LatencyAverage() (time.Duration, bool) {
	avg := math.Float64frombits(e.rtt.bits.Load())
	return time.Duration(avg), avg != 0
}

// observe folds one call's outcome into the latency average: a success
// is a sample; a server-side failure, after the first success, enters as
// max(its latency, the average), so that a fast failure never lowers it;
// anything else says nothing. A slower sample is the peak, but for a lone
// far one (holdFarPeak). docs/design/peak-ewma.md has why.
func (e *Endpoint) observe(info balancer.DoneInfo, took, now int64, l *latency) {
	if !reached(info) {
		return // never reached the server: no latency to learn from
	}
	sample := float64(took)
	if info.Err != nil {
		if !serverFailed(info, e.shared.penalty.Load()) || took == 0 {
			return
		}
		cur := math.Float64frombits(e.rtt.bits.Load())
		if cur == 0 {
			return // no average to raise: the failure counts judge it
		}
		sample = math.Max(sample, cur)
	}
	sample = math.Max(sample, 1) // a zero would read as "no sample"
	for {
		old := e.rtt.bits.Load()
		avg := math.Float64frombits(old)
		// Far against the stored average, not the decayed one: at a few
		// calls a second the usual answer is far over that.
		far := sample > farPeak*avg
		idle := float64(max(now-e.rtt.stamp.Load(), 0))
		w := ewma.Decay(idle * l.perNano)
		if idle > l.tau*staleAfter {
			avg *= w // stale: pickers have watched it decay
		}
		held := e.farPeaks.held.Load()
		switch {
		case avg == 0:
			avg = sample
		case far:
			if e.holdFarPeak(sample, now, l) {
				return
			}
			// The second far answer, or they come often: the larger is the peak.
			avg = math.Max(sample, math.Float64frombits(held))
		case sample > avg:
			avg = sample // the peak
		default:
			avg = avg*w + sample*(1-w)
		}
		if e.rtt.bits.CompareAndSwap(old, math.Float64bits(avg)) {
			e.rtt.stamp.Store(now) // racing Dones: either stamp, microseconds apart
			if held != 0 && (far || info.Err == nil) {
				// Decided: taken with a far answer, forgiven by a success.
				e.farPeaks.held.CompareAndSwap(held, 0)
			}
			return
		}
	}
}

// farPeak is how many times the average a far peak is (holdFarPeak):
// closeBand, under which a peak still leaves an idle endpoint a chance.
const farPeak = 3.0

// holdFarPeak reports whether a far peak, sample at now, is held until
// the next answer rather than taken: only when no far peak came within
// the decay time before it. One pause would otherwise price a healthy
// backend out for seconds. Racing Dones may hold or take one twice.
func (e *Endpoint) holdFarPeak(sample float64, now int64, l *latency) bool {
	last := e.farPeaks.last.Swap(now)
	if last != 0 && float64(now-last) <= l.tau {
		return false // the second in a row, or too soon after the last
	}
	e.farPeaks.held.Store(math.Float64bits(sample))
	return true
}

// call carries one timed call's start from Pick to Done, pooled with its
// Done bound once, so timing a call allocates nothing.
type call struct {
	e        *Endpoint
	shared   *doneShared // e.shared, which the picker has at hand: not read from e's second line
	start    int64
	clock    Clock
	lat      *latency  // nil: the call is not a sample of the latency average
	proof    ramp.Kind // what the answer is evidence of for slow start, if anything
	weighted bool      // a WeightedRR placed it: it ends as e.weightedDone, and an answer's latency goes into the baseline
	done     func(balancer.DoneInfo)
}

var callPool sync.Pool

func init() {
	// Set here rather than in the declaration: finish refers to callPool.
	callPool.New = func() any {
		c := &call{}
		c.done = c.finish
		return c
	}
}

func (c *call) finish(info balancer.DoneInfo) {
	e, shared, start, clock, lat, proof, weighted := c.e, c.shared, c.start, c.clock, c.lat, c.proof, c.weighted
	*c = call{done: c.done}
	callPool.Put(c)
	// Ended before the clock is read, so that the endpoint's line is
	// fetched while the read stalls.
	if weighted {
		e.weightedDone(info)
	} else {
		e.settle(info, shared)
	}
	now := clock.Nanotime()
	if lat != nil {
		e.observe(info, now-start, now, lat)
	}
	if weighted && info.Err == nil {
		e.observeBase(now-start, now)
	}
	if proof == ramp.None {
		return
	}
	if shared.answer(e, proof, info, now-start, now) {
		shared.work.provenSoon()
	}
}

// pickTimed is PickEndpoint for a timed call: a latency sample if lat is
// not nil, and slow start's evidence of kind proof.
func pickTimed(e *Endpoint, shared *doneShared, info balancer.PickInfo, why PickReason, now int64, clock Clock, lat *latency, proof ramp.Kind) (balancer.PickResult, error) {
	res, err := e.pickChild(info)
	if err != nil {
		return res, err
	}
	return startProof(e, res, shared, why, now, clock, lat, proof), nil
}

// startTimed counts a call placed on e, res its result, as timed from now.
func startTimed(e *Endpoint, res balancer.PickResult, shared *doneShared, why PickReason, now int64, clock Clock, lat *latency) balancer.PickResult {
	return startProof(e, res, shared, why, now, clock, lat, ramp.None)
}

// startWeightedProof is startProof for a call a WeightedRR placed, which
// counts it in flight but not among the endpoint's picks; its answer's
// latency also goes into the endpoint's baseline. proof may be ramp.None:
// a call timed for the baseline only.
func startWeightedProof(e *Endpoint, res balancer.PickResult, shared *doneShared, now int64, clock Clock, proof ramp.Kind) balancer.PickResult {
	e.inflight.Add(1)
	e.rampProof.Count(proof)
	c := callPool.Get().(*call)
	c.e, c.shared, c.start, c.clock, c.proof, c.weighted = e, shared, now, clock, proof, true
	return withDone(res, c.done)
}

// startProof is startTimed for a call that is also, or, if lat is nil,
// only, evidence for slow start.
func startProof(e *Endpoint, res balancer.PickResult, shared *doneShared, why PickReason, now int64, clock Clock, lat *latency, proof ramp.Kind) balancer.PickResult {
	e.started(why)
	e.rampProof.Count(proof)
	if lat != nil {
		e.rtt.lastTimed.Store(now)
	}
	c := callPool.Get().(*call)
	c.e, c.shared, c.start, c.clock, c.lat, c.proof = e, shared, now, clock, lat, proof
	return withDone(res, c.done)
}

// judge ends e's ramp at a pick if its answers show it warm against its
// peers as of now, which move between its answers; the next Done asks for
// the republish (doneWork.pickProved). It reports whether the ramp is over.
func (d *doneShared) judge(e *Endpoint, now int64) bool {
	p := &e.rampProof
	if p.Proven() {
		return true
	}
	if !p.ProvesWarm(d.peers.Judged(now)) || !p.Prove() {
		return p.Proven()
	}
	d.work.pickProved.Store(true)
	return true
}

// answer records a timed call's outcome, took nanoseconds ending at now,
// as evidence of kind about e: only a success that reached the server is
// an answer. It reports whether the answer proved e warm just now.
func (d *doneShared) answer(e *Endpoint, kind ramp.Kind, info balancer.DoneInfo, took, now int64) bool {
	atServer := reached(info)
	p := &e.rampProof
	switch {
	case kind == ramp.Baseline && (info.Err != nil || !atServer):
		d.peers.Failed(now - took)
		return false
	case kind == ramp.Baseline:
		d.peers.Add(took, now)
		return false
	case !p.Ours(now - took):
		return false // the last ramp's call
	case !atServer:
		p.Settle(false)
		return false
	case info.Err != nil:
		// Sent, and failed, timed out or was given up on: it spoils.
		p.Settle(d.penalty.Load().counts(info.Err) || status.Code(info.Err) == codes.Canceled)
		return false
	}
	return p.Add(took, d.peers.AtLeast(now)) && p.Prove()
}
