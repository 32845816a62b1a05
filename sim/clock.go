package sim

import (
	"container/heap"
	"math"
	"time"

	"github.com/pickwise/pickwise/internal/engine"
)

// event is one thing that happens at a virtual instant. seq breaks ties in
// scheduling order, which keeps runs deterministic.
type event struct {
	at        time.Duration
	seq       uint64
	fn        func()
	cancelled bool
	fired     bool
	index     int
}

type eventHeap []*event

func (h eventHeap) Len() int { return len(h) }
func (h eventHeap) Less(i, j int) bool {
	if h[i].at != h[j].at {
		return h[i].at < h[j].at
	}
	return h[i].seq < h[j].seq
}
func (h eventHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i]; h[i].index = i; h[j].index = j }
func (h *eventHeap) Push(x any)   { e := x.(*event); e.index = len(*h); *h = append(*h, e) }
func (h *eventHeap) Pop() any     { old := *h; e := old[len(old)-1]; *h = old[:len(old)-1]; return e }
func (h eventHeap) peek() *event  { return h[0] }

// Loop is the event loop and the virtual clock. It is single-threaded:
// every event, and every timer a picker arms, runs on the goroutine that
// calls Run.
type Loop struct {
	now    time.Duration
	seq    uint64
	events eventHeap
}

// Now is the virtual time since the start of the run.
func (l *Loop) Now() time.Duration { return l.now }

// At schedules fn at virtual time at (not before now).
func (l *Loop) At(at time.Duration, fn func()) *event {
	if at < l.now {
		at = l.now
	}
	l.seq++
	e := &event{at: at, seq: l.seq, fn: fn}
	heap.Push(&l.events, e)
	return e
}

// After schedules fn d from now.
func (l *Loop) After(d time.Duration, fn func()) *event { return l.At(l.now+d, fn) }

// Run processes events in time order until none are left or the next one
// is after until, then sets the clock to until.
func (l *Loop) Run(until time.Duration) {
	l.drain(until)
	if l.now < until {
		l.now = until
	}
}

// RunAll processes every event; the clock stops at the last one.
func (l *Loop) RunAll() { l.drain(math.MaxInt64) }

func (l *Loop) drain(until time.Duration) {
	for len(l.events) > 0 && l.events.peek().at <= until {
		e := heap.Pop(&l.events).(*event)
		if e.cancelled {
			continue
		}
		l.now = e.at
		e.fired = true
		e.fn()
	}
}

// Clock adapts the loop to engine.Clock, so pickwise's pickers and
// balancers read virtual time and their timers fire as loop events.
func (l *Loop) Clock() engine.Clock { return loopClock{l} }

type loopClock struct{ l *Loop }

func (c loopClock) Nanotime() int64 { return int64(c.l.now) }

func (c loopClock) AfterFunc(d time.Duration, f func()) engine.Timer {
	return timer{c.l.After(d, f)}
}

type timer struct{ e *event }

func (t timer) Stop() bool {
	was := !t.e.cancelled && !t.e.fired
	t.e.cancelled = true
	return was
}
