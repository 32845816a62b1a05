package shadow

import (
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/pickwise/pickwise/internal/engine"
	"google.golang.org/grpc/balancer"
)

// releases holds the candidate's Dones for sampled predictions. A
// prediction stays in the candidate's in-flight count for as long as a
// call on its endpoint lasts (that endpoint's recent latency under live),
// not as long as the call on live's endpoint did: a load-aware candidate
// then sees the load its own choices would have put on each endpoint, as
// it would if it were live. A held Done waits here until a later compared
// pick, a timed pick or the end of a call with a record of its own
// (recorder.wrap) finds it due; nothing runs on a timer.
//
// A compared pick holds its prediction's Done by appending it to its
// shard's pending list, and under the same lock takes out the Dones due
// by then (takeDueLocked): a pending one not yet due joins a queue ordered
// by due time, and one already due runs without entering it. A prediction
// that waits for the live call's end (no latency known for its endpoint
// yet, see recorder.compare) is held by that end the same way, and a
// collect outside a pick takes the pending list as a batch to run after
// letting the lock go. A call's record goes back to its pool as the call
// ends, never into these lists: when the lists were made of the records
// themselves, they left the pool's per-core slot, and each sampled pick
// paid the pool's shared path twice.
//
// There is a list and a queue per P (shards), each under its own lock: a
// pick holds and collects in its P's, and the ends of calls with a record
// collect their P's.
// Each shard keeps the earliest due time it holds where callers read it
// without the lock, so that a collect with nothing due costs one load. A P
// that stops recording calls leaves Dones in its shard: every timed pick
// also collects two shards chosen by its spare bits, so that a Done held there
// waits past its due time for about GOMAXPROCS/2 timed picks, each at
// most 64 recorded picks apart (timing).
type releases struct {
	shards []releaseShard
	mask   uint32 // len(shards)-1: a power of two
}

// releaseShard is one P's share of the recorder: its pending list and
// queue of held Dones, and its compared picks not yet counted, on lines
// of their own.
type releaseShard struct {
	// next is at most the earliest due time of the Dones held, pending or
	// queued, math.MaxInt64 when none: a collect at an earlier time has
	// nothing to do, and skips the lock.
	next atomic.Int64

	mu sync.Mutex
	// pending are the Dones held and not yet queued or run, in the
	// order held, and pendingMin the earliest of their due times. spare is the
	// other array of two that take turns as pending, so that holding
	// allocates nothing once both have grown to the most held between
	// collects; nil while a collect runs the Dones of the other.
	pending, spare []release
	pendingMin     int64
	queue          releaseHeap

	// The compared picks of this P not yet counted on their endpoints,
	// and the sampled live calls it placed (recorder.compare): kept here
	// under the lock the pick takes anyway to hold its prediction, so
	// that a compared pick writes no shared counter.
	compared  []comparison
	liveCalls int64
	// bits is a xorshift state: the spare bits of a pick that took no
	// draw (every pick sampled, no canary), which choose whether its call
	// is timed.
	bits uint64
	_    [3*cacheLine - 40 - 4*unsafe.Sizeof([]release{})]byte
}

// countComparedLocked counts the shard's listed compared picks on their
// endpoints (conns.count) and empties the list; the caller holds mu.
func (s *releaseShard) countComparedLocked(c *conns) {
	c.count(s.compared)
	clear(s.compared)
	s.compared = s.compared[:0]
}

// nextBits advances the shard's xorshift state; the caller holds mu.
func (s *releaseShard) nextBits() uint32 {
	x := s.bits
	x ^= x << 13
	x ^= x >> 7
	x ^= x << 17
	s.bits = x
	return uint32(x >> 32)
}

// maxShards caps the shards of a recorder's releases: one per P up to it
// (engine.PerPSlots), read when the shadow is built.
const maxShards = 256

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

// newReleases returns releases over shards shards, a power of two, whose
// xorshift states are seeded from rnd.
func newReleases(shards int, rnd engine.Rand) *releases {
	r := &releases{shards: make([]releaseShard, shards), mask: uint32(shards - 1)}
	for i := range r.shards {
		s := &r.shards[i]
		s.bits = rnd.Uint64() | 1 // xorshift's state is never 0
		s.next.Store(math.MaxInt64)
		s.pendingMin = math.MaxInt64
		// Both non-nil: a nil spare means a collect is under way.
		s.pending, s.spare = []release{}, []release{}
	}
	return r
}

// shard is the shard of the P with id proc (procid.Hint).
func (r *releases) shard(proc int) *releaseShard {
	return &r.shards[uint32(proc)&r.mask]
}

// hold keeps done, a candidate's Done, until due, in the shard of the P
// with id proc.
func (r *releases) hold(proc int, due int64, done func(balancer.DoneInfo)) {
	s := r.shard(proc)
	s.mu.Lock()
	s.holdLocked(due, done)
	s.mu.Unlock()
}

