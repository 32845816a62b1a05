package engine

import (
	"cmp"
	"math"
	"slices"
	"time"

	"github.com/pickwise/pickwise/internal/evidence"
	"google.golang.org/grpc/connectivity"
)

// This file is ejection's balancer side: the health tick that decays and
// assesses every endpoint's evidence, the ejection decision and its cap,
// and readmission. What picks and Dones do about ejection is probe.go and
// ejector.go.

// healthTick decays every endpoint's counts and assesses them. It
// reschedules itself while any endpoint has failures or is ejected.
func (b *engineBalancer) healthTick() {
	b.mu.Lock()
	defer b.mu.Unlock()
	p := b.shared.penalty.Load()
	if b.closed || p == nil {
		return
	}
	if b.assessLocked(p.decay) {
		b.shared.work.startHealth(p.tick)
	}
}

// assessNow assesses every endpoint without decay, at the request of a
// Done whose failure completed the evidence ejection needs: waiting for the
// next tick would let a black hole draw calls for up to maxHealthTick.
func (b *engineBalancer) assessNow() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed || b.shared.penalty.Load() == nil {
		return
	}
	b.assessLocked(1)
}

// assessLocked multiplies every endpoint's counts by decay, refreshes the
// fleet's failure rate, and ejects and readmits. It reports whether any
// endpoint has failures or is ejected.
func (b *engineBalancer) assessLocked(decay float32) bool {
	now := b.clock.Nanotime()
	var sumF, sumT float64
	pending, failing := false, false
	p := b.shared.penalty.Load()
	// Cleared before the walk: a failure counted during it either is
	// seen by it or sets the flag again after this store.
	b.shared.failing.Store(false)
	for _, e := range b.order {
		o := e.decayOutcomes(decay).Counted(p.full)
		if o.Failures > 0 {
			pending, failing = true, true
		}
		// An ejected endpoint is out of the fleet whose rate the others
		// are judged against: one black hole must not make failures look
		// normal.
		if e.state == connectivity.Ready && !e.ejection.ejected {
			sumF += float64(o.Failures)
			sumT += float64(o.Total)
		}
	}
	fleet := 0.0
	if sumT > 0 {
		fleet = sumF / sumT
	}
	b.shared.fleetBits.Store(math.Float64bits(fleet))
	if failing {
		b.shared.failing.Store(true)
	}
	changed, ejected := b.ejectLocked(sumF, sumT, now)
	if changed {
		b.publishLocked(now)
	}
	return pending || ejected > 0
}

// ejectLocked readmits the endpoints whose probation is over and ejects
// the worst outliers the cap allows; sumF and sumT are the fleet's counts.
// It reports whether any endpoint changed, and how many are out.
func (b *engineBalancer) ejectLocked(sumF, sumT float64, now int64) (changed bool, out int) {
	ej := b.shared.ejector.Load()
	ready, readyOut := 0, 0 // READY endpoints, and of them the ejected
	type candidate struct {
		e      *Endpoint
		excess float64
	}
	var cands []candidate
	for _, e := range b.order {
		if e.ejection.ejected {
			if ej == nil || (now >= e.ejection.until && e.probe.okRun.Load() >= ej.probeSuccesses) {
				b.readmitLocked(e, now)
				changed = true
			} else {
				// Counted whether READY or not: the health timer runs
				// while any endpoint is out, so that it is readmitted
				// once its time is over, whenever its probes succeeded.
				out++
			}
		}
		if e.state != connectivity.Ready {
			continue
		}
		ready++
		if e.ejection.ejected {
			readyOut++
			continue
		}
		if ej == nil {
			continue
		}
		if o := e.outcomes(); float64(o.Failures) >= ej.minFailures {
			if x, ok := outlier(o, sumF, sumT, ej.threshold); ok {
				cands = append(cands, candidate{e, x})
			}
		}
	}
	if len(cands) == 0 {
		return changed, out
	}
	allowed := min(max(1, ready*ej.percent/100), ready-1)
	if readyOut >= allowed {
		return changed, out
	}
	// The worst first, when the cap leaves room for only some.
	slices.SortFunc(cands, func(x, y candidate) int { return cmp.Compare(y.excess, x.excess) })
	for _, c := range cands {
		if readyOut >= allowed {
			break
		}
		b.ejectEndpointLocked(c.e, ej, now)
		readyOut++
		out++
		changed = true
	}
	return changed, out
}

