package engine

import (
	"sync/atomic"
	"time"

	"github.com/pickwise/pickwise/orcaweight"
	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/connectivity"
	grpcorca "google.golang.org/grpc/orca"
	"google.golang.org/grpc/resolver"
)

// WeightsConfig makes the engine keep a backend-reported (ORCA) weight per
// endpoint and hand the weights to pickers (Snapshot.Weights). It must be
// validated by the policy's ParseConfig.
type WeightsConfig struct {
	// ORCA is how reports become weights (orcaweight.Config).
	ORCA orcaweight.Config
	// OutOfBand takes reports from an ORCA stream per connection, every
	// OOBPeriod, instead of from each call's trailer. With it on, calls
	// carry no report hook, as in gRFC A58.
	OutOfBand bool
	OOBPeriod time.Duration
	// UpdatePeriod is how often reports are folded into weights and a new
	// picker published.
	UpdatePeriod time.Duration
}

// weights is a balancer's weight-keeping state. Guarded by the balancer's
// mu, except what the orca package synchronizes itself.
type weights struct {
	cfg   WeightsConfig
	group *orcaweight.Group
	timer Timer
	bad   uint64 // group.BadReports() at the last update, for the metric's delta
}

// configureWeightsLocked applies a policy's WeightsConfig (nil turns weight
// keeping off) and (re)starts the update timer and the OOB streams that
// depend on it.
func (b *engineBalancer) configureWeightsLocked(cfg *WeightsConfig) {
	if cfg == nil {
		if b.weights != nil {
			b.stopWeightsLocked()
			b.weights = nil
		}
		return
	}
	if b.weights == nil {
		b.weights = &weights{cfg: *cfg, group: orcaweight.NewGroup(cfg.ORCA)}
		b.scheduleWeightUpdateLocked()
		for _, e := range b.endpoints.All() {
			e.orca, e.orcaDone = nil, nil // from an earlier group, if weights were on before
			b.restartOOBLocked(e)
		}
	} else {
		old := b.weights.cfg
		b.weights.cfg = *cfg
		b.weights.group.SetConfig(cfg.ORCA)
		if old.OutOfBand != cfg.OutOfBand || old.OOBPeriod != cfg.OOBPeriod {
			for _, e := range b.endpoints.All() {
				b.restartOOBLocked(e)
			}
		}
		if old.UpdatePeriod != cfg.UpdatePeriod {
			b.scheduleWeightUpdateLocked()
		}
	}
}

// stopWeightsLocked stops the update timer and every OOB stream.
func (b *engineBalancer) stopWeightsLocked() {
	if b.weights == nil {
		return
	}
	if b.weights.timer != nil {
		b.weights.timer.Stop()
		b.weights.timer = nil
	}
	for _, e := range b.endpoints.All() {
		e.stopOOBLocked()
	}
}

// trackerLocked returns e's ORCA tracker, creating it on first use.
func (b *engineBalancer) trackerLocked(e *Endpoint) *orcaweight.Tracker {
	if e.orca == nil {
		e.orca = b.weights.group.NewTracker()
		report := e.orca.Done()
		e.orcaDone = func(info balancer.DoneInfo) {
			e.finish(info)
			report(info)
		}
	}
	return e.orca
}

func (b *engineBalancer) scheduleWeightUpdateLocked() {
	if b.weights.timer != nil {
		b.weights.timer.Stop()
	}
	w := b.weights
	w.timer = b.clock.AfterFunc(w.cfg.UpdatePeriod, func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		if b.closed || b.weights != w {
			return
		}
		b.updateWeightsLocked()
		b.scheduleWeightUpdateLocked()
	})
}

// updateWeightsLocked folds the reports received since the last update
// into every endpoint's weight, records the weight metrics, and publishes
// a picker with the new weights.
func (b *engineBalancer) updateWeightsLocked() {
	nowNs := b.clock.Nanotime()
	now := time.Unix(0, nowNs)
	var notYet, stale int64
	wm := b.weightMetrics()
	for _, e := range b.order {
		if e.state != connectivity.Ready {
			continue
		}
		e.orcaWeight, e.orcaStatus = b.trackerLocked(e).Update(now)
		switch e.orcaStatus {
		case orcaweight.NoReports, orcaweight.Blackout:
			notYet++
		case orcaweight.Stale:
			stale++
		}
		if e.orcaStatus == orcaweight.Usable && wm != nil {
			wm.weight.Record(b.metrics, e.orcaWeight, b.target, b.locality)
		}
	}
	if wm != nil {
		wm.notYetUsable.Record(b.metrics, notYet, b.target, b.locality)
		wm.stale.Record(b.metrics, stale, b.target, b.locality)
	}
	if bad := b.weights.group.BadReports(); bad != b.weights.bad {
		if wm != nil {
			wm.badReports.Record(b.metrics, int64(bad-b.weights.bad), b.target, b.locality)
		}
		b.weights.bad = bad
	}
	b.publishLocked(nowNs)
}

