package engine

import (
	"slices"
	"time"

	"github.com/pickwise/pickwise/internal/median"
	"github.com/pickwise/pickwise/orcaweight"
	"google.golang.org/grpc/connectivity"
	grpcorca "google.golang.org/grpc/orca"
)

// weightKeeper owns everything about backend-reported weights: the Group
// every tracker follows, one tracker per endpoint (endpointWeight), the
// OOB streams and the update timer. The balancer tells it which endpoints
// and connections exist and when the update timer fires; a picker being
// published reads the weights it last made, and at most fills its own
// buffers or grows the run of ones (forPicker): it changes no endpoint's
// weight or tracker. Guarded by the balancer's mu, except what
// the orcaweight package synchronizes itself.
type weightKeeper struct {
	cfg   WeightsConfig
	group *orcaweight.Group
	timer Timer
	bad   uint64 // group.BadReports() at the last update, for the metric's delta
	// usable is the buffer update fills for the metrics, reused so that an
	// update of a large fleet does not allocate one each time.
	usable []float64
	// scratch, filled and medianScratch are forPicker's buffers, reused
	// the same way: scratch for the weights of a list that is not the
	// balancer's READY list, filled for weights with the median applied,
	// medianScratch for selecting the median.
	scratch       readyWeights
	filled        []float64
	medianScratch []float64
	// ones are the weights of pickers in round-robin fallback (onesFor),
	// shared by all of them.
	ones []float64
	// expect sets the endpoints' expected calls in flight at every update.
	expect expectation
}

// newWeightKeeper starts keeping weights for every endpoint in all.
func newWeightKeeper(cfg WeightsConfig, all []*Endpoint) *weightKeeper {
	k := &weightKeeper{cfg: cfg, group: orcaweight.NewGroup(cfg.ORCA)}
	for _, e := range all {
		k.add(e)
	}
	return k
}

// add gives e a fresh tracker, and its stream if the config asks for one.
func (k *weightKeeper) add(e *Endpoint) {
	w := &e.weights
	t := k.group.NewTracker()
	w.tracker = t
	e.reports.Store(0) // a fresh tracker's period records its first reports in full
	e.resetBase()
	e.expectedWord().Store(0)
	k.routeReports(e)
	w.weight, w.status = 0, orcaweight.NoReports
	k.restartOOB(e)
}

// routeReports points e's per-call reports at its tracker, or nowhere
// when the config reads reports out of band.
func (k *weightKeeper) routeReports(e *Endpoint) {
	if k.cfg.OutOfBand {
		e.reportTo.Store(nil)
		return
	}
	e.reportTo.Store(e.weights.tracker)
}

// reconfigure applies a changed config to every endpoint in all. It
// reports whether the update period changed, so that the caller rearms the
// timer.
func (k *weightKeeper) reconfigure(cfg WeightsConfig, all []*Endpoint) (periodChanged bool) {
	old := k.cfg
	k.cfg = cfg
	k.group.SetConfig(cfg.ORCA)
	if old.OutOfBand != cfg.OutOfBand || old.OOBPeriod != cfg.OOBPeriod {
		for _, e := range all {
			if e.weights.tracker == nil {
				// Back from parking with none: reportedWeights.rejoined adds it.
				continue
			}
			k.routeReports(e)
			k.restartOOB(e)
		}
	}
	return old.UpdatePeriod != cfg.UpdatePeriod
}

// connectionReady follows e's new READY connection. A new connection means
// a new backend process, or at least a new view of it: its weight starts
// over, blackout included.
func (k *weightKeeper) connectionReady(e *Endpoint) {
	e.weights.tracker.Reset()
	e.reports.Store(0)
	e.resetBase()
	e.expectedWord().Store(0)
	k.restartOOB(e)
}

// restartOOB (re)opens e's ORCA stream if the config asks for one and e
// has a READY connection.
func (k *weightKeeper) restartOOB(e *Endpoint) {
	e.weights.closeOOB()
	if !k.cfg.OutOfBand || e.weights.sc == nil {
		return
	}
	e.weights.stopOOB = grpcorca.RegisterOOBListener(e.weights.sc, e.weights.tracker, grpcorca.OOBListenerOptions{
		ReportInterval: k.cfg.OOBPeriod,
	})
}

// stop stops the update timer and the streams of every endpoint in all,
// and forgets their trackers.
func (k *weightKeeper) stop(all []*Endpoint) {
	if k.timer != nil {
		k.timer.Stop()
		k.timer = nil
	}
	for _, e := range all {
		e.weights.closeOOB()
		e.weights.tracker = nil
		e.reportTo.Store(nil)
	}
}

// weightUpdate is what one update found, for the metrics.
type weightUpdate struct {
	notYet, stale int64     // READY endpoints without a usable weight, by reason
	bad           int64     // reports rejected since the previous update
	usable        []float64 // the usable weights, when asked for; valid until the next update
}

// update folds the reports received since the last update into the
// weight of every READY endpoint in order. collect asks for the usable
// weights, which only the metrics need.
func (k *weightKeeper) update(now time.Time, order []*Endpoint, collect bool) weightUpdate {
	u := weightUpdate{usable: k.usable[:0]}
	k.expect.start()
	for _, e := range order {
		if e.state != connectivity.Ready {
			continue
		}
		w := &e.weights
		w.weight, w.status = w.tracker.Update(now)
		e.reports.Store(0)
		k.expect.add(e)
		switch w.status {
		case orcaweight.NoReports, orcaweight.Blackout:
			u.notYet++
		case orcaweight.Stale:
			u.stale++
		case orcaweight.Usable:
			if collect {
				u.usable = append(u.usable, w.weight)
			}
		}
	}
	k.expect.finish(order, k.cfg.UpdatePeriod)
	bad := k.group.BadReports()
	u.bad, k.bad = int64(bad-k.bad), bad
	k.usable = u.usable
	return u
}