// minOutlierZ is how many standard deviations an endpoint's failures must
// stand above what the rest of the fleet's rate predicts for as many
// outcomes: with ten outcomes at a fleet rate of one half, chance alone
// gives five failures give or take 1.6, so only all ten stand out;
// against a healthy fleet five failures in five calls are far beyond it.
const minOutlierZ = 3

// outlier reports whether counts o stand out from the rest of the fleet
// (sumF and sumT include o): its excess rate over the others' reaches
// threshold, and its failures are beyond what chance gives at their rate.
// It returns the excess.
func outlier(o evidence.Counts, sumF, sumT, threshold float64) (float64, bool) {
	f, t := float64(o.Failures), float64(o.Total)
	rest := 0.0
	if sumT-t > 0 {
		rest = math.Max(0, (sumF-f)/(sumT-t))
	}
	x := evidence.Excess(o, rest)
	if x < threshold {
		return x, false
	}
	if z, finite := evidence.ZScore(o, rest); finite && z < minOutlierZ {
		return x, false
	}
	return x, true
}

// ejectEndpointLocked takes e out of placement.
func (b *engineBalancer) ejectEndpointLocked(e *Endpoint, ej *ejector, now int64) {
	s := &e.ejection
	if s.lastEnd != 0 {
		s.streak = max(0, s.streak-int((now-s.lastEnd)/(forgiveAfter*ej.base)))
	}
	s.streak++
	d := ej.base * int64(s.streak)
	if d <= 0 || d > ej.max || s.streak > int(ej.max/ej.base) {
		d = ej.max
	}
	s.ejected, s.until = true, now+d
	b.readyList.invalidate()
	b.memberChangedLocked(e)
	e.probe.okRun.Store(0)
	e.probe.every.Store(ej.probeEvery)
	e.probe.next.Store(now + ej.probeEvery)
	b.ejections++
	logger.Infof("%s: ejected %s for %v (failure rate %.2f)", b.name, e.addr, time.Duration(d), e.FailureRatio())
}

// forgiveAfter is, in BaseEjectionTimes, how long an endpoint must stay in
// for its ejection count to shrink by one. grpc's outlier detection
// forgives one per interval, 10 s by default; ten of pickwise's 1 s
// default base make the same 10 s.
const forgiveAfter = 10

// readmitLocked puts e back into placement with fresh counts: its
// probation is that the next failures are judged on new evidence alone,
// and a re-ejection soon after lasts longer.
func (b *engineBalancer) readmitLocked(e *Endpoint, now int64) {
	e.ejection.ejected = false
	e.ejection.lastEnd = now
	b.readyList.invalidate()
	b.memberChangedLocked(e)
	e.outcomeBits.Store(0)
	// Its latency average, if any, is from before it failed: it starts
	// over as a newcomer, tried at once and one call at a time until it
	// answers.
	e.rtt.bits.Store(0)
	b.readmissions++
}

// readmitFromProbe is the Done side's request to readmit e, whose last
// probes succeeded: at once if its ejection time is over, else at the
// first health tick after it.
func (b *engineBalancer) readmitFromProbe(e *Endpoint) {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.clock.Nanotime()
	if b.closed || !e.ejection.ejected {
		return
	}
	if now < e.ejection.until {
		// The health timer readmits it once its time is over; make sure
		// one is running.
		if p := b.shared.penalty.Load(); p != nil {
			b.shared.work.startHealth(p.tick)
		}
		return
	}
	b.readmitLocked(e, now)
	b.publishLocked(now)
}
