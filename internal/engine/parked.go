package engine

import (
	"time"

	"google.golang.org/grpc/connectivity"
)

// This file keeps, for a while, the connections of endpoints the resolver
// removed. A resolver's list can drop endpoints for a moment and give them
// back (a control plane that flaps, a zone withdrawn and restored, a
// readiness check that fails once): grpc's own sharding closes their
// connections at once and reconnects when they return, and a returning
// endpoint then looks like any newcomer, cold, with no history. An endpoint
// whose connection was READY when it left is parked instead: its child and
// its state are kept, nothing is placed on it, and it is closed once
// Settings.RemovalGrace has passed or as soon as its connection changes
// state. One that returns while parked, on the connection it had, is the
// same process that served it before: it comes back with its latency,
// failures, ejection and weight as they were, and it is not ramped, where
// a newcomer at that address, or the same one reconnected, would be.
//
// Only eager policies park: a lazy policy's connections follow its picks,
// and its endpoints have their own hold for keys (the hash policies'
// rejoin hold).

// parkLocked keeps c, the child of an endpoint the resolver just removed,
// if its connection is READY and parking is on, and reports whether it
// did; the caller closes it otherwise.
func (b *engineBalancer) parkLocked(key string, c *child, now int64) bool {
	if b.grace <= 0 || c.e.state != connectivity.Ready || !b.mode.reconnects() {
		return false
	}
	if b.parked == nil {
		b.parked = map[string]*child{}
	}
	c.parkedUntil, c.parkedKey = now+int64(b.grace), key
	b.parked[key] = c
	b.armParkTimerLocked(c.parkedUntil, now)
	return true
}

// unparkLocked takes back the parked child of the endpoint at key, which
// the resolver lists again, or returns nil if there is none.
func (b *engineBalancer) unparkLocked(key string) *child {
	c := b.parked[key]
	if c == nil {
		return nil
	}
	delete(b.parked, key)
	c.parkedUntil, c.removed = 0, false
	return c
}

// parkedStateLocked is a parked child's state report. Any change ends the
// parking: the connection it was kept for is gone, and an endpoint that
// returns after that is not known to be the same process. It reports
// whether the child is to be closed.
func (b *engineBalancer) parkedStateLocked(c *child, st connectivity.State) bool {
	if c.parkedUntil == 0 || st == connectivity.Ready {
		return false
	}
	delete(b.parked, c.parkedKey)
	c.parkedUntil = 0
	return true
}

// armParkTimerLocked makes sure a sweep runs by at, now being the time.
func (b *engineBalancer) armParkTimerLocked(at, now int64) {
	if b.parkTimer != nil && b.parkTimerAt <= at {
		return
	}
	if b.parkTimer != nil {
		b.parkTimer.Stop()
	}
	b.parkTimerAt = at
	b.parkTimer = b.clock.AfterFunc(time.Duration(at-now), b.sweepParked)
}

// sweepParked closes the parked children whose grace is over, and arms the
// timer for the next.
func (b *engineBalancer) sweepParked() {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return
	}
	b.parkTimer, b.parkTimerAt = nil, 0
	now := b.clock.Nanotime()
	var done []*child
	next := int64(0)
	for key, c := range b.parked {
		if c.parkedUntil <= now {
			delete(b.parked, key)
			c.parkedUntil = 0
			done = append(done, c)
		} else if next == 0 || c.parkedUntil < next {
			next = c.parkedUntil
		}
	}
	if next != 0 {
		b.armParkTimerLocked(next, now)
	}
	b.mu.Unlock()
	for _, c := range done {
		c.close()
	}
}

// takeParkedLocked empties the parked list and stops its timer, for Close
// and for a config that turns parking off; the caller closes what it
// returns, outside the lock.
func (b *engineBalancer) takeParkedLocked() []*child {
	if b.parkTimer != nil {
		b.parkTimer.Stop()
		b.parkTimer, b.parkTimerAt = nil, 0
	}
	kids := make([]*child, 0, len(b.parked))
	for key, c := range b.parked {
		delete(b.parked, key)
		c.parkedUntil = 0
		kids = append(kids, c)
	}
	return kids
}
