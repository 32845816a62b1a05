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
// only), but for what a config changed meanwhile asks
// (engineBalancer.reconcileLocked),
// and no new slow-start ramp starts, where a newcomer at that address, or
// the same one reconnected, would ramp. The grace is counted from each
// child's parking under the grace of the time: a config that shortens it
// closes the children parked longer ago than the new grace, and one that
// lengthens it keeps them longer.
//
// Only eager policies park: a lazy policy's connections follow its picks,
// and its endpoints have their own hold for keys (the hash policies'
// rejoin hold).

// parking holds the parked children. Guarded by the balancer's mu.
type parking struct {
	clock  Clock
	locked runLocked
	// enabled is false for a lazy policy, which never parks.
	enabled bool
	// grace is how long a child stays parked; byKey the parked children by
	// endpointKey, and queue the order they were parked in. seq numbers
	// the parkings, so that an entry of a child's earlier parking no
	// longer matches it (parkedEntry.current); timer is the sweep that
	// closes them after their grace, of generation gen.
	grace time.Duration
	byKey map[string]*child
	queue []parkedEntry
	seq   uint64
	timer Timer
	gen   uint64
}

// parkedEntry is a child in the order it was parked, with the number of
// that parking and its time: an entry whose child has since left the
// parked list, or been parked again, no longer matches it and is skipped.
type parkedEntry struct {
	c   *child
	seq uint64
	at  int64
}

func (e parkedEntry) current() bool { return e.c.parkSeq == e.seq }

func (p *parking) until(e parkedEntry) int64 { return e.at + int64(p.grace) }

// queueSlack is how many stale entries the queue may hold beyond twice
// the parked children before park compacts it: children parked and
// unparked again and again within one grace would otherwise grow it.
const queueSlack = 64

// park keeps c, the child of the removed endpoint key, if its connection
// is READY and the grace is on, and reports whether it did.
func (p *parking) park(key string, c *child, now int64) bool {
	if p.grace <= 0 || c.e.state != connectivity.Ready || !p.enabled {
		return false
	}
	if p.byKey == nil {
		p.byKey = map[string]*child{}
	}
	p.seq++
	c.parkSeq, c.parkedKey = p.seq, key
	p.byKey[key] = c
	p.queue = append(p.queue, parkedEntry{c, c.parkSeq, now})
	if len(p.queue) > 2*len(p.byKey)+queueSlack {
		p.queue = slices.DeleteFunc(p.queue, func(e parkedEntry) bool { return !e.current() })
	}
	if p.timer == nil {
		p.arm(now+int64(p.grace), now)
	}
	return true
}

// setGrace applies a config's grace, and returns the children to close:
// all of them when it turns parking off.
func (p *parking) setGrace(grace time.Duration, now int64) []*child {
	old := p.grace
	p.grace = grace
	if grace <= 0 {
		return p.takeAll()
	}
	if grace != old && len(p.queue) > 0 {
		p.arm(max(p.until(p.queue[0]), now), now)
	}
	return nil
}

// unpark takes back the child parked for key, if any.
func (p *parking) unpark(key string) *child {
	c := p.byKey[key]
	if c == nil {
		return nil
	}
	delete(p.byKey, key)
	c.parkSeq, c.removed = 0, false
	return c
}

// childState reports whether a parked child's new state st ends its
// parking: any state but READY means its connection is not the one it
// left with, and it is to be closed.
func (p *parking) childState(c *child, st connectivity.State) bool {
	if c.parkSeq == 0 || st == connectivity.Ready {
		return false
	}
	delete(p.byKey, c.parkedKey)
	c.parkSeq = 0
	return true
}

func (p *parking) arm(at, now int64) {
	if p.timer != nil {
		p.timer.Stop()
	}
	p.gen++
	gen := p.gen
	p.timer = p.clock.AfterFunc(time.Duration(at-now), func() { p.expire(gen) })
}

// expire closes the children whose grace has run out, outside the lock
// (children call back into the balancer).
func (p *parking) expire(gen uint64) {
	var done []*child
	p.locked(func() {
		if gen == p.gen {
			done = p.sweep(p.clock.Nanotime())
		}
	})
	for _, c := range done {
		c.close()
	}
}

// sweep unparks and returns the children parked for the grace or longer.
func (p *parking) sweep(now int64) (done []*child) {
	p.timer = nil
	q := p.queue
	for len(q) > 0 {
		e := q[0]
		current := e.current()
		if current && p.until(e) > now {
			break
		}
		if current {
			delete(p.byKey, e.c.parkedKey)
			e.c.parkSeq = 0
			done = append(done, e.c)
		}
		q[0] = parkedEntry{}
		q = q[1:]
	}
	p.queue = q
	if len(q) > 0 {
		p.arm(p.until(q[0]), now)
	} else {
		p.byKey, p.queue = nil, nil
	}
	return done
}

// takeAll unparks every child and returns them, to be closed.
func (p *parking) takeAll() []*child {
	if p.timer != nil {
		p.timer.Stop()
		p.timer = nil
	}
	p.gen++
	var kids []*child
	for _, c := range p.byKey {
		c.parkSeq = 0
		kids = append(kids, c)
	}
	p.byKey, p.queue = nil, nil
	return kids
}

// endpoints are the parked children's endpoints.
func (p *parking) endpoints() []*Endpoint {
	es := make([]*Endpoint, 0, len(p.byKey))
	for _, c := range p.byKey {
		es = append(es, c.e)
	}
	return es
}
