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

// This file is latency's pick side: which calls are timed, the reading of
// an endpoint that pickers price (internal/ewma has the math), and the
// pooled Done that times a call and folds its latency into the endpoint's
// average. latency.go holds the average itself and its settings.

// wantsSample reports whether a call placed on e at now should be timed,
// given the picker's least gap between timed calls to one endpoint
// (latency.sampleGap).
func (e *Endpoint) wantsSample(now, gap int64) bool {
	return now-e.rtt.lastTimed.Load() >= gap || e.rtt.bits.Load() == 0
}

// mayWantSample reports whether a pick that placed its call on e, a
// lottery winner or not (lotteryWinner), must read the clock to decide
// whether to time it, given its balancer's recent reading r (see
// recentClock).
func (e *Endpoint) mayWantSample(r *recentClock, gap int64, winner bool) bool {
	return r.dense.Load() == 0 || winner || e.wantsSample(r.at.Load(), gap)
}

// staleAfter is the gap between samples, in decay times, after which a
// sample starts from the decayed average rather than the stored one. Under
// load samples are microseconds apart and the plain moving average applies;
// it is only after a real gap that the two differ.
const staleAfter = 1.0 / 8

// PeakLoad is an endpoint's Peak EWMA load at now: its latency average,
// decayed towards zero by the time since its last sample, times
// (in-flight + 1).
func (e *Endpoint) PeakLoad(now int64, l *latency) float64 {
	load, _ := e.peakLoad(now, l)
	return load
}

// peakLoad is PeakLoad, and whether the endpoint has calls in flight.
func (e *Endpoint) peakLoad(now int64, l *latency) (load float64, busy bool) {
	return e.peakState().Load(now, l.perNano)
}

// peakState is what the endpoint's Peak EWMA load is computed from, read
// from its line at once.
func (e *Endpoint) peakState() ewma.Reading {
	return ewma.Reading{InFlight: e.inFlight(), Avg: math.Float64frombits(e.rtt.bits.Load()), Stamp: e.rtt.stamp.Load()}
}

// PeakEWMA is the load metric of latency-aware policies: an endpoint's
// latency average, decayed by idle time, times (in-flight + 1). A
// LeastLoaded picker given it reads each candidate's average directly,
// compares two candidates without the clock (ewma.Pair), reads the clock
// when the call it places may be due for a sample (recentClock), and times
// it if so, so that its Done feeds the average.
type PeakEWMA struct{ snap *Snapshot }

// NewPeakEWMA returns the Peak EWMA metric over snap's endpoints. snap must
// come from a policy whose Settings set Latency.
func NewPeakEWMA(snap *Snapshot) PeakEWMA { return PeakEWMA{snap: snap} }

// Load reads the clock itself; LeastLoaded instead compares loads
// without it, or reads it once per pick off its common path, and calls
// Endpoint.PeakLoad.
func (m PeakEWMA) Load(r *Ready) float64 {
	return r.Stats.PeakLoad(m.snap.Clock.Nanotime(), m.snap.latency)
}

// LatencyAverage is the endpoint's latency average as last updated (no idle
// decay), and whether it has one.
func (e *Endpoint) LatencyAverage() (time.Duration, bool) {
	avg := math.Float64frombits(e.rtt.bits.Load())
	return time.Duration(avg), avg != 0
}

