package engine

import (
	"math"
	"testing"
	"time"

	"github.com/pickwise/pickwise/internal/evidence"
	"github.com/pickwise/pickwise/orcaweight"
	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/connectivity"
)

// feedBase gives e's baseline samples of latency every gap for d from
// start, and returns when they end.
func feedBase(e *Endpoint, start int64, latency, gap, d time.Duration) int64 {
	now := start
	for end := start + int64(d); now < end; {
		now += int64(gap)
		e.observeBase(int64(latency), now)
	}
	return now
}

// TestBaselineFallsFastRisesSlowly: the baseline follows a backend that
// turned faster within a couple of seconds, moves little over a slowdown
// of several seconds, and follows a lasting one over a minute or so;
// samples a millisecond apart and 50 ms apart move it alike.
func TestBaselineFallsFastRisesSlowly(t *testing.T) {
	for _, gap := range []time.Duration{time.Millisecond, 50 * time.Millisecond} {
		e := newEndpoint("x", &doneShared{}, false)
		r := &e.rtt
		now := feedBase(e, 1, 10*time.Millisecond, gap, 5*time.Second)
		if got := r.baseline(); got != float64(10*time.Millisecond) {
			t.Fatalf("gap %v: baseline %v after steady 10 ms answers, want 10 ms", gap, time.Duration(got))
		}
		now = feedBase(e, now, 30*time.Millisecond, gap, 8*time.Second)
		if got := time.Duration(r.baseline()); got > 14*time.Millisecond {
			t.Errorf("gap %v: baseline %v after 8 s of 3x slower answers, want under 14 ms", gap, got)
		}
		now = feedBase(e, now, 5*time.Millisecond, gap, 3*time.Second)
		if got := time.Duration(r.baseline()); got > 5500*time.Microsecond {
			t.Errorf("gap %v: baseline %v after 3 s of 5 ms answers, want about 5 ms", gap, got)
		}
		feedBase(e, now, 20*time.Millisecond, gap, 2*time.Minute)
		if got := time.Duration(r.baseline()); got < 18*time.Millisecond {
			t.Errorf("gap %v: baseline %v after 2 min of 20 ms answers, want about 20 ms", gap, got)
		}
	}
	// One late answer among many moves it little.
	e := newEndpoint("x", &doneShared{}, false)
	now := feedBase(e, 1, 10*time.Millisecond, 10*time.Millisecond, 5*time.Second)
	e.observeBase(int64(time.Second), now+int64(10*time.Millisecond))
	if got := time.Duration(e.rtt.baseline()); got > 11*time.Millisecond {
		t.Errorf("baseline %v after one 1 s answer among 10 ms ones, want about 10 ms", got)
	}
}

// TestBaselineFirstAnswersDoNotHoldItLow: an endpoint whose first
// answers came before its backend carried its load (an idle warm-up: 0.15
// ms against the 20 ms of every later call), right before its load or
// seconds before, has its baseline near the later calls' within a second,
// not minutes; after a reset, the same. Past its first answers, it rises
// slowly again.
func TestBaselineFirstAnswersDoNotHoldItLow(t *testing.T) {
	for _, idle := range []time.Duration{0, 5 * time.Second} {
		for _, gap := range []time.Duration{time.Millisecond, 20 * time.Millisecond} {
			e := newEndpoint("x", &doneShared{}, false)
			start := int64(time.Hour)
			for range 2 {
				now := feedBase(e, start, 150*time.Microsecond, gap, 8*gap)
				now = feedBase(e, now+int64(idle), 20*time.Millisecond, gap, time.Second)
				if got := time.Duration(e.rtt.baseline()); got < 18*time.Millisecond || got > 20*time.Millisecond {
					t.Errorf("idle %v, gap %v: baseline %v after eight 0.15 ms answers and 1 s of 20 ms ones, want 18-20 ms", idle, gap, got)
				}
				now = feedBase(e, now, 20*time.Millisecond, gap, baseWarm)
				feedBase(e, now, 60*time.Millisecond, gap, 3*time.Second)
				if got := time.Duration(e.rtt.baseline()); got > 24*time.Millisecond {
					t.Errorf("idle %v, gap %v: baseline %v after 3 s of 3x slower answers, want under 24 ms", idle, gap, got)
				}
				e.resetBase()
				start += int64(time.Hour)
			}
		}
	}
}

