package testkit

import (
	"encoding/json"
	"math/rand/v2"
	"sync/atomic"

	"github.com/pickwise/pickwise/internal/engine"
	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/serviceconfig"
)

// Floor is the registry name of the floor picker, the yardstick of pick
// benchmarks: a power-of-two-choices pick that does what every such pick
// must and nothing more, through balancer.Picker over the engine's own
// pickfirst children, built in the same binary as the policies. It draws one
// 64-bit random value and splits it into two indices, reads two cache lines
// (each endpoint's counter and child picker share one), asks the winner's
// child for its connection, and adds one to the winner's counter; its Done
// subtracts one. (It calls the child's picker on every pick, where the
// engine's pickers take a READY pickfirst child's SubConn without the
// call: a nanosecond or two that the policies are spared and the floor is
// not.) It has no weights, slow start, failure tracking, ejection,
// retries or metrics, and its counters are its own, reset with every
// picker. A policy's distance from it is what its features cost.
//
// It is registered with grpc and the engine when testkit is linked, which
// only tests do. Never use it outside a benchmark.
const Floor = "floor"

func init() {
	engine.Register(engine.Spec{
		Name:        Floor,
		ParseConfig: func(json.RawMessage) (serviceconfig.LoadBalancingConfig, error) { return floorConfig{}, nil },
		NewPolicy:   func() engine.Policy { return floorPolicy{} },
	})
}

type floorConfig struct {
	serviceconfig.LoadBalancingConfig
}

// floorPolicy asks the engine for nothing: no slow start, no failure
// penalty, no ejection.
type floorPolicy struct{}

func (floorPolicy) Configure(serviceconfig.LoadBalancingConfig) (engine.Settings, error) {
	return engine.Settings{}, nil
}

func (floorPolicy) NewPicker(snap *engine.Snapshot) balancer.Picker {
	slots := make([]floorSlot, len(snap.Endpoints))
	for i := range slots {
		s := &slots[i]
		s.picker = snap.Endpoints[i].ChildPicker()
		s.done = func(balancer.DoneInfo) { s.inflight.Add(-1) }
	}
	return &floorPicker{slots: slots}
}

// floorSlot is one endpoint of a floor picker: all a pick reads or writes
// for it, on one cache line. A slice of them is a whole number of lines
// long, and the allocator places it at a multiple of its size class, for
// such lengths itself a multiple of 64, so each slot is one line.
type floorSlot struct {
	inflight atomic.Int64
	picker   balancer.Picker
	done     func(balancer.DoneInfo)
	_        [64 - 32]byte
}

type floorPicker struct{ slots []floorSlot }

func (p *floorPicker) Pick(info balancer.PickInfo) (balancer.PickResult, error) {
	n := uint64(len(p.slots))
	bits := rand.Uint64()
	i := (uint64(uint32(bits)) * n) >> 32
	s := &p.slots[i]
	if n > 1 {
		j := (uint64(uint32(bits>>32)) * (n - 1)) >> 32
		if j >= i {
			j++
		}
		if t := &p.slots[j]; t.inflight.Load() < s.inflight.Load() {
			s = t
		}
	}
	res, err := s.picker.Pick(info)
	if err != nil {
		return res, err
	}
	s.inflight.Add(1)
	res.Done = s.done
	return res, nil
}
