package engine

import (
	"google.golang.org/grpc/balancer"
)

// This file is ejection's pick side: the probe picks that let an ejected
// endpoint show it has recovered, and their Done. The state they use is in
// ejector.go; the balancer's side (assessing, ejecting, readmitting) is
// ejection.go.

// tryProbe reports whether a call at now may probe e, and if so claims the
// probe.
func (e *Endpoint) tryProbe(now, base int64) bool {
	next := e.probe.next.Load()
	if now < next || e.probe.inFlight.Load() {
		return false
	}
	every := e.probe.every.Load()
	if every == 0 {
		every = base
	}
	if !e.probe.next.CompareAndSwap(next, now+every) {
		return false
	}
	e.probe.inFlight.Store(true)
	return true
}

// finishProbe is the Done of a probe call.
func (e *Endpoint) finishProbe(info balancer.DoneInfo) {
	failed := e.settle(info, e.shared)
	e.probe.inFlight.Store(false)
	ej := e.shared.ejector.Load()
	if ej == nil {
		return
	}
	switch {
	case failed:
		e.probe.okRun.Store(0)
		every := min(2*max(e.probe.every.Load(), ej.probeEvery), maxProbeBackoff*ej.probeEvery)
		e.probe.every.Store(every)
		// The next probe waits for the stretched interval, not the one
		// set when this probe was claimed.
		if next := e.shared.clock.Nanotime() + every; next > e.probe.next.Load() {
			e.probe.next.Store(next)
		}
	case info.Err != nil || !info.BytesReceived:
		// A client-side outcome says nothing either way, and neither does
		// an attempt that never got an answer (grpc ends a pick whose
		// connection was not ready with an empty DoneInfo, and picks
		// again).
	default:
		// A success: the next probe follows a quarter interval later, and
		// the interval is back to its base, so a healed endpoint's run of
		// successes takes a fraction of a second, not the backoff.
		e.probe.every.Store(ej.probeEvery)
		e.probe.next.Store(min(e.probe.next.Load(), e.shared.clock.Nanotime()+ej.probeEvery/4))
		if e.probe.okRun.Add(1) == ej.probeSuccesses {
			e.shared.work.readmit(e)
		}
	}
}

// Probe places the call on an ejected endpoint whose probe is due, and
// reports whether it did. Pickers over Snapshot.Endpoints call it before
// they choose; it costs one length check while nothing is ejected. A retry (a, the
// call's attempt record, has an earlier attempt) never probes.
//
// gate is spare randomness of the pick, or any value that changes from
// pick to pick (a schedule position): only a pick whose gate is a multiple
// of probeGate looks for a due probe, so that while an endpoint is out a
// pick reads the clock for it once in probeGate picks, not every time. 0
// always looks.
func (s *Snapshot) Probe(info balancer.PickInfo, a *Attempts, gate uint32) (balancer.PickResult, error, bool) {
	if len(s.Ejected) == 0 || gate%probeGate != 0 || s.ejector == nil || (a != nil && a.earlier()) {
		return balancer.PickResult{}, nil, false
	}
	i := 0
	if len(s.Ejected) > 1 {
		i = int(gate/probeGate) % len(s.Ejected)
	}
	r := &s.Ejected[i]
	if !r.Stats.tryProbe(s.Clock.Nanotime(), s.ejector.probeEvery) {
		return balancer.PickResult{}, nil, false
	}
	res, err := PickProbe(r, info)
	res, err = a.Record(r.Stats, res, err)
	return res, err, err == nil
}

// probeGate is how many picks share one look at the clock for a due
// probe: at 500 calls a second, a look every 32 ms, against probe
// intervals of hundreds of milliseconds.
const probeGate = 16

// ProbeDue reports whether a call with attempt record a (nil: none) may
// probe e, an ejected endpoint, now, and claims the probe if so: for
// pickers that meet ejected endpoints on their own way (a hash table's
// walk). A claimed probe must be placed with PickProbe.
func (s *Snapshot) ProbeDue(e *Endpoint, a *Attempts) bool {
	return s.ejector != nil && (a == nil || !a.earlier()) && e.tryProbe(s.Clock.Nanotime(), s.ejector.probeEvery)
}

// PickProbe places a claimed probe on r.
func PickProbe(r *Ready, info balancer.PickInfo) (balancer.PickResult, error) {
	res, err := r.Stats.pickChild(info)
	if err != nil {
		r.Stats.probe.inFlight.Store(false)
		return res, err
	}
	r.Stats.inflight.Add(1)
	r.Stats.shared.probes.Add(1)
	return withDone(res, r.Stats.finishProbe), nil
}
