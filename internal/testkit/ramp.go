package testkit

import (
	"time"

	"github.com/pickwise/pickwise/internal/engine"
	"google.golang.org/grpc/balancer"
)

// Ramping reports whether the picker h's balancer publishes lists some
// endpoint as in its slow-start ramp.
func (h *Harness) Ramping() bool {
	p, ok := h.CC.State().Picker.(interface{ Snapshot() *engine.Snapshot })
	return ok && p.Snapshot().Ramping()
}

// RampRun makes up to picks picks on h, one every gap of its clock, while
// the endpoint newcomer ramps: the newcomer answers each of its calls
// after latency, the others after peerLatency, or, if peerLatency is 0,
// never (their calls are held until the test ends, as an overloaded
// fleet's queues hold them). It stops at the first pick after which the
// balancer no longer publishes any endpoint as ramping, and returns that
// pick's number (0 if none), and how many answers the newcomer had given
// by then.
func (h *Harness) RampRun(newcomer string, picks int, gap, latency, peerLatency time.Duration) (ended, answers int) {
	h.T.Helper()
	var held []func(balancer.DoneInfo)
	h.T.Cleanup(func() { Finish(held, nil) })
	for k := 1; k <= picks; k++ {
		a, done := h.Pick()
		switch {
		case a == newcomer:
			h.Clock.Advance(latency)
			done(Outcome(nil))
			answers++
			h.Clock.Advance(max(gap-latency, 0))
		case peerLatency == 0:
			held = append(held, done)
			h.Clock.Advance(gap)
		default:
			h.Clock.Advance(peerLatency)
			done(Outcome(nil))
			h.Clock.Advance(max(gap-peerLatency, 0))
		}
		if !h.Ramping() {
			return k, answers
		}
	}
	return 0, answers
}