// forPicker returns the weights of the READY endpoints in ready, with the
// median standing in for those without a usable weight and no weight
// above orcaweight.MaxMedianMultiple times that median (so that one
// absurd report cannot take nearly every call), and whether fewer than
// two have one (round-robin fallback). kept, when not nil, is the
// list's copy of what ready's endpoints hold (readyWeights), read from
// them first if it is not valid; nil when ready is not the list's.
//
// The median is selected by the first picker that needs one after the
// list was last read from the endpoints (at every weight update, and
// whenever the list is dropped: a resolver update, an ejection, a change
// of config), and held while endpoints join and leave the list, until
// usable weights amounting to an eighth of them have come or gone
// (readyWeights.medianHeld): the weights themselves are as of the last
// update, and selecting the median again over 10k endpoints for every
// picker was an eighth of what a connectivity change cost.
//
// The weights are read by the policy's NewPicker only, and not kept
// (Snapshot.Weights): in fallback they are a shared run of ones, when the
// median changes none of them the kept array itself, and otherwise a
// buffer of the keeper's, filled afresh for every picker. Over 10k
// endpoints, a new array for every picker (or a copy of the kept one at
// its next edit) was a fifth of what a connectivity change allocated, and
// of the collections that followed.
func (k *weightKeeper) forPicker(ready []Ready, kept *readyWeights) (ws []float64, fallback bool) {
	if kept == nil {
		kept = &k.scratch
		defer kept.drop()
		kept.valid = false
	}
	if !kept.valid {
		kept.fill(ready)
	}
	nUsable, unchanged := median.Scan(kept.ws, kept.usable)
	switch {
	case nUsable < 2:
		return k.onesFor(len(kept.ws)), true
	case unchanged:
		// Clipped, as the ones are: a snapshot has no room past its
		// weights to write into.
		return slices.Clip(kept.ws), false
	}
	if !kept.medianHeld(nUsable) {
		kept.median = median.Of(kept.ws, kept.usable, &k.medianScratch, nUsable)
		kept.medianSelected, kept.usableEdits = true, 0
	}
	k.filled = append(k.filled[:0], kept.ws...)
	median.With(k.filled, kept.usable, kept.median)
	return slices.Clip(k.filled), false
}

// onesFor returns n weights of 1, which no one writes: the weights of
// every picker in round-robin fallback.
func (k *weightKeeper) onesFor(n int) []float64 {
	if len(k.ones) < n {
		k.ones = make([]float64, n+n/4)
		for i := range k.ones {
			k.ones[i] = 1
		}
	}
	return k.ones[:n:n]
}

// readyWeights is, for a policy that keeps weights, what a picker needs of
// each endpoint of readyList.ready beside its Ready, aligned with it: the
// weight as of the last weight update and whether it was usable. It lives
// here for the reason the list does: read from the endpoints, it is two
// dependent cache misses each. It is edited with the list and dropped
// (valid false) when the list is, on every weight update and on a change
// of weight config; the next publish reads it afresh
// (weightKeeper.forPicker).
type readyWeights struct {
	valid  bool
	ws     []float64
	usable []bool
	// median is that of the usable weights, selected by the first picker
	// after the fill that needs one (medianSelected) and kept through the
	// edits while few usable weights come and go (medianHeld); usableEdits
	// counts those since it was selected.
	median         float64
	medianSelected bool
	usableEdits    int
}

// fill reads the weights of ready from its endpoints into w, reusing w's
// buffers, and marks w valid. Each buffer grows on its own: insert grows
// them one element at a time, and append's growth differs by element size,
// so their capacities drift apart.
func (w *readyWeights) fill(ready []Ready) {
	n := len(ready)
	w.ws = slices.Grow(w.ws[:0], n)[:n]
	w.usable = slices.Grow(w.usable[:0], n)[:n]
	for i := range ready {
		ew := &ready[i].Stats.weights
		w.ws[i], w.usable[i] = ew.weight, ew.status == orcaweight.Usable
	}
	w.valid, w.medianSelected = true, false
}

// insert adds e's weights at index i, as the list adds e.
func (w *readyWeights) insert(i int, e *Endpoint) {
	usable := e.weights.status == orcaweight.Usable
	w.ws = slices.Insert(w.ws, i, e.weights.weight)
	w.usable = slices.Insert(w.usable, i, usable)
	if usable {
		w.usableEdits++
	}
}

// remove drops the weights at index i, as the list drops its endpoint.
func (w *readyWeights) remove(i int) {
	if w.usable[i] {
		w.usableEdits++
	}
	w.ws = slices.Delete(w.ws, i, i+1)
	w.usable = slices.Delete(w.usable, i, i+1)
}

// medianHeld reports whether the median selected since the fill still
// stands for the nUsable usable weights now kept: each usable weight added
// or removed since moves the true median by at most one rank, and past
// an eighth of them it is selected again, so that a fleet that lost or
// gained many weighted endpoints within one update period is not filled
// and bounded by the median of weights it no longer has.
func (w *readyWeights) medianHeld(nUsable int) bool {
	return w.medianSelected && w.usableEdits*medianEditShare <= nUsable
}

// medianEditShare: the median is selected again once more than
// 1/medianEditShare of the usable weights were added or removed since.
const medianEditShare = 8

// drop marks w stale, keeping its buffers for the next fill.
func (w *readyWeights) drop() { w.valid = false }
