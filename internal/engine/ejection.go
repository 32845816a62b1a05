package engine

import (
	"cmp"
	"math"
	"slices"
	"time"

	"github.com/pickwise/pickwise/internal/evidence"
	"google.golang.org/grpc/connectivity"
)

// ejection takes the endpoints whose failures stand out of the fleet's
// out of placement for a while, and readmits them on probation. It owns
// the health tick that decays and assesses every endpoint's evidence.
// What picks and Dones do about it is in probe.go and ejector.go;
// docs/design/failure-evidence.md has the why.
//
// Guarded by the balancer's mu.
type ejection struct {
	name   string
	clock  Clock
	shared *doneShared
	locked runLocked
	order  *[]*Endpoint // the balancer's endpoints, in resolver order
	// changed is told of each endpoint ejected or readmitted, and publish
	// publishes the pickers that follow.
	changed func(*Endpoint)
	publish func(now int64)
	// Since the last flush to the metrics (counts).
	ejections, readmissions uint64
}

// healthTick decays every endpoint's counts and assesses them. It
// reschedules itself while any endpoint has failures or is ejected.
func (ej *ejection) healthTick() {
	ej.locked(func() {
		p := ej.shared.penalty.Load()
		if p != nil && ej.assess(p.decay, ej.clock.Nanotime()) {
			ej.shared.work.startHealth(p.tick)
		}
	})
}

// assessNow assesses every endpoint without decay, at the request of a
// Done whose failure completed the evidence ejection needs: waiting for the
// next tick would let a black hole draw calls for up to maxHealthTick.
func (ej *ejection) assessNow() {
	ej.locked(func() {
		if ej.shared.penalty.Load() != nil {
			ej.assess(1, ej.clock.Nanotime())
		}
	})
}

// assess multiplies every endpoint's counts by decay, refreshes the
// fleet's failure rate, and ejects and readmits. It reports whether any
// endpoint has failures or is ejected.
func (ej *ejection) assess(decay float32, now int64) bool {
	var sumF, sumT float64
	pending, failing := false, false
	p := ej.shared.penalty.Load()
	// Cleared before the walk: a failure counted during it either is
	// seen by it or sets the flag again after this store.
	ej.shared.failing.Store(false)
	for _, e := range *ej.order {
		o := e.decayOutcomes(decay).Counted(p.full)
		if o.Failures > 0 {
			pending, failing = true, true
		}
		if e.state == connectivity.Ready && !e.ejection.ejected {
			// An ejected endpoint is out of the fleet whose rate the
			// others are judged against: one black hole must not make
			// failures look normal.
			sumF += float64(o.Failures)
			sumT += float64(o.Total)
		}
	}
	fleet := 0.0
	if sumT > 0 {
		fleet = sumF / sumT
	}
	ej.shared.fleetBits.Store(math.Float64bits(fleet))
	if failing {
		ej.shared.failing.Store(true)
	}
	changed, out := ej.decide(sumF, sumT, now)
	if changed {
		ej.publish(now)
	}
	return pending || out > 0
}

