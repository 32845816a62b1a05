package server

import (
	"container/list"
	"context"
	"sync"
	"time"
)

// gate admits calls into service, at most capacity at a time, in arrival
// order. A plain semaphore channel would do for a fixed capacity, but the
// lab changes capacity while calls wait, and Stats wants the queue length;
// both are easy with an explicit waiter list.
type gate struct {
	mu sync.Mutex
	// Guarded by mu.
	capacity int        // 0 means unlimited
	active   int        // calls holding a slot
	waiters  *list.List // of chan struct{}, oldest first; closed when granted
}

func newGate(capacity int) *gate {
	return &gate{capacity: capacity, waiters: list.New()}
}

// acquire waits for a slot, or for ctx to end. Once it returns nil the
// caller must call release.
func (g *gate) acquire(ctx context.Context) error {
	g.mu.Lock()
	// Newcomers join the queue behind existing waiters even if a slot looks
	// free, so that FIFO order holds while a release is handing slots out.
	if g.waiters.Len() == 0 && g.hasRoomLocked() {
		g.active++
		g.mu.Unlock()
		return nil
	}
	ready := make(chan struct{})
	elem := g.waiters.PushBack(ready)
	g.mu.Unlock()

	select {
	case <-ready:
		return nil
	case <-ctx.Done():
		g.mu.Lock()
		select {
		case <-ready:
			// Granted while we were giving up: the slot is ours, so hand it
			// on rather than leak it.
			g.releaseLocked()
		default:
			g.waiters.Remove(elem)
		}
		g.mu.Unlock()
		return ctx.Err()
	}
}

// release frees a slot taken by acquire and admits the next waiter.
func (g *gate) release() {
	g.mu.Lock()
	g.releaseLocked()
	g.mu.Unlock()
}

func (g *gate) releaseLocked() {
	g.active--
	g.admitLocked()
}

// setCapacity changes the limit. Raising it admits waiters at once;
// lowering it lets calls in service finish and admits no one until active
// falls below the new limit.
func (g *gate) setCapacity(c int) {
	g.mu.Lock()
	g.capacity = c
	g.admitLocked()
	g.mu.Unlock()
}

func (g *gate) hasRoomLocked() bool { return g.capacity == 0 || g.active < g.capacity }

// admitLocked moves waiters into service, oldest first, while there is room.
// The slot is counted before the waiter wakes, so the count never
// undercounts calls that have been admitted.
func (g *gate) admitLocked() {
	for g.waiters.Len() > 0 && g.hasRoomLocked() {
		ready := g.waiters.Remove(g.waiters.Front()).(chan struct{})
		g.active++
		close(ready)
	}
}

// load is a consistent snapshot of the gate.
func (g *gate) load() (active, queued, capacity int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.active, g.waiters.Len(), g.capacity
}

// Rate window geometry: ten 100ms buckets give a ~1s sliding window whose
// estimate moves smoothly rather than jumping once a second.
const (
	bucketWidth = 100 * time.Millisecond
	numBuckets  = 10
	rateWindow  = bucketWidth * numBuckets
)

// rates counts completions and errors per bucket of wall time.
type rates struct {
	mu sync.Mutex
	// Guarded by mu.
	since   time.Time // last reset; rates are over at most this much time
	buckets [numBuckets]bucket
}

type bucket struct {
	epoch  int64 // time / bucketWidth this bucket counts; stale if old
	calls  int64
	errors int64
}

func newRates(now time.Time) *rates { return &rates{since: now} }

// add records one completed call, and whether it was an injected failure.
func (r *rates) add(now time.Time, failed bool) {
	e := now.UnixNano() / int64(bucketWidth)
	r.mu.Lock()
	b := &r.buckets[e%numBuckets]
	if b.epoch != e {
		*b = bucket{epoch: e}
	}
	b.calls++
	if failed {
		b.errors++
	}
	r.mu.Unlock()
}

// rate returns completions and errors per second over the last second.
func (r *rates) rate(now time.Time) (qps, eps float64) {
	e := now.UnixNano() / int64(bucketWidth)
	r.mu.Lock()
	defer r.mu.Unlock()
	var calls, errs int64
	for _, b := range r.buckets {
		if b.epoch > e-numBuckets && b.epoch <= e {
			calls += b.calls
			errs += b.errors
		}
	}
	// The window is nine whole buckets plus the current partial one. Just
	// after a start or reset it covers less than that, and dividing by the
	// full second would under-report a busy server; the floor of one
	// bucket keeps a single early call from reading as a huge rate.
	span := rateWindow - bucketWidth + time.Duration(now.UnixNano()%int64(bucketWidth))
	span = max(min(span, now.Sub(r.since)), bucketWidth)
	sec := span.Seconds()
	return float64(calls) / sec, float64(errs) / sec
}

// reset forgets all counts.
func (r *rates) reset(now time.Time) {
	r.mu.Lock()
	r.since = now
	r.buckets = [numBuckets]bucket{}
	r.mu.Unlock()
}
