package testkit

import (
	"testing"
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

// CheckRampRelief checks slow start's relief on harnesses that join
// makes, each with the returned endpoint just READY and ramping, with
// picks 10 ms apart and the newcomer's answers taking 5 ms: when its
// peers never answer (an overloaded fleet's queues), its first answer
// ends its ramp within picks picks; when they answer as fast as it does,
// it gets a call and keeps its ramp.
func CheckRampRelief(t *testing.T, picks int, join func(t *testing.T) (*Harness, string)) {
	const gap, latency = 10 * time.Millisecond, 5 * time.Millisecond // 100 calls a second
	for _, tc := range []struct {
		name        string
		peerLatency time.Duration // 0: never answered
		relieved    bool
	}{
		{"peers overloaded", 0, true},
		{"peers as fast", latency, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, newcomer := join(t)
			ended, answers := h.RampRun(newcomer, picks, gap, latency, tc.peerLatency)
			switch {
			case tc.relieved && (ended == 0 || answers > 1):
				t.Errorf("ramp ended at pick %d (0: not in %d) after %d answers, want it ended by the newcomer's first", ended, picks, answers)
			case !tc.relieved && ended != 0:
				t.Errorf("ramp ended at pick %d after %d answers, want it kept", ended, answers)
			case !tc.relieved && answers == 0:
				t.Errorf("the newcomer had no call in its first %d picks", picks)
			}
		})
	}
}
