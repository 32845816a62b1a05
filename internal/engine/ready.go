package engine

import (
	"google.golang.org/grpc/balancer"
)

// Ready is one READY endpoint in a picker's snapshot. A picker holds a slice
// of them and never changes it; the counters it reads live in Stats.
type Ready struct {
	// Picker is the endpoint's pickfirst child picker.
	Picker balancer.Picker
	// Stats is the endpoint's long-lived state.
	Stats *Endpoint
	// Weight is the endpoint's static weight (from the weight attribute,
	// xDS's load_balancing_weight), at least 1.
	Weight float64
	// InvWeight is 1/Weight, so the pick path multiplies instead of
	// dividing.
	InvWeight float64
	// RampStart and RampEnd bound the endpoint's slow start, in UnixNano of
	// the engine's clock; RampEnd is 0 when it is not ramping.
	RampStart, RampEnd int64
}

// Snapshot is what a policy builds a picker from: the READY endpoints and
// the engine services a picker needs. It is immutable.
type Snapshot struct {
	// Endpoints are the READY endpoints; never empty.
	Endpoints []Ready
	// Clock and Rand are the engine's injected time and randomness.
	Clock   Clock
	Rand    Rand
	ramp    *ramp
	penalty *penalty
	latency *latency
}

// PeakLoad is r's Peak EWMA load at now (a Clock.Nanotime reading): its
// latency average, decayed by idle time, times (in-flight + 1). It is 0
// when the policy did not ask the engine to time calls.
func (s *Snapshot) PeakLoad(r *Ready, now int64) float64 {
	if s.latency == nil {
		return 0
	}
	return r.Stats.PeakLoad(now, s.latency)
}

// EffectiveInvWeight is 1/weight after slow start, for an endpoint whose
// RampEnd is not zero. now is the clock's UnixNano.
func (s *Snapshot) EffectiveInvWeight(r *Ready, now int64) float64 {
	if r.RampEnd == 0 || now >= r.RampEnd || s.ramp == nil {
		return r.InvWeight
	}
	return r.InvWeight / s.ramp.factor(now-r.RampStart)
}

// PickEndpoint asks r's child for a connection and, if it has one, counts
// the RPC against r until its Done runs. Every policy's picker ends here, so
// that in-flight counts and failure tracking are the same for all of them.
func PickEndpoint(r *Ready, info balancer.PickInfo) (balancer.PickResult, error) {
	res, err := r.Picker.Pick(info)
	if err != nil {
		return res, err
	}
	r.Stats.started()
	if res.Done == nil {
		res.Done = r.Stats.done
		return res, nil
	}
	// A child that tracks its own calls is rare (pickfirst does not); only
	// then does a pick pay for a closure.
	childDone, ours := res.Done, r.Stats.done
	res.Done = func(di balancer.DoneInfo) {
		ours(di)
		childDone(di)
	}
	return res, nil
}
