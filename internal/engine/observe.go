package engine

import (
	"google.golang.org/grpc/balancer"
)

// OutcomeObserver is implemented by a parent's ClientConn that places
// calls on connections its child also holds (pickwise_shadow's live and
// candidate share them), so that the child learns from them: the engine
// binds every SubConn it makes to an EndpointFeed, which the parent calls
// for such calls. A parent may use only part of a feed: pickwise_shadow
// tells its candidate of live's calls' outcomes and load, and live only
// of the canary's load.
type OutcomeObserver interface {
	BindOutcomes(sc balancer.SubConn, feed EndpointFeed)
}

// EndpointFeed tells a child's engine about calls its parent placed on
// one of the child's endpoints, which were never the engine's picks.
type EndpointFeed struct {
	// Outcome takes one such call's outcome, as evidence about the
	// endpoint, as the endpoint's own call's would be (its latency
	// sample, its failure). took is the call's latency in nanoseconds, or
	// 0 for a call the parent did not time: its outcome is then evidence,
	// and its latency no sample.
	Outcome func(info balancer.DoneInfo, took int64)
	// Load counts such a call in the endpoint's in-flight calls when it
	// starts (true), and out again when it ends (false): for a parent
	// whose child places some of the same endpoints' calls for real
	// (pickwise_shadow's canary), so that the child's load-aware choices
	// see the calls placed beside its own. Each start is followed by one
	// end, on the same EndpointFeed. Nil for a policy whose picker the
	// parent's calls would throw off (Spec.ParentLoad).
	Load func(started bool)
}
