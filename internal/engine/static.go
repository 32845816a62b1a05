package engine

import (
	"fmt"

	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/serviceconfig"
)

// StaticPicker builds spec's picker directly over READY endpoints, one per
// SubConn in conns, without the balancer wiring. The simulator uses it to
// place calls over a fleet it keeps READY itself, with no connectivity to
// drive. The picker is the policy's
// real one; what it lacks is everything that follows connectivity: slow
// start, and the time decay of failures (failures are still counted and
// penalized). weights may be nil (all 1).
func StaticPicker(spec Spec, cfg serviceconfig.LoadBalancingConfig, conns []balancer.SubConn, weights []uint32, opts Options) (balancer.Picker, error) {
	if len(conns) == 0 {
		return nil, fmt.Errorf("%s: StaticPicker needs at least one endpoint", spec.Name)
	}
	if opts.Clock == nil {
		opts.Clock = SystemClock{}
	}
	if opts.Rand == nil {
		opts.Rand = SystemRand{}
	}
	pol := spec.NewPolicy()
	settings, err := pol.Configure(cfg)
	if err != nil {
		return nil, err
	}
	shared := &doneShared{clock: opts.Clock} // its zero doneWork runs nothing: no health timer
	shared.penalty.Store(newPenalty(settings.FailurePenalty))
	lat := newLatency(settings.Latency)
	shared.latency.Store(lat)
	ready := make([]Ready, len(conns))
	for i, sc := range conns {
		w := 1.0
		if weights != nil && weights[i] > 0 {
			w = float64(weights[i])
		}
		e := newEndpoint(fmt.Sprint(i), shared, false)
		e.followChild(connectivity.Ready, fixedPicker{res: balancer.PickResult{SubConn: sc}}, false)
		ready[i] = Ready{Stats: e, InvWeight: 1 / w}
	}
	return pol.NewPicker(&Snapshot{
		Endpoints: ready,
		Clock:     opts.Clock,
		Rand:      opts.Rand,
		penalty:   shared.penalty.Load(),
		shared:    shared,
		latency:   lat,
	}), nil
}

// fixedPicker always returns the same connection, like a READY pickfirst.
type fixedPicker struct{ res balancer.PickResult }

func (p fixedPicker) Pick(balancer.PickInfo) (balancer.PickResult, error) { return p.res, nil }