// observe folds one call's outcome into the latency average. A success is a
// sample of its latency. A server-side failure is evidence about health,
// which the failure counts weigh (FailurePenaltyConfig), and only weak
// evidence about latency: it enters the average only when it was timed,
// as max(its latency, the average), and not before the first success, so
// a slow timeout raises the average and a fast failure never lowers it. It
// used to be priced as a sample twice the average, and one failure then
// lost every comparison against idle peers for seconds: a step, not
// evidence. A call that never reached the server, or ended by a client-side
// error or a caller's cancellation, says nothing and is ignored.
//
// A slower sample is the peak and replaces the average at once, but for a
// lone far one (holdFarPeak), which waits for the next answer: a success
// in time forgives it, a far answer takes it.
func (e *Endpoint) observe(info balancer.DoneInfo, took, now int64, l *latency) {
	if !info.BytesSent && !info.BytesReceived {
		return // never reached the server: no latency to learn from
	}
	sample := float64(took)
	if info.Err != nil {
		if !serverFailed(info, e.shared.penalty.Load()) || took == 0 {
			return
		}
		cur := math.Float64frombits(e.rtt.bits.Load())
		if cur == 0 {
			// Before any answer, a failure would have to set the average
			// from nothing: fast, it would make a black hole look fast;
			// priced high, it would keep an endpoint that failed once from
			// ever being tried again. The failure counts judge it instead.
			return
		}
		sample = math.Max(sample, cur)
	}
	sample = math.Max(sample, 1) // a zero would read as "no sample"
	for {
		old := e.rtt.bits.Load()
		avg := math.Float64frombits(old)
		// Far is judged against the stored average, the last answers',
		// not the decayed one pickers see after a gap: at a few calls a
		// second an endpoint's answers are often more than staleAfter
		// apart, and its usual answer is then far over the decayed one.
		far := sample > farPeak*avg
		idle := float64(max(now-e.rtt.stamp.Load(), 0))
		w := ewma.Decay(idle * l.perNano)
		if idle > l.tau*staleAfter {
			// After a gap the stored average is stale: pickers have watched
			// it decay, and this sample is judged against what they saw.
			// Without this, a backend that recovered would come back from
			// its old peak at the decay rate after it is tried again.
			avg *= w
		}
		held := e.farPeaks.held.Load()
		switch {
		case avg == 0:
			avg = sample
		case far:
			if e.holdFarPeak(sample, now, l) {
				return
			}
			// The second far answer in a row, or far answers come often:
			// the peak, the larger of the two if one was held.
			avg = math.Max(sample, math.Float64frombits(held))
		case sample > avg:
			// The peak: a slower sample replaces the average at once.
			avg = sample
		default:
			avg = avg*w + sample*(1-w)
		}
		if e.rtt.bits.CompareAndSwap(old, math.Float64bits(avg)) {
			// Two Dones racing here may store their stamps in either order;
			// the later stamp wins within microseconds, which only shifts
			// one decay weight slightly.
			e.rtt.stamp.Store(now)
			if held != 0 && (far || info.Err == nil) {
				// This answer decided the held one: it was taken with
				// it if both were far, and a success in time forgives
				// it. A failure in time, whose sample is the average
				// itself, says nothing of the endpoint's speed.
				e.farPeaks.held.CompareAndSwap(held, 0)
			}
			return
		}
	}
}

// farPeak is how many times the average a sample must be to be a far peak
// (holdFarPeak). It is the close-call band's factor (closeBand): an idle
// endpoint priced over three times an idle peer loses every comparison
// with it, so a peak under it, among peers of equal speed, still leaves
// the endpoint a chance, and is taken at once.
const farPeak = 3.0

// holdFarPeak decides what a far peak, sample at now, does: true if it is
// held, leaving the average as it is until the next answer, false if it
// is to be taken as the peak. One late answer from a backend as fast as
// its peers (a collection pause or a descheduled process on either side)
// would otherwise price it at many times their cost for seconds, during
// which an idle endpoint that costs more than closeBand times its peers
// loses every comparison: at a low concurrency, one pause starved a
// healthy backend for most of the decay time. A backend that has turned
// slow answers the next call slowly too, and is then priced at the
// larger of the two answers, one call later than the peak rule alone
// would. A far peak is held only when no far peak came within the decay
// time before it, so that a backend whose slow answers are frequent (a
// slow path taken by some of its calls, or a string of pauses) is priced
// by each, as the peak rule prices it. Racing Dones may each see the
// other's state or not: at worst a far peak is held or taken twice.
func (e *Endpoint) holdFarPeak(sample float64, now int64, l *latency) bool {
	last := e.farPeaks.last.Swap(now)
	if last != 0 && float64(now-last) <= l.tau {
		return false // the second in a row, or too soon after the last
	}
	e.farPeaks.held.Store(math.Float64bits(sample))
	return true
}

