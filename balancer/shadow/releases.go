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
// timed pick or a recorded call's end finds it due; nothing runs on a
// timer.
//
// A call's end holds its Done with one compare-and-swap onto a pending
// list, without the lock: most sampled calls end with one held. The list
// joins the queue at the next clock reading (collect), which is the only
// time a pending Done can fall due: its due time is past the latest
// reading when it is held, and untimed calls go by that reading.
type releases struct {
	// next is the earliest due time in the queue, math.MaxInt64 when
	// none, so that callers with nothing due skip the lock.
	next atomic.Int64
	// pending are the calls held since the last collect, linked by
	// tracked.next.
	pending atomic.Pointer[tracked]

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

// hold keeps t's candidate Done, t.cand, until t.due. t goes back to its
// pool when it joins the queue.
func (r *releases) hold(t *tracked) {
	for {
		head := r.pending.Load()
		t.next = head
		if r.pending.CompareAndSwap(head, t) {
			return
		}
	}
}

// collect runs the pending Dones due by now and moves the others into the
// queue, then drains it. When only some calls are timed, most pending
// Dones of short calls are due by the next timed reading and never enter
// the queue; when every call is timed, each held Done enters it.
func (r *releases) collect(now int64) {
	if r.pending.Load() != nil {
		var later *tracked
		for t := r.pending.Swap(nil); t != nil; {
			next := t.next
			if t.due <= now {
				done := t.cand
				t.recycle()
				done(balancer.DoneInfo{Err: errNotSent})
			} else {
				t.next, later = later, t
			}
			t = next
		}
		if later != nil {
			r.mu.Lock()
			for t := later; t != nil; {
				next := t.next
				r.queue.push(release{due: t.due, done: t.cand})
				t.recycle()
				t = next
			}
			r.setNextLocked()
			r.mu.Unlock()
		}
	}
	r.drain(now)
}

// drainBatch is how many due Dones a drain takes per hold of the lock:
// they run after it is let go, as they are the candidate's code.
const drainBatch = 8

// drain calls, with errNotSent, every Done in the queue due by now.
func (r *releases) drain(now int64) {
	if r.next.Load() > now {
		return
	}
	var due [drainBatch]func(balancer.DoneInfo)
	for {
		n := 0
		r.mu.Lock()
		for n < drainBatch && len(r.queue) > 0 && r.queue[0].due <= now {
			due[n] = r.queue.pop().done
			n++
		}
		r.setNextLocked()
		r.mu.Unlock()
		for i, done := range due[:n] {
			due[i] = nil
			done(balancer.DoneInfo{Err: errNotSent})
		}
		if n < drainBatch {
			return
		}
	}
}

// flush calls every Done held, due or not: the balancer is closing, or
// the candidate was replaced.
func (r *releases) flush() { r.collect(math.MaxInt64 - 1) }

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
