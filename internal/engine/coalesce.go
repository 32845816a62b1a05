package engine

import (
	"time"

	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/connectivity"
)

// This file decides when a child's change becomes a new picker: a change
// that leaves the channel's state as it was is published at most once per
// window, which grows with the fleet; a change of state at once
// (docs/design/publishing.md).

// coalescer is the balancer's publishing state. Guarded by the balancer's
// mu.
type coalescer struct {
	// hold is set while the balancer updates its children together (a
	// resolver update, a resolver error, ExitIdle): their reports are
	// recorded, and one publish follows.
	hold bool
	// published is the state of the last picker given to the parent, or
	// noStateYet.
	published   connectivity.State
	lastPublish int64 // Clock.Nanotime of that publish
	timer       Timer // the deferred publish, nil if none
	due         int64 // when timer fires; 0 if none
}

// publishAtOnceUpTo is the largest fleet whose every change is published
// at once: building its picker costs microseconds, and tests and small
// simulations then see each change in the next picker.
const publishAtOnceUpTo = 256

// windowPerEndpoint is how much the coalescing window grows with each
// endpoint: about a tenth of the channel's time goes to building pickers.
const windowPerEndpoint = time.Microsecond

// window is the coalescing window over n endpoints.
func window(n int) time.Duration { return time.Duration(n) * windowPerEndpoint }

// stop cancels a deferred publish.
func (c *coalescer) stop() {
	if c.timer != nil {
		c.timer.Stop()
	}
	c.timer, c.due = nil, 0
}

// childChanged publishes a child's change of state, from to to: now,
// later with others (a large fleet's burst), or with the rest of the
// children being updated (hold).
func (p *publisher) childChanged(from, to connectivity.State, now int64) {
	b := p.b
	if p.coalesce.hold {
		return
	}
	if len(b.order) <= publishAtOnceUpTo || b.mode.aggregate(b.counts, len(b.order)) != p.coalesce.published {
		p.publish(now)
		return
	}
	p.soon(now)
	if to == connectivity.Ready && from != connectivity.Ready {
		b.mode.readyLocked(b)
	}
}

// queuePicker queues every call until the next picker.
type queuePicker struct{}

func (queuePicker) Pick(balancer.PickInfo) (balancer.PickResult, error) {
	return balancer.PickResult{}, balancer.ErrNoSubConnAvailable
}
