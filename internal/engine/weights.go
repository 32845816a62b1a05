package engine

import (
	"time"

	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/connectivity"
)

// This file is the balancer's side of backend-reported weights: turning
// them on and off, the update timer, recording what the keeper computed,
// and following connections for the OOB streams. weightkeeper.go keeps
// the weights.

// configureWeightsLocked applies a policy's WeightsConfig (nil turns weight
// keeping off) and (re)starts the update timer.
func (b *engineBalancer) configureWeightsLocked(cfg *WeightsConfig) {
	// A resolver update has dropped the list already; a change of config
	// alone may start or stop the keeper, which starts every endpoint's
	// weight over (weightKeeper.add).
	b.pub.readyList.weights.drop()
	switch {
	case cfg == nil:
		if b.weights != nil {
			// The parked endpoints' trackers too: one that returns
			// gets a fresh one from the next keeper (rejoinedLocked).
			b.weights.stop(append(b.parking.endpoints(), b.order...))
			b.weights = nil
		}
	case b.weights == nil:
		b.weights = newWeightKeeper(*cfg, b.order)
		b.scheduleWeightUpdateLocked()
	default:
		if b.weights.reconfigure(*cfg, b.order) {
			b.scheduleWeightUpdateLocked()
		}
	}
}

// scheduleWeightUpdateLocked arms the keeper's update timer. Its firing is
// the balancer's business (its lock, a new picker), so the callback lives
// here, not in the keeper.
func (b *engineBalancer) scheduleWeightUpdateLocked() {
	k := b.weights
	if k.timer != nil {
		k.timer.Stop()
	}
	k.timer = b.clock.AfterFunc(k.cfg.UpdatePeriod, func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		if b.closed || b.weights != k {
			return
		}
		nowNs := b.clock.Nanotime()
		b.rec.weights(k.update(time.Unix(0, nowNs), b.order, b.rec.weightMetrics() != nil))
		b.pub.readyList.weights.drop() // the weights it kept are the last update's
		b.pub.publish(nowNs)
		b.scheduleWeightUpdateLocked()
	})
}

// subConnStateChanged starts an endpoint's ORCA stream on the first of its
// connections to turn READY (the one pickfirst uses) and stops it when that
// connection leaves READY. A new connection means a new backend process, or
// at least a new view of it: its weight starts over, blackout included.
func (b *engineBalancer) subConnStateChanged(e *Endpoint, sc balancer.SubConn, s balancer.SubConnState) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed || b.children[e] == nil {
		return // closed, or e is no longer in the resolver's list
	}
	switch {
	case s.ConnectivityState == connectivity.Ready && e.weights.sc == nil:
		e.weights.sc = sc
		if b.weights != nil {
			b.weights.connectionReady(e)
		}
	case s.ConnectivityState != connectivity.Ready && e.weights.sc == sc:
		e.weights.closeOOB()
		e.weights.sc = nil
	}
}
