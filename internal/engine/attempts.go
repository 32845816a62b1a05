package engine

import (
	"context"
	"sync/atomic"

	"google.golang.org/grpc/balancer"
)

// A retried or hedged call is a new placement decision: sending it back to
// the endpoint that just failed it is pointless for an endpoint-specific
// fault. grpc gives a picker no attempt history, but every attempt's
// context derives from the call's, so a value the call's context carries
// (WithAttempts, set by an interceptor) is shared by all its attempts:
// each pick records its endpoint there, and a later attempt avoids the
// endpoints earlier ones used while another candidate exists.

// maxTrackedAttempts is how many attempts of one call are remembered;
// grpc caps maxAttempts at 5, so four earlier attempts is all a fifth one
// can have.
const maxTrackedAttempts = 4

// Attempts records the endpoints a call's attempts were placed on. Safe
// for concurrent use: hedged attempts pick at the same time.
type Attempts struct {
	n    atomic.Int32
	used [maxTrackedAttempts]atomic.Pointer[Endpoint]
}

type attemptsKey struct{}

// attemptsInUse is set once any call has carried Attempts, so that a
// process that never installs the interceptor pays one load per pick, not
// a walk up the context chain.
var attemptsInUse atomic.Bool

// WithAttempts returns ctx carrying a fresh attempt record for one call.
func WithAttempts(ctx context.Context) context.Context {
	if !attemptsInUse.Load() {
		attemptsInUse.Store(true)
	}
	return context.WithValue(ctx, attemptsKey{}, new(Attempts))
}

// AttemptsOf returns the attempt record of the call being picked, or nil.
// Small enough to inline: a pick in a process without the interceptor
// pays one load.
func AttemptsOf(info balancer.PickInfo) *Attempts {
	if !attemptsInUse.Load() {
		return nil
	}
	return attemptsIn(info.Ctx)
}

// attemptsIn is kept out of line so that AttemptsOf stays within the
// inlining budget.
//
//go:noinline
func attemptsIn(ctx context.Context) *Attempts {
	if ctx == nil {
		return nil
	}
	a, _ := ctx.Value(attemptsKey{}).(*Attempts)
	return a
}

// record notes that an attempt was placed on e.
func (a *Attempts) record(e *Endpoint) {
	if i := a.n.Add(1) - 1; i < maxTrackedAttempts {
		a.used[i].Store(e)
	}
}

// earlier reports whether any attempt has been placed yet.
func (a *Attempts) earlier() bool { return a.n.Load() > 0 }

// Used reports whether an earlier attempt of the call was placed on e.
func (a *Attempts) Used(e *Endpoint) bool {
	n := min(int(a.n.Load()), maxTrackedAttempts)
	for i := 0; i < n; i++ {
		if a.used[i].Load() == e {
			return true
		}
	}
	return false
}

// Record notes a successful pick of e for a call with attempt record a
// (nil: not tracked), and counts a retry or hedge placed on an endpoint no
// earlier attempt used. It returns res and err.
func (a *Attempts) Record(e *Endpoint, res balancer.PickResult, err error) (balancer.PickResult, error) {
	if a == nil || err != nil {
		return res, err
	}
	if n := a.n.Load(); n > 0 && e.shared != nil { // nil: an endpoint a test built alone
		// Retries are few: a shared counter costs them little.
		e.shared.retries[min(n, 3)-1].Add(1)
		if !a.Used(e) {
			e.shared.avoidedRetry.Add(1)
		}
	}
	a.record(e)
	return res, err
}
