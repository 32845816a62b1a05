package main

import (
	"slices"
	"testing"
	"time"

	"github.com/pickwise/pickwise/sim"
)

// TestNoisySlowdowns checks the noisy-neighbours schedule: never more
// than nnMaxSlowed backends slowed at once, windows and factors in their
// ranges, about a quarter of the backend-time slowed, and a longer run
// meeting the same windows first.
func TestNoisySlowdowns(t *testing.T) {
	horizon := nnWarmup + nnMeasured
	slow := nnNeighbours.Slowdowns(nnBackends, horizon)
	for at := time.Duration(0); at < horizon; at += 10 * time.Millisecond {
		n := 0
		for _, ws := range slow {
			if sim.Slowed(ws, at) {
				n++
			}
		}
		if n > nnMaxSlowed {
			t.Fatalf("%d backends slowed at %v, want at most %d", n, at, nnMaxSlowed)
		}
	}
	for i, ws := range slow {
		for _, w := range ws {
			if w.Factor < 2 || w.Factor > 4 || w.To-w.From > nnSlowMax || w.From < 0 {
				t.Errorf("backend %d: window %+v, want 2-4x for at most %v from 0 on", i, w, nnSlowMax)
			}
		}
	}
	// Over a minute, about a quarter: independent windows would slow a
	// backend a third of the time, before the cap drops some.
	long := nnNeighbours.Slowdowns(nnBackends, time.Minute)
	if share := nnSlowedTime(long, 0, time.Minute); share < 0.15 || share > 0.35 {
		t.Errorf("%.1f%% of backend-time slowed over a minute, want about a quarter", 100*share)
	}
	if share := nnSlowedTime(slow, nnWarmup, horizon); share == 0 {
		t.Error("nothing slowed in the measured window")
	}
	for i := range slow {
		if got := long[i][:min(len(slow[i]), len(long[i]))]; !slices.Equal(got, slow[i]) {
			t.Errorf("backend %d: windows %+v up to %v, %+v as the start of a minute's", i, slow[i], horizon, got)
		}
	}
}