// call carries one timed call's start from Pick to Done. Calls are pooled
// and their Done is bound once per pooled object, so timing a call
// allocates nothing.
type call struct {
	e      *Endpoint
	shared *doneShared // e.shared, which the picker has at hand: not read from e's second line
	start  int64
	clock  Clock
	lat    *latency  // nil: the call is not a sample of the latency average
	proof  ramp.Kind // what the answer is evidence of for slow start, if anything
	// weighted says a WeightedRR placed the call: it ends as
	// e.weightedDone, not in the in-flight count.
	weighted bool
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
	// The call ends before the clock is read, not after: reading the clock
	// stalls the pipeline, and the endpoint's line, which a call that took
	// a while no longer finds in cache, is then fetched while it does. The
	// sample is longer by the time that takes, tens of nanoseconds.
	if weighted {
		e.weightedDone(info)
	} else {
		e.settle(info, shared)
	}
	now := clock.Nanotime()
	if lat != nil {
		e.observe(info, now-start, now, lat)
	}
	if proof == ramp.None {
		return
	}
	if shared.answer(e, proof, info, now-start, now) {
		shared.work.provenSoon()
	}
}

// pickTimed is PickEndpoint for a call that is timed, given the endpoint
// and its doneShared: a sample of the latency average if lat is not nil,
// and evidence for slow start of kind proof (ramp.None: none).
func pickTimed(e *Endpoint, shared *doneShared, info balancer.PickInfo, why PickReason, now int64, clock Clock, lat *latency, proof ramp.Kind) (balancer.PickResult, error) {
	res, err := e.pickChild(info)
	if err != nil {
		return res, err
	}
	return startProof(e, res, shared, why, now, clock, lat, proof), nil
}

// startTimed counts a call its child has placed on e, res its result,
// as a timed call that started at now.
func startTimed(e *Endpoint, res balancer.PickResult, shared *doneShared, why PickReason, now int64, clock Clock, lat *latency) balancer.PickResult {
	return startProof(e, res, shared, why, now, clock, lat, ramp.None)
}

// startWeightedProof is startProof for a call a WeightedRR placed, which
// counts no call in flight: its Done is e.weightedDone, then the answer's
// evidence.
func startWeightedProof(e *Endpoint, res balancer.PickResult, shared *doneShared, now int64, clock Clock, proof ramp.Kind) balancer.PickResult {
	e.rampProof.Count(proof)
	c := callPool.Get().(*call)
	c.e, c.shared, c.start, c.clock, c.proof, c.weighted = e, shared, now, clock, proof, true
	return withDone(res, c.done)
}

// startProof is startTimed for a call whose answer may also be evidence
// for slow start (proof), and, if lat is nil, only that.
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

// judge ends e's ramp if its answers so far show it warm against its
// peers as of now, for a pick (ramp.Proof.ProvesWarm): the peers' average
// moves, and their wait grows, between the endpoint's answers, none of
// which may come to end it. The republish is asked for by the next call's
// Done (doneWork.pickProved). It reports whether e's ramp is over.
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

// answer records a timed call's outcome as evidence of kind about e,
// which took took nanoseconds and ended at now: only a success is, as a
// failure is the failure penalty's to weigh, and a call that never
// reached the server (grpc ends a pick whose connection was not ready
// with an empty DoneInfo) is no answer at all; a ramping endpoint's own
// call that reached it and failed, timed out or was cancelled leaves its
// ramp to time. It reports whether the answer proved e warm just now.
func (d *doneShared) answer(e *Endpoint, kind ramp.Kind, info balancer.DoneInfo, took, now int64) bool {
	reached := info.BytesSent || info.BytesReceived
	p := &e.rampProof
	switch {
	case kind == ramp.Baseline && (info.Err != nil || !reached):
		d.peers.Failed(now - took)
		return false
	case kind == ramp.Baseline:
		d.peers.Add(took, now)
		return false
	case !p.Ours(now - took):
		return false // the last ramp's call
	case !reached:
		p.Settle(false)
		return false
	case info.Err != nil:
		// Sent, and failed, timed out or was given up on: the ramp runs
		// by time.
		p.Settle(d.penalty.Load().counts(info.Err) || status.Code(info.Err) == codes.Canceled)
		return false
	}
	return p.Add(took, d.peers.AtLeast(now)) && p.Prove()
}