// decide readmits the endpoints whose probation is over and ejects the
// worst outliers the cap allows; sumF and sumT are the fleet's counts.
// It reports whether any endpoint changed, and how many are out.
func (ej *ejection) decide(sumF, sumT float64, now int64) (changed bool, out int) {
	cfg := ej.shared.ejector.Load()
	ready, readyOut := 0, 0 // READY endpoints, and of them the ejected
	type candidate struct {
		e      *Endpoint
		excess float64
	}
	var cands []candidate
	for _, e := range *ej.order {
		if e.ejection.ejected {
			if cfg == nil || (now >= e.ejection.until && e.probe.okRun.Load() >= cfg.probeSuccesses) {
				ej.readmit(e, now)
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
		if cfg == nil {
			continue
		}
		if o := e.outcomes(); float64(o.Failures) >= cfg.minFailures {
			if v, ok := outlier(o, sumF, sumT, cfg.threshold); ok {
				cands = append(cands, candidate{e, v})
			}
		}
	}
	if len(cands) == 0 {
		return changed, out
	}
	allowed := min(max(1, ready*cfg.percent/100), ready-1)
	if readyOut >= allowed {
		return changed, out
	}
	// The worst first, when the cap leaves room for only some.
	slices.SortFunc(cands, func(a, b candidate) int { return cmp.Compare(b.excess, a.excess) })
	for _, c := range cands {
		if readyOut >= allowed {
			break
		}
		ej.eject(c.e, cfg, now)
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

// eject takes e out of placement.
func (ej *ejection) eject(e *Endpoint, cfg *ejector, now int64) {
	s := &e.ejection
	if s.lastEnd != 0 {
		s.streak = max(0, s.streak-int((now-s.lastEnd)/(forgiveAfter*cfg.base)))
	}
	s.streak++
	d := cfg.base * int64(s.streak)
	if d <= 0 || d > cfg.max || s.streak > int(cfg.max/cfg.base) {
		d = cfg.max
	}
	s.ejected, s.since, s.until = true, now, now+d
	ej.changed(e)
	e.probe.okRun.Store(0)
	e.probe.every.Store(cfg.probeEvery)
	e.probe.next.Store(now + cfg.probeEvery)
	ej.ejections++
	o := e.outcomes()
	logger.Infof("%s: ejected %s for %v: %.1f failures in %.1f recent outcomes (rate %.2f), the fleet's rate %.2f; ejection %d in a row",
		ej.name, e.addr, time.Duration(d), o.Failures, o.Total, e.FailureRatio(), ej.shared.fleetRate(), s.streak)
}

// forgiveAfter is, in BaseEjectionTimes, how long an endpoint must stay in
// for its ejection count to shrink by one. grpc's outlier detection
// forgives one per interval, 10 s by default; ten of pickwise's 1 s
// default base make the same 10 s.
const forgiveAfter = 10

// readmit puts e back into placement with fresh counts: its probation is
// that the next failures are judged on new evidence alone, and a
// re-ejection soon after lasts longer.
func (ej *ejection) readmit(e *Endpoint, now int64) {
	logger.Infof("%s: readmitted %s after %v out and %d successful probes in a row",
		ej.name, e.addr, time.Duration(now-e.ejection.since).Round(time.Millisecond), e.probe.okRun.Load())
	e.ejection.ejected = false
	e.ejection.lastEnd = now
	ej.changed(e)
	e.outcomeBits.Store(0)
	// Its latency average, if any, is from before it failed: it starts
	// over as a newcomer, tried at once and one call at a time until it
	// answers.
	e.rtt.bits.Store(0)
	ej.readmissions++
}

// readmitFromProbe is the Done side's request to readmit e, whose last
// probes succeeded: at once if its ejection time is over, else at the
// first health tick after it.
func (ej *ejection) readmitFromProbe(e *Endpoint) {
	ej.locked(func() {
		now := ej.clock.Nanotime()
		if !e.ejection.ejected {
			return
		}
		if now < e.ejection.until {
			// The health timer readmits it once its time is over; make
			// sure one is running.
			if p := ej.shared.penalty.Load(); p != nil {
				ej.shared.work.startHealth(p.tick)
			}
			return
		}
		ej.readmit(e, now)
		ej.publish(now)
	})
}

// penaltyOff forgets the failures of es, seen while the penalty was on,
// so that turning it on again does not resurrect them, and clears their
// ejections (no readmission is counted). The caller rebuilds the lists.
func (ej *ejection) penaltyOff(es []*Endpoint) {
	for _, e := range es {
		e.outcomeBits.Store(0)
		e.ejection.ejected = false
	}
}

// rejoined settles the ejection of e, back from parking: its ejection
// ends if ejection is now off, and the ticks that decay its failures and
// judge it may have stopped while it was out, and the pickers read
// failures only while some endpoint is known to have them.
func (ej *ejection) rejoined(e *Endpoint, now int64) {
	pen := ej.shared.penalty.Load()
	if pen == nil {
		// Nothing to judge: a config that turned the penalty off forgot
		// the parked endpoints' failures with the others' (penaltyOff).
		return
	}
	if e.ejection.ejected && ej.shared.ejector.Load() == nil {
		ej.readmit(e, now)
	}
	if e.ejection.ejected || e.outcomes().Failures > 0 {
		ej.shared.failing.Store(true)
		ej.shared.work.startHealth(pen.tick)
	}
}

// counts takes the ejections and readmissions since it was last called.
func (ej *ejection) counts() (ejections, readmissions uint64) {
	ejections, readmissions = ej.ejections, ej.readmissions
	ej.ejections, ej.readmissions = 0, 0
	return ejections, readmissions
}
