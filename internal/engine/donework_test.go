package engine

import (
	"sync"
	"testing"
	"time"
)

// queueClock is a Clock whose timers fire only when the test runs them.
type queueClock struct {
	mu     sync.Mutex
	timers []*queuedTimer
	now    int64 // what Nanotime reads; tests move it
}

type queuedTimer struct {
	d       time.Duration
	f       func()
	stopped bool
}

func (t *queuedTimer) Stop() bool { was := !t.stopped; t.stopped = true; return was }

func (c *queueClock) Nanotime() int64 { return c.now }

func (c *queueClock) AfterFunc(d time.Duration, f func()) Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &queuedTimer{d: d, f: f}
	c.timers = append(c.timers, t)
	return t
}

// fire runs the timers armed so far that are not stopped, and reports how
// many ran.
func (c *queueClock) fire() int {
	c.mu.Lock()
	ts := c.timers
	c.timers = nil
	c.mu.Unlock()
	n := 0
	for _, t := range ts {
		if !t.stopped {
			t.f()
			n++
		}
	}
	return n
}

// countingOwner counts the work doneWork hands it.
type countingOwner struct {
	health, assess, flush, readmits, proven int
	again                                   func() // called from healthTick, if set
	publish                                 func() // called from rampsProven, if set
}

func (o *countingOwner) healthTick() {
	o.health++
	if o.again != nil {
		o.again()
	}
}
func (o *countingOwner) assessNow()                 { o.assess++ }
func (o *countingOwner) flushTick()                 { o.flush++ }
func (o *countingOwner) readmitFromProbe(*Endpoint) { o.readmits++ }
func (o *countingOwner) rampsProven() {
	o.proven++
	if o.publish != nil {
		o.publish()
	}
}

// TestProvenRepublishBoundedByCost: the first republish for proven
// ramps waits provenBatch; one after a republish that took d waits until
// provenCostRatio times d has passed since it ended, and never less than
// provenBatch.
func TestProvenRepublishBoundedByCost(t *testing.T) {
	clk := &queueClock{now: int64(time.Second)}
	took := 2 * time.Millisecond
	owner := &countingOwner{}
	owner.publish = func() { clk.now += int64(took) }
	w := &doneWork{owner: owner, clock: clk}
	next := func() time.Duration {
		w.provenSoon()
		if len(clk.timers) != 1 {
			t.Fatalf("%d timers armed, want 1", len(clk.timers))
		}
		d := clk.timers[0].d
		clk.now += int64(d)
		clk.fire()
		return d
	}
	if d := next(); d != provenBatch {
		t.Errorf("first republish armed after %v, want %v", d, provenBatch)
	}
	// Asked for 1 ms after a republish that took 2 ms: 20 ms after its end.
	clk.now += int64(time.Millisecond)
	if d, want := next(), provenCostRatio*took-time.Millisecond; d != want {
		t.Errorf("after a republish of %v, the next armed after %v, want %v", took, d, want)
	}
	// A cheap republish: provenBatch.
	took = time.Microsecond
	next()
	if d := next(); d != provenBatch {
		t.Errorf("after a republish of %v, the next armed after %v, want %v", took, d, provenBatch)
	}
	// Asked for while a dear one runs, whose cost is not known yet: armed
	// for provenBatch, and when due, armed again for what the bound asks.
	took = 20 * time.Millisecond
	owner.publish = func() {
		clk.now += int64(took)
		w.provenSoon()
	}
	clk.now += int64(time.Second)
	next()
	owner.publish = func() { clk.now += int64(took) }
	proven := owner.proven
	if d := next(); d != provenBatch || owner.proven != proven {
		t.Fatalf("asked for during a republish: armed after %v and ran %d times, want %v and none", d, owner.proven-proven, provenBatch)
	}
	if d, want := next(), provenCostRatio*took-provenBatch; d != want || owner.proven != proven+1 {
		t.Errorf("then armed again after %v and ran %d times, want %v and once", d, owner.proven-proven, want)
	}
	// The wait is capped.
	took = time.Second
	next()
	if d := next(); d != provenMaxWait {
		t.Errorf("after a republish of %v, the next armed after %v, want the cap %v", took, d, provenMaxWait)
	}
}