// holdLocked is hold for a caller that holds s's lock.
func (s *releaseShard) holdLocked(due int64, done func(balancer.DoneInfo)) {
	s.pending = append(s.pending, release{due: due, done: done})
	if due < s.pendingMin {
		s.pendingMin = due
		if due < s.next.Load() {
			s.next.Store(due)
		}
	}
}

// drain calls, with errNotSent, every Done due by now in the shard of the
// P with id proc.
func (r *releases) drain(proc int, now int64) { r.shard(proc).collect(now, false) }

// collect is drain at a timed pick's reading, which also drains two shards
// chosen by spare, random bits: those of Ps that have stopped recording
// calls are drained this way.
func (r *releases) collect(proc int, now int64, spare uint32) {
	r.drain(proc, now)
	if r.mask != 0 {
		r.drain(int(spare), now)
		r.drain(int(spare>>12), now)
	}
}

// flush calls every Done held, due or not: the balancer is closing, or
// the candidate was replaced.
func (r *releases) flush() {
	for i := range r.shards {
		r.shards[i].collect(math.MaxInt64-1, true)
	}
}

// drainBatch is how many due Dones a collect takes from the queue per
// hold of the lock: they run after it is let go, as they are the
// candidate's code.
const drainBatch = 8

// collect runs the Dones due by now: the pending ones without queueing
// them, queueing the others, then those of the queue. If another collect
// of the shard is running the pending Dones it took, it waits for it when
// wait is set, and otherwise leaves the pending ones to a later collect.
func (s *releaseShard) collect(now int64, wait bool) {
	if s.next.Load() > now {
		return
	}
	s.mu.Lock()
	for s.spare == nil {
		if !wait {
			s.mu.Unlock()
			s.drainQueue(now)
			return
		}
		s.mu.Unlock()
		runtime.Gosched()
		s.mu.Lock()
	}
	batch := s.pending
	s.pending, s.spare, s.pendingMin = s.spare, nil, math.MaxInt64
	s.mu.Unlock()
	// The batch is this collect's alone until it gives it back.
	later := batch[:0]
	for _, rel := range batch {
		if rel.due <= now {
			rel.done(balancer.DoneInfo{Err: errNotSent})
		} else {
			later = append(later, rel)
		}
	}
	clear(batch[len(later):])
	s.mu.Lock()
	for _, rel := range later {
		s.queue.push(rel)
	}
	clear(later)
	s.spare = batch[:0]
	s.setNextLocked()
	s.mu.Unlock()
	s.drainQueue(now)
}

// drainQueue runs the queue's Dones due by now.
func (s *releaseShard) drainQueue(now int64) {
	if s.next.Load() > now {
		return
	}
	var due [drainBatch]func(balancer.DoneInfo)
	for {
		n := 0
		s.mu.Lock()
		for n < drainBatch && len(s.queue) > 0 && s.queue[0].due <= now {
			due[n] = s.queue.pop().done
			n++
		}
		if n > 0 {
			s.setNextLocked()
		}
		s.mu.Unlock()
		for i, done := range due[:n] {
			due[i] = nil
			done(balancer.DoneInfo{Err: errNotSent})
		}
		if n < drainBatch {
			return
		}
	}
}

// takeDueLocked moves the Dones due by now, pending or queued, into due,
// as many as it holds, and queues the pending ones not yet due; it
// returns how many it took. Taking a full due means more may be due. The
// caller holds mu, and runs the Dones after letting it go.
func (s *releaseShard) takeDueLocked(now int64, due *[drainBatch]func(balancer.DoneInfo)) int {
	if s.next.Load() > now {
		return 0
	}
	n := 0
	if s.pendingMin <= now || len(s.pending) > 0 {
		// The pending list is this lock's to edit even while a collect
		// runs an earlier batch: that one was swapped out.
		kept, keptMin := s.pending[:0], int64(math.MaxInt64)
		for _, rel := range s.pending {
			switch {
			case rel.due > now:
				s.queue.push(rel)
			case n < len(due):
				due[n] = rel.done
				n++
			default:
				kept = append(kept, rel)
				keptMin = min(keptMin, rel.due)
			}
		}
		clear(s.pending[len(kept):])
		s.pending, s.pendingMin = kept, keptMin
	}
	for n < len(due) && len(s.queue) > 0 && s.queue[0].due <= now {
		due[n] = s.queue.pop().done
		n++
	}
	s.setNextLocked()
	return n
}

// setNextLocked sets next to the earliest due time held.
func (s *releaseShard) setNextLocked() {
	next := s.pendingMin
	if len(s.queue) > 0 {
		next = min(next, s.queue[0].due)
	}
	s.next.Store(next)
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
