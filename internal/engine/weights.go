package engine

import (
	"time"

	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/connectivity"
)

// reportedWeights owns backend-reported weights on the balancer's side:
// turning them on and off, the update timer, and following connections
// for the out-of-band streams. weightkeeper.go keeps the weights.
//
// Guarded by the balancer's mu.
type reportedWeights struct {
	keeper  *weightKeeper // nil unless the policy asks for Settings.Weights
	clock   Clock
	locked  runLocked
	order   *[]*Endpoint // the balancer's endpoints, in resolver order
	rec     *recorder
	publish func(now int64)
	// weightsChanged tells the publisher that the weights it keeps are
	// the last update's.
	weightsChanged func()
}

// configure applies a policy's WeightsConfig (nil turns weight keeping
// off) and (re)starts the update timer; parked lists the parked
// endpoints.
func (w *reportedWeights) configure(cfg *WeightsConfig, parked func() []*Endpoint) {
	// A resolver update has dropped the list already; a change of config
	// alone may start or stop the keeper, which starts every endpoint's
	// weight over (weightKeeper.add).
	w.weightsChanged()
	switch {
	case cfg == nil:
		if w.keeper != nil {
			// The parked endpoints' trackers too: one that returns
			// gets a fresh one from the next keeper (rejoined).
			w.keeper.stop(append(parked(), *w.order...))
			w.keeper = nil
		}
	case w.keeper == nil:
		w.keeper = newWeightKeeper(*cfg, *w.order)
		w.schedule()
	default:
		if w.keeper.reconfigure(*cfg, *w.order) {
			w.schedule()
		}
	}
}

// schedule arms the keeper's update timer.
func (w *reportedWeights) schedule() {
	k := w.keeper
	if k.timer != nil {
		k.timer.Stop()
	}
	k.timer = w.clock.AfterFunc(k.cfg.UpdatePeriod, func() {
		w.locked(func() {
			if w.keeper != k {
				return
			}
			now := w.clock.Nanotime()
			w.rec.weights(k.update(time.Unix(0, now), *w.order, w.rec.weightMetrics() != nil))
			w.weightsChanged()
			w.publish(now)
			w.schedule()
		})
	})
}

// add gives e, a newcomer, a weight tracker.
func (w *reportedWeights) add(e *Endpoint) {
	if w.keeper != nil {
		w.keeper.add(e)
	}
}

// rejoined settles the weight of e, back from parking, once the update's
// config is applied: its tracker, where its reports go, and its ORCA
// stream, closed at its removal unless the config has opened it again.
func (w *reportedWeights) rejoined(e *Endpoint) {
	k := w.keeper
	if k == nil {
		return
	}
	switch {
	case e.weights.tracker == nil:
		k.add(e)
	default:
		k.routeReports(e)
		if e.weights.stopOOB == nil {
			k.restartOOB(e)
		}
	}
}

// connection starts e's ORCA stream on the first of its connections to
// turn READY (the one pickfirst uses) and stops it when that connection
// leaves READY. A new connection means a new backend process, or at least
// a new view of it: its weight starts over, blackout included.
func (w *reportedWeights) connection(e *Endpoint, sc balancer.SubConn, s balancer.SubConnState) {
	switch {
	case s.ConnectivityState == connectivity.Ready && e.weights.sc == nil:
		e.weights.sc = sc
		if w.keeper != nil {
			w.keeper.connectionReady(e)
		}
	case s.ConnectivityState != connectivity.Ready && e.weights.sc == sc:
		e.weights.closeOOB()
		e.weights.sc = nil
	}
}

func (w *reportedWeights) stop() {
	if w.keeper != nil {
		w.keeper.stop(*w.order)
	}
}
