package testkit

import (
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestFakeClockFiresTimersInOrder(t *testing.T) {
	c := NewFakeClock()
	start := c.Now()
	var fired []time.Duration
	record := func() { fired = append(fired, c.Now().Sub(start)) }
	c.AfterFunc(3*time.Second, record)
	c.AfterFunc(1*time.Second, func() {
		record()
		// A timer scheduled while firing runs in the same Advance if due.
		c.AfterFunc(time.Second, record)
	})
	stopped := c.AfterFunc(2*time.Second, record)
	if !stopped.Stop() {
		t.Fatal("Stop of a pending timer returned false")
	}
	c.Advance(5 * time.Second)
	want := []time.Duration{time.Second, 2 * time.Second, 3 * time.Second}
	if len(fired) != len(want) {
		t.Fatalf("fired at %v, want %v", fired, want)
	}
	for i := range want {
		if fired[i] != want[i] {
			t.Fatalf("fired at %v, want %v", fired, want)
		}
	}
	if got := c.Now().Sub(start); got != 5*time.Second {
		t.Errorf("clock advanced %v, want 5s", got)
	}
	if c.Pending() != 0 || stopped.Stop() {
		t.Error("timers left after Advance")
	}
}
