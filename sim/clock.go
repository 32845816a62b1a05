package sim

import (
	"container/heap"
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
	// daemon events (a balancer's timers) never keep RunAll going: see
	// Loop.Clock.
	daemon bool
	index  int
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
	// work counts the events in the heap that are not daemons, cancelled
	// ones included (they leave the heap when their time comes).
	work int
}

// Now is the virtual time since the start of the run.
func (l *Loop) Now() time.Duration { return l.now }

// At schedules fn at virtual time at (not before now).
func (l *Loop) At(at time.Duration, fn func()) *event { return l.schedule(at, fn, false) }

func (l *Loop) schedule(at time.Duration, fn func(), daemon bool) *event {
	if at < l.now {
		at = l.now
	}
	l.seq++
	e := &event{at: at, seq: l.seq, fn: fn, daemon: daemon}
	heap.Push(&l.events, e)
	if !daemon {
		l.work++
	}
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

// RunAll processes events until only daemon events (a balancer's timers)
// are left; the clock stops at the last event it ran. A policy may keep a
// periodic timer for as long as it lives (pickwise_orca_wrr recomputes
// its weights every second), so waiting for every event would never end;
// once no request is left, nothing those timers do can change a result.
func (l *Loop) RunAll() {
	for l.work > 0 {
		l.step()
	}
}

func (l *Loop) drain(until time.Duration) {
	for len(l.events) > 0 && l.events.peek().at <= until {
		l.step()
	}
}

// step runs the earliest event.
func (l *Loop) step() {
	e := heap.Pop(&l.events).(*event)
	if !e.daemon {
		l.work--
	}
	if e.cancelled {
		return
	}
	l.now = e.at
	e.fired = true
	e.fn()
}

// clock adapts the loop to engine.Clock, so pickwise's pickers and
// balancers read virtual time and their timers fire as loop events. Those
// timers are daemon events: they run in time order with everything else
// while the run has work, but RunAll does not wait for them.
func (l *Loop) clock() engine.Clock { return loopClock{l} }

type loopClock struct{ l *Loop }

func (c loopClock) Nanotime() int64 { return int64(c.l.now) }

func (c loopClock) AfterFunc(d time.Duration, f func()) engine.Timer {
	return timer{c.l.schedule(c.l.now+d, f, true)}
}

type timer struct{ e *event }

func (t timer) Stop() bool {
	was := !t.e.cancelled && !t.e.fired
	t.e.cancelled = true
	return was
}
