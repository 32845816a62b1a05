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

// weightKeeper owns everything about backend-reported weights: the Group
// every tracker follows, one tracker per endpoint (endpointWeight), the
// OOB streams and the update timer. The balancer tells it which endpoints
// and connections exist and when the update timer fires; a picker being
// published only reads the weights and hooks it last made, so publishing
// creates and changes nothing here. Guarded by the balancer's mu, except
// what the orcaweight package synchronizes itself.
type weightKeeper struct {
	cfg   WeightsConfig
	group *orcaweight.Group
	timer Timer
	bad   uint64 // group.BadReports() at the last update, for the metric's delta
}

// endpointWeight is one endpoint's part of the weight keeping, in its
// Endpoint. Guarded by the balancer's mu (the tracker synchronizes itself).
type endpointWeight struct {
	tracker *orcaweight.Tracker     // nil while weights are off
	done    func(balancer.DoneInfo) // finish, then the tracker's per-call report hook
	weight  float64                 // at the last weight update
	status  orcaweight.Status       // at the last weight update
	// sc is the READY connection that carries the OOB stream. It is
	// followed even while weights are off, so that turning them on finds
	// it.
	sc      balancer.SubConn
	stopOOB func() // stops the OOB stream, if one is open
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
	w.tracker = k.group.NewTracker()
	report := w.tracker.Done()
	w.done = func(info balancer.DoneInfo) {
		e.finish(info)
		report(info)
	}
	w.weight, w.status = 0, orcaweight.NoReports
	k.restartOOB(e)
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
		e.weights.tracker, e.weights.done = nil, nil
	}
}

// weightUpdate is what one update found, for the metrics.
type weightUpdate struct {
	notYet, stale int64     // READY endpoints without a usable weight, by reason
	bad           int64     // reports rejected since the previous update
	usable        []float64 // the usable weights, when asked for
}

// update folds the reports received since the last update into the
// weight of every READY endpoint in order. collect asks for the usable
// weights, which only the metrics need.
func (k *weightKeeper) update(now time.Time, order []*Endpoint, collect bool) weightUpdate {
	var u weightUpdate
	for _, e := range order {
		if e.state != connectivity.Ready {
			continue
		}
		w := &e.weights
		w.weight, w.status = w.tracker.Update(now)
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
	bad := k.group.BadReports()
	u.bad, k.bad = int64(bad-k.bad), bad
	return u
}

// forPicker returns the weights of the READY endpoints in ready, with the
// median standing in for those without a usable weight, and whether fewer
// than two have one (round-robin fallback). With per-call reports it also
// gives each entry of ready the Done that reads them.
func (k *weightKeeper) forPicker(ready []Ready) (ws []float64, fallback bool) {
	ws = make([]float64, len(ready))
	usable := make([]bool, len(ready))
	for i := range ready {
		w := &ready[i].Stats.weights
		ws[i] = w.weight
		usable[i] = w.status == orcaweight.Usable
		if !k.cfg.OutOfBand {
			ready[i].ReportDone = w.done
		}
	}
	return ws, orcaweight.FillMedian(ws, usable) < 2
}

// closeOOB closes the endpoint's ORCA stream, if any.
func (w *endpointWeight) closeOOB() {
	if w.stopOOB != nil {
		w.stopOOB()
		w.stopOOB = nil
	}
}

// The balancer's side: turning weights on and off, the update timer, and
// recording what the keeper computed.

// configureWeightsLocked applies a policy's WeightsConfig (nil turns weight
// keeping off) and (re)starts the update timer.
func (b *engineBalancer) configureWeightsLocked(cfg *WeightsConfig) {
	switch {
	case cfg == nil:
		if b.weights != nil {
			b.weights.stop(b.order)
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
		wm := b.weightMetrics()
		b.recordWeightsLocked(wm, k.update(time.Unix(0, nowNs), b.order, wm != nil))
		b.publishLocked(nowNs)
		b.scheduleWeightUpdateLocked()
	})
}

// recordWeightsLocked records one weight update's metrics in wm (nil:
// the policy has none).
func (b *engineBalancer) recordWeightsLocked(wm *weightMetrics, u weightUpdate) {
	if wm == nil {
		return
	}
	for _, w := range u.usable {
		wm.weight.Record(b.metrics, w, b.target, b.locality)
	}
	wm.notYetUsable.Record(b.metrics, u.notYet, b.target, b.locality)
	wm.stale.Record(b.metrics, u.stale, b.target, b.locality)
	if u.bad != 0 {
		wm.badReports.Record(b.metrics, u.bad, b.target, b.locality)
	}
}

// weightMetrics are the policy's weight metrics, nil if it has none.
func (b *engineBalancer) weightMetrics() *weightMetrics {
	if b.policyMetrics == nil {
		return nil
	}
	return b.policyMetrics.weights
}

// recordFallbackLocked counts a picker built in round-robin fallback.
func (b *engineBalancer) recordFallbackLocked() {
	if wm := b.weightMetrics(); wm != nil {
		wm.rrFallback.Record(b.metrics, 1, b.target, b.locality)
	}
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
