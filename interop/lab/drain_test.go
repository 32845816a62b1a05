package main

import (
	"context"
	"fmt"
	"io"
	"testing"
	"time"
)

// TestDrain runs the drain scenario, every policy's channel at once, and
// checks what a graceful drain must cost nothing of: no call fails, those
// in flight at the GOAWAY are answered, no pickwise policy counts the
// drain against the backend (no ejection, no pick passing it over for
// failures, no probe), and the backend gets calls again once it is back.
// Five drains, each backend once; two under -short.
func TestDrain(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	fleet, err := startFleet(drainBackends)
	if err != nil {
		t.Fatal(err)
	}
	defer fleet.close()
	l := &lab{fleet: fleet, progress: &progress{w: io.Discard}, scale: 1, seed: 1}
	if raceEnabled {
		// A tenth of the calls, each held five times longer, so that
		// half as many are in flight at a GOAWAY while the race
		// detector's cost of a call leaves the machine its CPU: at the
		// lab's load, calls queue for seconds and outlast the drains'
		// grace.
		l.drain = drainLoad{rate: 10, latency: 500 * time.Millisecond}
	}
	drains := drainBackends
	if testing.Short() {
		drains = 2
	}
	cols, err := l.drainRun(ctx, drains)
	if err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + drainTable(l, cols, drains).String())
	if len(cols) != len(drainPolicies) {
		t.Fatalf("%d columns, want one per policy (%d)", len(cols), len(drainPolicies))
	}
	inFlight := 0
	for _, c := range cols {
		if c.out.failed != 0 {
			t.Errorf("%s: %d of %d calls failed", c.policy, c.out.failed, c.out.total)
			why := map[string]int{}
			for _, tr := range c.out.trace {
				if tr.err != nil {
					why[fmt.Sprintf("%s: %v", tr.backend, tr.err)]++
				}
			}
			for w, n := range why {
				t.Logf("  %d x %s", n, w)
			}
		}
		all, failed := c.inFlight(l)
		inFlight += all
		if failed != 0 {
			t.Errorf("%s: %d of the %d calls in flight at a GOAWAY failed", c.policy, failed, all)
		}
		if c.pickwise && c.ejections+c.avoidedPick+c.probes != 0 {
			t.Errorf("%s: the drains counted against the backends: %d ejections, %d picks passed over a failing endpoint, %d probes",
				c.policy, c.ejections, c.avoidedPick, c.probes)
		}
		if c.policy == pwRingHash.name {
			// Held out of its keys for rejoinHold (30 s) by design; the
			// (no hold) column checks that its keys come back.
			continue
		}
		for i, ev := range c.events {
			if c.back[i].IsZero() {
				t.Errorf("%s: drain %d: %s answered no call between its restart and the next drain", c.policy, i, l.fleet.names[ev.backend])
			}
		}
	}
	// Each channel has about two calls in flight on a backend at any
	// moment: over every drain and column, none would be a scenario
	// that did not drain under load.
	if inFlight == 0 {
		t.Error("no call was in flight on a backend at its GOAWAY")
	}
}
