package engine

import (
	"slices"

	"google.golang.org/grpc/connectivity"
)

// This file keeps an eager policy's READY endpoints between publishes, so
// that a publish after one endpoint's change costs a copy of that list
// rather than a walk over every endpoint's state. The walk reads each
// endpoint's cold fields, one or two cache misses per endpoint, which at
// 10k endpoints is most of a millisecond; the copy is one sequential move.

// readyList is the balancer's list of READY endpoints that are not
// ejected, and of those that are, in resolver order, as a publish hands
// them to the snapshot. It is updated in place when one endpoint's state
// or picker changes, and dropped (valid false) on anything rarer that
// changes what it holds: a resolver update, an ejection or a readmission,
// an ejected endpoint's change. The next publish then walks the endpoints
// and keeps the result. Slow start's ramps, which depend on the time of
// the publish, are not in it: each publish computes them (rampsLocked).
// Guarded by the balancer's mu.
type readyList struct {
	valid   bool
	ready   []Ready // sorted by Endpoint.pos
	ejected []Ready // never edited in place: rebuilt on any change
	weights readyWeights
}

// invalidate drops the list; the next publish rebuilds it.
func (l *readyList) invalidate() {
	l.valid, l.ready, l.ejected = false, nil, nil
	l.weights.drop()
}

// readyChangedLocked brings the list up to date after e's state or picker
// changed.
func (b *engineBalancer) readyChangedLocked(e *Endpoint) {
	l := &b.readyList
	if !l.valid {
		return
	}
	if e.ejection.ejected {
		// Rare: the ejected list is rebuilt rather than edited.
		l.invalidate()
		return
	}
	i, found := slices.BinarySearchFunc(l.ready, e.pos, func(r Ready, pos int) int { return r.Stats.pos - pos })
	switch want := e.state == connectivity.Ready; {
	case want && found:
		l.ready[i].Picker = e.picker
	case want:
		l.ready = slices.Insert(l.ready, i, Ready{Picker: e.picker, Stats: e, InvWeight: 1 / e.weight})
		if l.weights.valid {
			l.weights.insert(i, e)
		}
	case found:
		l.ready = slices.Delete(l.ready, i, i+1)
		if l.weights.valid {
			l.weights.remove(i)
		}
	}
}

// readyEndpointsLocked is the READY endpoints that are not ejected and
// those that are, in resolver order, as of now, each a slice of its own
// that the caller may keep.
func (b *engineBalancer) readyEndpointsLocked() (ready, ejected []Ready) {
	l := &b.readyList
	if l.valid {
		return slices.Clone(l.ready), slices.Clone(l.ejected)
	}
	ready, ejected = b.scanReadyLocked()
	// Copies: a snapshot's slices are its own.
	l.valid, l.ready, l.ejected = true, slices.Clone(ready), slices.Clone(ejected)
	return ready, ejected
}

// scanReadyLocked is readyEndpointsLocked computed from every endpoint's
// state.
func (b *engineBalancer) scanReadyLocked() (ready, ejected []Ready) {
	// Resolver order keeps seeded runs reproducible without sorting on
	// every update.
	ready = make([]Ready, 0, len(b.order))
	for _, e := range b.order {
		if e.state != connectivity.Ready {
			continue
		}
		r := Ready{Picker: e.picker, Stats: e, InvWeight: 1 / e.weight}
		if e.ejection.ejected {
			ejected = append(ejected, r)
			continue
		}
		ready = append(ready, r)
	}
	return ready, ejected
}

// rampsLocked is the slow-start ramps of ready as of now, nil if none is
// ramping, and the earliest end of one, 0 if none.
func (b *engineBalancer) rampsLocked(ready []Ready, now int64) (ramps []rampSpan, earliest int64) {
	if b.ramp == nil {
		return nil, 0
	}
	for i := range ready {
		e := ready[i].Stats
		end := b.rampEndLocked(e, now)
		if end == 0 {
			continue
		}
		if ramps == nil {
			ramps = make([]rampSpan, len(ready))
		}
		ramps[i] = rampSpan{start: e.rampStart, end: end}
		if earliest == 0 || end < earliest {
			earliest = end
		}
	}
	return ramps, earliest
}