// TestBaselineWarmUpPassesOverOneLateAnswer: in its warm-up a baseline
// rises on two answers above it in a row, to the lesser of them. One late
// answer among steady ones (a pause of the client or the server) leaves
// it, and so the expected counts of it and its peers, where they were: a
// baseline pulled up by it would scale the peers' counts down, and their
// calls would move to it. A backend whose answers all turned slower is
// followed from its second.
func TestBaselineWarmUpPassesOverOneLateAnswer(t *testing.T) {
	const (
		gap    = 20 * time.Millisecond
		steady = 2 * time.Millisecond
	)
	ws := []float64{1000, 600, 800}
	es := readyEndpoints(ws, []time.Duration{steady, steady, steady}, []uint32{2, 1, 1})
	var now int64
	for _, e := range es {
		now = feedBase(e, 1, steady, gap, 500*time.Millisecond)
	}
	es[0].observeBase(int64(3*steady), now+int64(gap))
	for _, e := range es {
		feedBase(e, now+int64(gap), steady, gap, 200*time.Millisecond)
	}
	if got := time.Duration(es[0].rtt.baseline()); got != steady {
		t.Errorf("baseline %v after one 6 ms answer among 2 ms ones in the warm-up, want 2ms", got)
	}
	var x expectation
	update(&x, es)
	for i, w := range ws {
		if got, want := expectedOf(es[i]), 4*w/2400; math.Abs(got-want) > 1e-9 {
			t.Errorf("endpoint %d (weight %v): expected %.3f calls in flight, want %.3f, its share of 4", i, w, got, want)
		}
	}

	e := newEndpoint("x", &doneShared{}, false)
	now = feedBase(e, 0, steady, gap, time.Second)
	e.observeBase(int64(6*time.Millisecond), now+int64(gap))
	e.observeBase(int64(5*time.Millisecond), now+2*int64(gap))
	if got := time.Duration(e.rtt.baseline()); got != 3500*time.Microsecond {
		t.Errorf("baseline %v after 6 ms and 5 ms answers on 2 ms in the warm-up, want 3.5ms, halfway to the lesser", got)
	}
}

// readyEndpoints are n READY endpoints with usable weights ws, baselines
// ls (0: none) and calls in flight in.
func readyEndpoints(ws []float64, ls []time.Duration, in []uint32) []*Endpoint {
	out := make([]*Endpoint, len(ws))
	for i := range ws {
		e := newEndpoint("x", &doneShared{}, false)
		e.state = connectivity.Ready
		e.weights.weight, e.weights.status = ws[i], orcaweight.Usable
		if ls[i] > 0 {
			e.observeBase(int64(ls[i]), 1)
		}
		e.inflight.Store(in[i])
		out[i] = e
	}
	return out
}

// update is an update of x over order, as the weight keeper's.
func update(x *expectation, order []*Endpoint) {
	x.start()
	for _, e := range order {
		x.add(e)
	}
	x.finish(order, time.Second)
}

// TestExpectationFollowsWeightAndLatency: the expected counts add up to
// the calls in flight and split them by weight times baseline latency:
// old hardware (less weight, longer calls) and new are expected to hold
// as many each, a machine twice as large twice as many. One without a
// baseline has none; one without a usable weight is expected at the mean
// weight, and with fewer than two usable weights all are alike.
func TestExpectationFollowsWeightAndLatency(t *testing.T) {
	ms := time.Millisecond
	order := readyEndpoints(
		[]float64{1000, 600, 2000, 1000},
		[]time.Duration{10 * ms, 50 * ms / 3, 10 * ms, 0},
		[]uint32{10, 6, 14, 3},
	)
	var x expectation
	update(&x, order)
	want := []float64{7.5, 7.5, 15, 0} // the 30 calls of the three with a baseline, as 1:1:2
	for i, e := range order {
		if got := expectedOf(e); math.Abs(got-want[i]) > 1e-6 {
			t.Errorf("endpoint %d: expected %.3f, want %v", i, got, want[i])
		}
	}

	order = readyEndpoints([]float64{1000, 600, 0}, []time.Duration{10 * ms, 10 * ms, 10 * ms}, []uint32{3, 3, 3})
	order[2].weights.status = orcaweight.Blackout
	x = expectation{}
	update(&x, order)
	for i, want := range []float64{3 * 1.25, 3 * 0.75, 3} {
		if got := expectedOf(order[i]); math.Abs(got-want) > 1e-9 {
			t.Errorf("with one in blackout: endpoint %d expected %.3f, want %.3f", i, got, want)
		}
	}
	order[1].weights.status = orcaweight.Stale
	x = expectation{}
	update(&x, order)
	for i, e := range order {
		if got := expectedOf(e); math.Abs(got-3) > 1e-9 {
			t.Errorf("with one usable weight: endpoint %d expected %.3f, want 3", i, got)
		}
	}
}

// shorterPicks makes picks on a WeightedRR over four equal endpoints,
// whose calls end at once, and returns the first endpoint's share of them
// and of the schedule. Before them, set prepares the endpoints.
func shorterPicks(t *testing.T, penalty bool, set func([]Ready)) (got, slots float64) {
	t.Helper()
	eps := idEndpoints([]float64{1, 1, 1, 1})
	set(eps)
	snap := &Snapshot{Endpoints: eps, Rand: NewSeededRand(3)}
	if penalty {
		snap.penalty = newPenalty(DefaultFailurePenalty())
	}
	p := NewWeightedRR(snap)
	const picks = 4000
	for range picks {
		res, err := p.Pick(balancer.PickInfo{})
		if err != nil {
			t.Fatal(err)
		}
		if res.SubConn.(*idSubConn).id == 0 {
			got += 1.0 / picks
		}
		res.Done(balancer.DoneInfo{})
	}
	return got, p.Schedule().Share(0)
}

