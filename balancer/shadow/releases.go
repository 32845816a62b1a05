package shadow

import (
	"math"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc/balancer"
)

// releases holds the candidate's Dones for sampled predictions on
// endpoints live did not send the call to. A prediction stays in the
// candidate's in-flight count for as long as a call on its endpoint lasts
// (that endpoint's recent latency under live), not as long as the call on
// live's endpoint did: a load-aware candidate then sees the load its own
// choices would have put on each endpoint, as it would if it were live.
// A Done due later than the live call's end waits here until a later
// sampled pick or finish finds it due; nothing runs on a timer.
type releases struct {
	// next is the earliest due time held, math.MaxInt64 when none, so that
	// callers with nothing due skip the lock.
	next atomic.Int64

	mu    sync.Mutex
	queue releaseHeap
}

type release struct {
	due  int64
	done func(balancer.DoneInfo)
}

// releaseHeap is a min-heap by due time, written out rather than through
// container/heap, whose interface boxes every pushed value.
type releaseHeap []release

func (h *releaseHeap) push(r release) {
	*h = append(*h, r)
	q := *h
	for i := len(q) - 1; i > 0; {
		parent := (i - 1) / 2
		if q[parent].due <= q[i].due {
			break
		}
		q[parent], q[i] = q[i], q[parent]
		i = parent
	}
}

func (h *releaseHeap) pop() release {
	q := *h
	top := q[0]
	last := len(q) - 1
	q[0] = q[last]
	q[last] = release{}
	q = q[:last]
	for i := 0; ; {
		l, small := 2*i+1, i
		if l < len(q) && q[l].due < q[small].due {
			small = l
		}
		if r := l + 1; r < len(q) && q[r].due < q[small].due {
			small = r
		}
		if small == i {
			break
		}
		q[i], q[small] = q[small], q[i]
		i = small
	}
	*h = q
	return top
}

func newReleases() *releases {
	r := &releases{}
	r.next.Store(math.MaxInt64)
	return r
}

// hold keeps done until due.
func (r *releases) hold(due int64, done func(balancer.DoneInfo)) {
	r.mu.Lock()
	r.queue.push(release{due: due, done: done})
	r.next.Store(r.queue[0].due)
	r.mu.Unlock()
}

// drain calls, with errNotSent, every Done due by now.
func (r *releases) drain(now int64) {
	if r.next.Load() > now {
		return
	}
	for {
		r.mu.Lock()
		if len(r.queue) == 0 || r.queue[0].due > now {
			r.setNextLocked()
			r.mu.Unlock()
			return
		}
		done := r.queue.pop().done
		r.setNextLocked()
		r.mu.Unlock()
		done(balancer.DoneInfo{Err: errNotSent})
	}
}

// flush calls every Done held, due or not: the balancer is closing.
func (r *releases) flush() { r.drain(math.MaxInt64 - 1) }

func (r *releases) setNextLocked() {
	if len(r.queue) == 0 {
		r.next.Store(math.MaxInt64)
		return
	}
	r.next.Store(r.queue[0].due)
}

// latencyEstimate is an endpoint's recent call duration under live, in
// nanoseconds: a moving average of the recorded calls on it, 0 before
// any.
type latencyEstimate struct{ nanos atomic.Int64 }

// latencyWeight is the share of each new call in the average: 1/8, a few
// dozen calls' memory.
const latencyWeight = 8

func (l *latencyEstimate) add(took int64) {
	for {
		old := l.nanos.Load()
		next := took
		if old != 0 {
			next = old + (took-old)/latencyWeight
		}
		if next <= 0 {
			next = 1
		}
		if l.nanos.CompareAndSwap(old, next) {
			return
		}
	}
}

func (l *latencyEstimate) get() int64 { return l.nanos.Load() }
