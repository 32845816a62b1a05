package engine

import (
	"slices"
	"time"

	"google.golang.org/grpc/connectivity"
)

// This file keeps, for a while, the connections of endpoints the resolver
// removed. A resolver's list can drop endpoints for a moment and give them
// back (a control plane that flaps, a zone withdrawn and restored, a DNS
// answer lost): grpc's own sharding closes their connections at once and
// reconnects when they return, and a returning endpoint then looks like
// any newcomer, cold, with no history. An endpoint whose connection was
// READY when it left is parked instead: its child and its state are kept,
// no picker published after its removal places a call on it (calls
// already out finish, and their outcomes count), and it is closed once
// Settings.RemovalGrace has passed, or as soon as its connection changes
// state. One that returns while parked, on the connection it had, is the
// same process that served it before: it comes back with its latency,
// failures, ejection and weight (not decayed or updated while it was
// out: the health ticks and weight updates walk the listed endpoints
// only), but for what a config changed meanwhile asks (returnedLocked),
// and no new slow-start ramp starts, where a newcomer at that address, or
// the same one reconnected, would ramp. The grace is counted from each
// child's parking under the grace of the time: a config that shortens it
// closes the children parked longer ago than the new grace, and one that
// lengthens it keeps them longer.
//
// Only eager policies park: a lazy policy's connections follow its picks,
// and its endpoints have their own hold for keys (the hash policies'
// rejoin hold).

// parkedEntry is a child in the order it was parked, with the number of
// that parking and its time: an entry whose child has since left the
// parked list, or been parked again, no longer matches it and is skipped.
type parkedEntry struct {
	c   *child
	seq uint64
	at  int64
}

// current reports whether p is its child's parking of now.
func (p parkedEntry) current() bool { return p.c.parkSeq == p.seq }

// until is when p's child is to be closed under the balancer's grace.
func (b *engineBalancer) until(p parkedEntry) int64 { return p.at + int64(b.grace) }

// parkQueueSlack is how many entries past twice the parked list the queue
// may hold before it is rid of those that no longer match.
const parkQueueSlack = 64

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
	b.parkSeq++
	c.parkSeq, c.parkedKey = b.parkSeq, key
	b.parked[key] = c
	// Every child's deadline is its parking time plus the one grace, so
	// deadlines come in the order children are parked, whatever the
	// grace, and the sweep reads only the head of the queue.
	b.parkQueue = append(b.parkQueue, parkedEntry{c, c.parkSeq, now})
	if len(b.parkQueue) > 2*len(b.parked)+parkQueueSlack {
		// Endpoints parked and taken back again and again within the
		// grace leave entries that no longer match: dropped here, so
		// that the queue stays within twice the parked list.
		b.parkQueue = slices.DeleteFunc(b.parkQueue, func(p parkedEntry) bool { return !p.current() })
	}
	if b.parkTimer == nil {
		b.armParkTimerLocked(now+int64(b.grace), now)
	}
	return true
}

// setGraceLocked sets the grace to grace, from a config at time now. A
// grace of 0 (parking off) takes every parked child out, for the caller
// to close outside the lock; a changed one re-arms the sweep for the
// first deadline under it, which may be now.
func (b *engineBalancer) setGraceLocked(grace time.Duration, now int64) []*child {
	old := b.grace
	b.grace = grace
	if grace <= 0 {
		return b.takeParkedLocked()
	}
	if grace != old && len(b.parkQueue) > 0 {
		b.armParkTimerLocked(max(b.until(b.parkQueue[0]), now), now)
	}
	return nil
}

// unparkLocked takes back the parked child of the endpoint at key, which
// the resolver lists again, or returns nil if there is none.
func (b *engineBalancer) unparkLocked(key string) *child {
	c := b.parked[key]
	if c == nil {
		return nil
	}
	delete(b.parked, key)
	c.parkSeq, c.removed = 0, false
	return c
}

// returnedLocked settles what changed while e, back from parking, was out
// of the list, once the update's config is applied: its weight's tracker,
// where its reports go, and its ORCA stream, closed at its removal unless
// the update's config has opened it again already, and an ejection that
// nothing would end otherwise, since the health ticks skipped it and may
// have stopped.
func (b *engineBalancer) returnedLocked(e *Endpoint, now int64) {
	if w := b.weights; w != nil {
		switch {
		case e.weights.tracker == nil:
			w.add(e)
		default:
			w.routeReports(e)
			if e.weights.stopOOB == nil {
				w.restartOOB(e)
			}
		}
	}
	pen := b.shared.penalty.Load()
	if pen == nil {
		// Nothing to judge: a config that turned the penalty off forgot
		// the parked endpoints' failures with the others'
		// (UpdateClientConnState).
		return
	}
	if e.ejection.ejected && b.shared.ejector.Load() == nil {
		b.readmitLocked(e, now)
	}
	if e.ejection.ejected || e.outcomes().Failures > 0 {
		// The ticks that decay its failures and judge its ejection may
		// have stopped while it was out, and the pickers read failures
		// only while some endpoint is known to have them.
		b.shared.failing.Store(true)
		b.shared.work.startHealth(pen.tick)
	}
}

// parkedStateLocked is a parked child's state report. Any change ends the
// parking: the connection it was kept for is gone, and an endpoint that
// returns after that is not known to be the same process. It reports
// whether the child is to be closed.
func (b *engineBalancer) parkedStateLocked(c *child, st connectivity.State) bool {
	if c.parkSeq == 0 || st == connectivity.Ready {
		return false
	}
	delete(b.parked, c.parkedKey)
	c.parkSeq = 0
	return true
}

// armParkTimerLocked arms the sweep for at, now being the time. A sweep
// armed before and not stopped in time finds its generation out of date
// and does nothing.
func (b *engineBalancer) armParkTimerLocked(at, now int64) {
	if b.parkTimer != nil {
		b.parkTimer.Stop()
	}
	b.parkGen++
	gen := b.parkGen
	b.parkTimer = b.clock.AfterFunc(time.Duration(at-now), func() { b.sweepParked(gen) })
}

// sweepParked closes the parked children whose grace is over, and arms the
// timer for the next. It reads the queue from its head only as far as the
// first child still within its grace.
func (b *engineBalancer) sweepParked(gen uint64) {
	b.mu.Lock()
	if b.closed || gen != b.parkGen {
		b.mu.Unlock()
		return
	}
	b.parkTimer = nil
	now := b.clock.Nanotime()
	var done []*child
	q := b.parkQueue
	for len(q) > 0 {
		p := q[0]
		current := p.current()
		if current && b.until(p) > now {
			break
		}
		if current {
			delete(b.parked, p.c.parkedKey)
			p.c.parkSeq = 0
			done = append(done, p.c)
		}
		q[0] = parkedEntry{}
		q = q[1:]
	}
	b.parkQueue = q
	if len(q) > 0 {
		b.armParkTimerLocked(b.until(q[0]), now)
	} else {
		// A mass removal's map and queue are let go, not kept at their
		// largest.
		b.parked, b.parkQueue = nil, nil
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
		b.parkTimer = nil
	}
	b.parkGen++
	var kids []*child
	for _, c := range b.parked {
		c.parkSeq = 0
		kids = append(kids, c)
	}
	b.parked, b.parkQueue = nil, nil
	return kids
}

// parkedEndpointsLocked is the endpoints of the parked children.
func (b *engineBalancer) parkedEndpointsLocked() []*Endpoint {
	es := make([]*Endpoint, 0, len(b.parked))
	for _, c := range b.parked {
		es = append(es, c.e)
	}
	return es
}
