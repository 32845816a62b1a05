package testkit

import (
	"sort"
	"sync"
	"time"

	"github.com/pickwise/pickwise/internal/engine"
)

// FakeClock is a virtual engine.Clock: time moves only through Advance, and
// timers fire synchronously inside Advance, in order.
type FakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
}

// fakeEpoch is where every FakeClock starts.
var fakeEpoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// NewFakeClock returns a clock reading a fixed, arbitrary instant.
func NewFakeClock() *FakeClock {
	return &FakeClock{now: fakeEpoch}
}

// Now returns the virtual time.
func (c *FakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Nanotime is the virtual time in nanoseconds since the clock's start.
func (c *FakeClock) Nanotime() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return int64(c.now.Sub(fakeEpoch))
}

// AfterFunc schedules f at Now()+d.
func (c *FakeClock) AfterFunc(d time.Duration, f func()) engine.Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{c: c, at: c.now.Add(d), f: f}
	c.timers = append(c.timers, t)
	return t
}

// Pending is the number of timers not yet fired or stopped.
func (c *FakeClock) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}

// Advance moves time forward by d, firing due timers in time order. Each
// fires with the clock set to its deadline and without the clock's lock, so
// it may schedule more timers.
func (c *FakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	end := c.now.Add(d)
	for {
		sort.SliceStable(c.timers, func(i, j int) bool { return c.timers[i].at.Before(c.timers[j].at) })
		if len(c.timers) == 0 || c.timers[0].at.After(end) {
			break
		}
		t := c.timers[0]
		c.timers = c.timers[1:]
		if t.at.After(c.now) {
			c.now = t.at
		}
		c.mu.Unlock()
		t.f()
		c.mu.Lock()
	}
	c.now = end
	c.mu.Unlock()
}

type fakeTimer struct {
	c  *FakeClock
	at time.Time
	f  func()
}

func (t *fakeTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	for i, o := range t.c.timers {
		if o == t {
			t.c.timers = append(t.c.timers[:i], t.c.timers[i+1:]...)
			return true
		}
	}
	return false
}
