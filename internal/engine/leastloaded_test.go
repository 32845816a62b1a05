package engine

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"google.golang.org/grpc/balancer"
)

// TestPairPathMatchesChoose checks Pick's written-out two-choice path
// against choose, the general one, over random fleets: in-flight counts,
// latency samples of any age (and none), recent failures and weights. For
// the same draw both must place the call on the same endpoint for the
// same reason.
func TestPairPathMatchesChoose(t *testing.T) {
	for _, timed := range []bool{false, true} {
		t.Run(fmt.Sprintf("timed=%v", timed), func(t *testing.T) {
			rnd := rand.New(rand.NewPCG(7, 11))
			const trials = 3000
			for trial := 0; trial < trials; trial++ {
				fleet := randomFleet(rnd, timed)
				seed := rnd.Uint64()
				ref := NewLeastLoaded(fleet.snapshot(seed), 2, fleet.metric)
				fast := NewLeastLoaded(fleet.snapshot(seed), 2, fleet.metric)
				if !fast.pair {
					t.Fatalf("trial %d: the written-out path does not apply", trial)
				}
				if trial%2 == 1 {
					// First candidates in turn: both pickers start at the same one.
					ref.turns.busy.Store(busyOne)
					fast.turns.busy.Store(busyOne)
				}
				i, j, coin := ref.pairOf(ref.snap.Rand.Uint64())
				want, _, wantWhy, _ := ref.choose([]int{i, j}, fleet.clock.now, coin)

				before := fleet.counts()
				if _, err := fast.Pick(balancer.PickInfo{}); err != nil {
					t.Fatal(err)
				}
				got, gotWhy := fleet.picked(before)
				if got != want || gotWhy != wantWhy {
					t.Fatalf("trial %d: written-out path picked %d (reason %d), choose %d (reason %d); candidates %d and %d of\n%s",
						trial, got, gotWhy, want, wantWhy, i, j, fleet)
				}
			}
		})
	}
}

// testFleet is a snapshot's worth of endpoints in random states.
type testFleet struct {
	eps     []Ready
	clock   *manualClock
	lat     *latency
	penalty *penalty
	metric  LoadMetric
}

func randomFleet(rnd *rand.Rand, timed bool) *testFleet {
	f := &testFleet{clock: &manualClock{now: int64(100 * time.Second)}, penalty: newPenalty(DefaultFailurePenalty()), metric: InFlight{}}
	if timed {
		f.lat = testLatency()
		f.metric = PeakEWMA{}
	}
	n := 3 + rnd.IntN(6)
	weighted := rnd.IntN(2) == 0
	for k := 0; k < n; k++ {
		e := newEndpoint(fmt.Sprint(k), nil, false)
		for c := rnd.IntN(4); c > 0; c-- {
			e.inflight.Add(1)
		}
		if timed && rnd.IntN(4) != 0 {
			// A sample up to three decay times old, of 1-100ms.
			stamp := f.clock.now - rnd.Int64N(int64(30*time.Second))
			e.observe(ok(), int64(time.Millisecond)*(1+rnd.Int64N(100)), stamp, f.lat)
		}
		if rnd.IntN(5) == 0 {
			for c := 1 + rnd.IntN(5); c > 0; c-- {
				e.recordOutcome(true, f.penalty)
			}
		}
		inv := 1.0
		if weighted {
			inv = 1 / float64(1+rnd.IntN(4))
		}
		f.eps = append(f.eps, readyFixed(e, inv))
	}
	return f
}

// snapshot is a Snapshot over the fleet whose Rand is seeded with seed.
func (f *testFleet) snapshot(seed uint64) *Snapshot {
	return &Snapshot{Endpoints: f.eps, Clock: f.clock, Rand: NewSeededRand(seed), penalty: f.penalty, latency: f.lat}
}

// counts is every endpoint's pick counts by reason.
func (f *testFleet) counts() [][MaxPickReasons]uint32 {
	out := make([][MaxPickReasons]uint32, len(f.eps))
	for k := range f.eps {
		for r := range out[k] {
			out[k][r] = f.eps[k].Stats.picks[r].Load()
		}
	}
	return out
}

// picked is the one endpoint and reason whose count rose since before.
func (f *testFleet) picked(before [][MaxPickReasons]uint32) (int, PickReason) {
	for k, c := range f.counts() {
		for r := range c {
			if c[r] != before[k][r] {
				return k, PickReason(r)
			}
		}
	}
	return -1, 0
}

func (f *testFleet) String() string {
	s := ""
	for k, r := range f.eps {
		avg, _ := r.Stats.LatencyAverage()
		s += fmt.Sprintf("  %d: in flight %d, latency %v at %v, outcomes %+v, 1/weight %v\n",
			k, r.Stats.InFlight(), avg, time.Duration(r.Stats.rtt.stamp.Load()), r.Stats.outcomes(), r.InvWeight)
	}
	return s
}