// weightMetrics are the policy's weight metrics, nil if it has none.
func (b *engineBalancer) weightMetrics() *weightMetrics {
	if b.policyMetrics == nil {
		return nil
	}
	return b.policyMetrics.weights
}

// readyWeightsLocked returns the weights of the READY endpoints in ready,
// with the median standing in for those without a usable weight, and
// whether fewer than two have one (round-robin fallback, which it
// records).
func (b *engineBalancer) readyWeightsLocked(ready []Ready) ([]float64, bool) {
	ws := make([]float64, len(ready))
	usable := make([]bool, len(ready))
	for i := range ready {
		e := ready[i].Stats
		ws[i] = e.orcaWeight
		usable[i] = e.orcaStatus == orcaweight.Usable
	}
	if orcaweight.FillMedian(ws, usable) >= 2 {
		return ws, false
	}
	if wm := b.weightMetrics(); wm != nil {
		wm.rrFallback.Record(b.metrics, 1, b.target, b.locality)
	}
	return ws, true
}

// NewSubConn follows the connections pickfirst children create, so that
// the connection an endpoint uses can carry its ORCA stream.
func (c childCC) NewSubConn(addrs []resolver.Address, opts balancer.NewSubConnOptions) (balancer.SubConn, error) {
	// The SubConn is known only once NewSubConn returns. grpc delivers no
	// state before that, but a fake ClientConn may (its waiters act the
	// moment it records the SubConn, and lazy policies create SubConns on
	// endpointsharding's goroutines), so the listener reads it atomically.
	var ref atomic.Pointer[balancer.SubConn]
	listener := opts.StateListener
	opts.StateListener = func(s balancer.SubConnState) {
		if p := ref.Load(); p != nil {
			c.b.subConnStateChanged(*p, addrs, s)
		}
		listener(s)
	}
	//lint:ignore SA1019 the deprecation is of multi-address SubConns; pickfirst creates one per address through this call, and the engine only passes it on
	sc, err := c.ClientConn.NewSubConn(addrs, opts)
	if err == nil {
		ref.Store(&sc)
	}
	return sc, err
}

// subConnStateChanged starts an endpoint's ORCA stream on the first of its
// connections to turn READY (the one pickfirst uses) and stops it when that
// connection leaves READY. A new connection means a new backend process, or
// at least a new view of it: its weight starts over, blackout included.
func (b *engineBalancer) subConnStateChanged(sc balancer.SubConn, addrs []resolver.Address, s balancer.SubConnState) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed || len(addrs) == 0 {
		return
	}
	e := b.byAnyAddr[addrs[0].Addr]
	if e == nil {
		return
	}
	// The connection is followed even while weights are off, so that
	// turning them on finds it.
	switch {
	case s.ConnectivityState == connectivity.Ready && e.orcaSC == nil:
		e.orcaSC = sc
		if b.weights != nil {
			b.trackerLocked(e).Reset()
			b.restartOOBLocked(e)
		}
	case s.ConnectivityState != connectivity.Ready && e.orcaSC == sc:
		e.stopOOBLocked()
		e.orcaSC = nil
	}
}

// restartOOBLocked (re)opens e's ORCA stream if the config asks for one
// and e has a READY connection.
func (b *engineBalancer) restartOOBLocked(e *Endpoint) {
	e.stopOOBLocked()
	if b.weights == nil || !b.weights.cfg.OutOfBand || e.orcaSC == nil {
		return
	}
	e.stopOOB = grpcorca.RegisterOOBListener(e.orcaSC, b.trackerLocked(e), grpcorca.OOBListenerOptions{
		ReportInterval: b.weights.cfg.OOBPeriod,
	})
}

// stopOOBLocked closes e's ORCA stream, if any.
func (e *Endpoint) stopOOBLocked() {
	if e.stopOOB != nil {
		e.stopOOB()
		e.stopOOB = nil
	}
}