// TestWeightedRRShorterOfTwo: a schedule position whose endpoint holds
// more calls than expected goes to a second candidate drawn by weight
// that holds fewer against its own expectation, or fewer calls if it has
// none yet; the endpoint keeps its slots while its count is within its
// expectation, while it has no expectation, when the others are as
// loaded, when the others have recent failures (which also take their
// slots), and where failures are not counted at all (no penalty).
func TestWeightedRRShorterOfTwo(t *testing.T) {
	expect := func(eps []Ready, es ...float64) {
		for i, e := range es {
			eps[i].Stats.expectedWord().Store(math.Float64bits(e))
		}
	}
	busy := func(eps []Ready) { eps[0].Stats.inflight.Store(4); expect(eps, 1, 1, 1, 1) }
	for _, c := range []struct {
		name    string
		penalty bool
		set     func([]Ready)
		moves   bool // its slots go to the others but when the draw is itself: a quarter of them
	}{
		{"above its expectation", true, busy, true},
		{"within its expectation", true, func(eps []Ready) { busy(eps); expect(eps, 5, 1, 1, 1) }, false},
		{"others as loaded", true, func(eps []Ready) {
			busy(eps)
			for _, r := range eps[1:] {
				r.Stats.inflight.Store(4)
			}
		}, false},
		{"others failing", true, func(eps []Ready) {
			busy(eps)
			for _, r := range eps[1:] {
				r.Stats.outcomeBits.Store(evidence.Counts{Failures: 1, Total: 5}.Pack())
			}
		}, false},
		{"no expectation of its own", true, func(eps []Ready) { busy(eps); expect(eps, 0, 1, 1, 1) }, false},
		{"others without expectations: bare counts", true, func(eps []Ready) { busy(eps); expect(eps, 1, 0, 0, 0) }, true},
		{"others without expectations, as loaded", true, func(eps []Ready) {
			busy(eps)
			expect(eps, 1, 0, 0, 0)
			for _, r := range eps[1:] {
				r.Stats.inflight.Store(4)
			}
		}, false},
		{"no penalty", false, busy, false},
	} {
		got, slots := shorterPicks(t, c.penalty, c.set)
		want := slots
		if c.moves {
			want = slots / 4
		}
		if math.Abs(got-want) > 0.015 {
			t.Errorf("%s: share %.3f of the busy endpoint, its slots %.3f; want %.3f", c.name, got, slots, want)
		}
	}
}

// stepClock is a Clock that moves step at every reading.
type stepClock struct{ now, step int64 }

func (c *stepClock) Nanotime() int64                       { c.now += c.step; return c.now }
func (c *stepClock) AfterFunc(time.Duration, func()) Timer { panic("no timers here") }

// TestWeightedRRTimesFewCallsWhenBusy: a WeightedRR times calls for the
// baselines, one at a time per endpoint, about one every baseEvery: all
// it can while calls are sparse, few of many.
func TestWeightedRRTimesFewCallsWhenBusy(t *testing.T) {
	for _, c := range []struct {
		name   string
		step   time.Duration // between clock readings
		lo, hi float64       // share of calls timed
	}{
		{"sparse", 100 * time.Millisecond, 0.4, 0.6},
		{"dense", 10 * time.Microsecond, 0, 0.01},
	} {
		eps := idEndpoints([]float64{1, 1})
		clock := &stepClock{step: int64(c.step)}
		for _, r := range eps {
			r.Stats.shared.clock = clock
		}
		p := NewWeightedRR(&Snapshot{Endpoints: eps, Rand: NewSeededRand(5), penalty: newPenalty(DefaultFailurePenalty())})
		const picks = 20000
		timed := 0
		for range picks {
			res, err := p.Pick(balancer.PickInfo{})
			if err != nil {
				t.Fatal(err)
			}
			if res.SubConn.(*idSubConn).id == 0 && eps[0].Stats.rtt.lastTimed.Load() > 0 {
				timed++
			}
			res.Done(balancer.DoneInfo{})
		}
		if share := float64(timed) / (picks / 2); share < c.lo || share > c.hi {
			t.Errorf("%s: %.4f of an endpoint's calls timed, want %.2f-%.2f", c.name, share, c.lo, c.hi)
		}
		if eps[0].Stats.rtt.baseline() <= 0 {
			t.Errorf("%s: no baseline after %d calls", c.name, picks)
		}
	}
}
