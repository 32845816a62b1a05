package engine

import (
	"time"

	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/connectivity"
)

// This file decides when a child's change becomes a new picker. A picker
// costs O(n) to build, and a burst of changes (a fleet coming up, a
// rolling restart, the endpoints of many keys waking) brings one change
// per endpoint: publishing each would cost O(n²), seconds of the channel's
// queue at 10k endpoints. So a change that leaves the channel's state as
// it was is published at most once per coalescing window, a window that
// grows with the fleet so that building pickers takes a bounded share of
// the time however large it is. A change of the channel's state (the
// first endpoint READY, the last one gone) is published at once.
//
// Between publishes, the picker in place is a little stale, and safely
// so: a call it places on an endpoint that lost its connection does not
// fail (grpc finds the connection closed and waits for the next picker),
// and an endpoint that became READY only waits for its share of traffic.
// A lazy policy's calls that wait for a particular endpoint pick through
// its livePicker, and are retried as soon as it is READY (onDemand's
// readyLocked).

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
// endpoint: a picker costs about 100 ns per endpoint to build
// (BenchmarkFlap in internal/scale), so publishing once a window keeps it
// to about a tenth of the channel's time however large the fleet (10 ms
// at 10k endpoints, 50 ms at 50k).
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

// childStateLocked records a child's new state in its endpoint, and
// publishes it now, later or with the rest of the children being updated.
func (b *engineBalancer) childStateLocked(e *Endpoint, s balancer.State) {
	now := b.clock.Nanotime()
	from, to := e.state, s.ConnectivityState
	b.slowStart.track(e, to, now)
	e.picker = s.Picker
	e.live.set(s.Picker)
	e.followChild(to, s.Picker, b.mode.followsChild())
	b.readyChangedLocked(e)
	b.memberChangedLocked(e)
	b.counts.move(from, to)
	if to <= connectivity.Shutdown {
		b.lastIn[to] = e
	}
	if b.coalesce.hold {
		return
	}
	if len(b.order) <= publishAtOnceUpTo || b.mode.aggregate(b.counts, len(b.order)) != b.coalesce.published {
		b.publishLocked(now)
		return
	}
	b.publishSoonLocked(now)
	if to == connectivity.Ready && from != connectivity.Ready {
		b.mode.readyLocked(b)
	}
}

// publishSoonLocked publishes at the end of the window that began with the
// last publish: now if it has passed, else on a timer.
func (b *engineBalancer) publishSoonLocked(now int64) {
	c := &b.coalesce
	if c.timer != nil {
		return // a publish is due already, and will show this change
	}
	due := c.lastPublish + int64(window(len(b.order)))
	if due <= now {
		b.publishLocked(now)
		return
	}
	c.due = due
	c.timer = b.clock.AfterFunc(time.Duration(due-now), func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		if b.closed || c.due != due {
			return // published or stopped since
		}
		c.timer, c.due = nil, 0
		b.publishLocked(b.clock.Nanotime())
	})
}

// updateStateLocked gives the parent state and picker. Every publish ends
// here, so a deferred one is no longer needed.
func (b *engineBalancer) updateStateLocked(state connectivity.State, p balancer.Picker) {
	c := &b.coalesce
	c.stop()
	c.published, c.lastPublish = state, b.clock.Nanotime()
	b.cc.UpdateState(balancer.State{ConnectivityState: state, Picker: p})
}

// queuePicker queues every call until the next picker.
type queuePicker struct{}

func (queuePicker) Pick(balancer.PickInfo) (balancer.PickResult, error) {
	return balancer.PickResult{}, balancer.ErrNoSubConnAvailable
}