// TestPickProvedSoon: a ramp ended at a pick, left for the next Done,
// asks for one republish, however many Dones see it.
func TestPickProvedSoon(t *testing.T) {
	clk := &queueClock{}
	owner := &countingOwner{}
	w := &doneWork{owner: owner, clock: clk}
	w.pickProvedSoon()
	if len(clk.timers) != 0 {
		t.Fatal("a republish asked for with no ramp proved at a pick")
	}
	w.pickProved.Store(true)
	w.pickProvedSoon()
	w.pickProvedSoon()
	if len(clk.timers) != 1 || w.pickProved.Load() {
		t.Fatalf("after a pick proved a ramp, two Dones armed %d timers and left pickProved %v; want 1 and false", len(clk.timers), w.pickProved.Load())
	}
	clk.now += int64(clk.timers[0].d)
	clk.fire()
	if owner.proven != 1 {
		t.Errorf("republishes: %d, want 1", owner.proven)
	}
}

// TestDoneWorkCoalesces checks that many Dones asking for the same work
// while it is pending arm one timer and get one run, that the work can
// ask for its next run, and that nothing runs after stop.
func TestDoneWorkCoalesces(t *testing.T) {
	clk := &queueClock{}
	owner := &countingOwner{}
	w := &doneWork{owner: owner, clock: clk, recordsMetrics: true}
	for range 1000 {
		w.startHealth(time.Second)
		w.assessSoon()
		w.armFlush()
		w.provenSoon()
	}
	if got := len(clk.timers); got != 4 {
		t.Fatalf("1000 requests of each kind armed %d timers, want 4", got)
	}
	// While each is pending, a request is a load: no timer, no closure.
	if a := testing.AllocsPerRun(100, func() {
		w.startHealth(time.Second)
		w.assessSoon()
		w.armFlush()
		w.provenSoon()
	}); a != 0 {
		t.Errorf("a request while pending allocates %v times, want 0", a)
	}
	if d := clk.timers[0].d; d != time.Second {
		t.Errorf("health tick armed after %v, want 1s", d)
	}
	if d := clk.timers[2].d; d != metricsFlushPeriod {
		t.Errorf("flush armed after %v, want %v", d, metricsFlushPeriod)
	}
	if d := clk.timers[3].d; d != provenBatch {
		t.Errorf("the first republish for proven ramps armed after %v, want %v", d, provenBatch)
	}
	if n := clk.fire(); n != 4 || owner.health != 1 || owner.assess != 1 || owner.flush != 1 || owner.proven != 1 {
		t.Fatalf("fired %d: health %d, assess %d, flush %d, proven %d; want one each", n, owner.health, owner.assess, owner.flush, owner.proven)
	}

	// A tick that finds more to watch asks for the next one itself.
	owner.again = func() { w.startHealth(time.Second) }
	w.startHealth(time.Second)
	clk.fire()
	if len(clk.timers) != 1 {
		t.Fatalf("a tick that asked for the next one left %d timers, want 1", len(clk.timers))
	}

	w.readmit(nil)
	if owner.readmits != 1 {
		t.Errorf("readmits = %d, want 1", owner.readmits)
	}

	w.stop()
	w.startHealth(time.Second)
	w.assessSoon()
	w.armFlush()
	w.provenSoon()
	if n := clk.fire(); n != 0 {
		t.Errorf("%d timers ran after stop, want 0", n)
	}
	if owner.health != 2 {
		t.Errorf("health ticks = %d after stop, want 2", owner.health)
	}
}

// TestDoneWorkZeroValue checks that endpoints built without a balancer,
// whose doneWork is the zero value, ask for nothing and do not panic.
func TestDoneWorkZeroValue(t *testing.T) {
	var w doneWork
	w.startHealth(time.Second)
	w.assessSoon()
	w.armFlush()
	w.provenSoon()
	w.readmit(nil)
	w.stop()
}
