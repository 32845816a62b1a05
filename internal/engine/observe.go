package engine

import (
	"google.golang.org/grpc/balancer"
)

// OutcomeObserver is implemented by a parent's ClientConn that places
// calls on connections its child also holds (pickwise_shadow's candidate
// shares live's), so that the child learns from them: the engine binds
// every SubConn it makes to a function that takes the outcome of one such
// call, which the parent calls when the call ends. The outcome counts as
// evidence about the endpoint, as the endpoint's own call's would (its
// latency sample, its failure), without the call ever having been the
// engine's: it is neither a pick nor in flight. took is the call's
// latency in nanoseconds, or 0 for a call the parent did not time: its
// outcome is then evidence, and its latency no sample.
type OutcomeObserver interface {
	BindOutcomes(sc balancer.SubConn, observe func(info balancer.DoneInfo, took int64))
}
