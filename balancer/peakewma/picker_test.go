package peakewma_test

import (
	"sort"
	"testing"
	"time"

	"github.com/pickwise/pickwise/balancer/peakewma"
	"github.com/pickwise/pickwise/internal/engine"
	"github.com/pickwise/pickwise/internal/testkit"
	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// backendFunc says how long a call to addr takes at virtual time t and how
// it ends.
type backendFunc func(addr string, t time.Duration) (time.Duration, error)

// pending is a call the loop will finish at its time.
type pending struct {
	at   time.Duration
	done func(balancer.DoneInfo)
	err  error
}

// run drives h in virtual time: rate calls per millisecond for d, each
// finishing when backend says. It returns picks per address over the run.
func run(h *testkit.Harness, rate int, d time.Duration, backend backendFunc) map[string]int {
	h.T.Helper()
	got := map[string]int{}
	var queue []pending
	start := time.Duration(h.Clock.Nanotime())
	for t := time.Duration(0); t < d; t += time.Millisecond {
		now := start + t
		for i := 0; i < rate; i++ {
			a, done := h.Pick()
			got[a]++
			lat, err := backend(a, now)
			queue = append(queue, pending{at: now + lat, done: done, err: err})
		}
		sort.Slice(queue, func(i, j int) bool { return queue[i].at < queue[j].at })
		h.Clock.Advance(time.Millisecond)
		for len(queue) > 0 && queue[0].at <= now+time.Millisecond {
			queue[0].done(testkit.Outcome(queue[0].err))
			queue = queue[1:]
		}
	}
	// Finish the rest at their times.
	for _, p := range queue {
		if wait := p.at - time.Duration(h.Clock.Nanotime()); wait > 0 {
			h.Clock.Advance(wait)
		}
		p.done(testkit.Outcome(p.err))
	}
	return got
}

func share(got map[string]int, a string) float64 {
	total := 0
	for _, n := range got {
		total += n
	}
	return float64(got[a]) / float64(total)
}

func TestSlowEndpointAvoidedThenRecovered(t *testing.T) {
	h := testkit.NewHarness(t, peakewma.Name, `{"decayTime": "1s"}`)
	as := testkit.Addrs(5)
	h.Start(as...)
	slow := true
	backend := func(a string, _ time.Duration) (time.Duration, error) {
		if a == as[0] && slow {
			return 250 * time.Millisecond, nil
		}
		return 20 * time.Millisecond, nil
	}
	run(h, 2, time.Second, backend) // learn
	got := run(h, 2, 3*time.Second, backend)
	if s := share(got, as[0]); s > 0.02 {
		t.Errorf("slow endpoint's share = %.2f%%, want below 2%% (fair: 20%%)", 100*s)
	}
	slow = false
	// Within 3 decay times of recovering, it is back to half its fair share.
	var s float64
	for i := 0; i < 6 && s < 0.10; i++ {
		s = share(run(h, 2, 500*time.Millisecond, backend), as[0])
	}
	if s < 0.10 {
		t.Errorf("recovered endpoint's share after 3 decay times = %.1f%%, want at least 10%%", 100*s)
	}
}

// blackHoleShare runs ten endpoints under cfg, the first failing every
// call in 100µs while the rest answer in 20ms, and returns the first's share.
func blackHoleShare(t *testing.T, cfg string) float64 {
	h := testkit.NewHarness(t, peakewma.Name, cfg)
	as := testkit.Addrs(10)
	h.Start(as...)
	backend := func(a string, _ time.Duration) (time.Duration, error) {
		if a == as[0] {
			return 100 * time.Microsecond, status.Error(codes.Unavailable, "down")
		}
		return 20 * time.Millisecond, nil
	}
	return share(run(h, 2, 5*time.Second, backend), as[0])
}

func TestBlackHoleAvoided(t *testing.T) {
	if s := blackHoleShare(t, `{}`); s > 0.02 {
		t.Errorf("black hole's share = %.2f%%, want below 2%% (fair: 10%%)", 100*s)
	}
}

func TestPenaltyOffFastFailuresDoNotLookFast(t *testing.T) {
	// Without the engine's failure penalty, failures are no evidence at
	// all; but a fast failure never makes the black hole look faster than
	// its peers, so it draws what plain two choices give an endpoint that
	// looks like any other while idle (1-(9/10)^2 = 19%), not more.
	if s := blackHoleShare(t, `{"failurePenalty": {"enabled": false}}`); s > 0.21 {
		t.Errorf("black hole's share without the penalty = %.1f%%, want at most plain P2C's 19%%", 100*s)
	}
}

func TestCancellationsAreNotSamples(t *testing.T) {
	// Every call takes 200ms; the first endpoint's callers give up just
	// then. Were a cancellation a failure, that endpoint would look twice as
	// slow as the others and be shunned; it is not the backend's doing, so
	// the three share evenly.
	h := testkit.NewHarness(t, peakewma.Name, `{}`)
	as := testkit.Addrs(3)
	h.Start(as...)
	backend := func(a string, _ time.Duration) (time.Duration, error) {
		if a == as[0] {
			return 200 * time.Millisecond, status.Error(codes.Canceled, "caller went away")
		}
		return 200 * time.Millisecond, nil
	}
	// First every endpoint answers, so each has a latency average.
	run(h, 1, time.Second, func(string, time.Duration) (time.Duration, error) { return 200 * time.Millisecond, nil })
	got := run(h, 1, 3*time.Second, backend)
	if s := share(got, as[0]); s < 0.25 {
		t.Errorf("share of the endpoint whose callers cancel = %.1f%%, want about a third", 100*s)
	}
}

// withNewcomer starts the policy under cfg over three endpoints, each of
// which answers calls in 20 ms for a while, then adds a fourth and makes
// it READY: the newcomer is the last of the returned addresses.
func withNewcomer(t *testing.T, cfg string) (*testkit.Harness, []string) {
	t.Helper()
	h := testkit.NewHarness(t, peakewma.Name, cfg)
	as := testkit.Addrs(4)
	h.Start(as[:3]...)
	run(h, 1, 200*time.Millisecond, func(string, time.Duration) (time.Duration, error) { return 20 * time.Millisecond, nil })
	if err := h.Update(testkit.Endpoints(as)...); err != nil {
		t.Fatal(err)
	}
	h.Ready(as[3])
	return h, as
}

// TestNewcomerGetsOneCallUntilItAnswers: the newcomer rule on its own,
// slow start off. TestSlowStartHoldsNewcomerToItsShare has both.
func TestNewcomerGetsOneCallUntilItAnswers(t *testing.T) {
	h, as := withNewcomer(t, `{"slowStart": {"enabled": false}}`)
	// The old endpoints' calls stay in flight, so their cost climbs; the
	// newcomer still gets only its first call until that one answers.
	var first func(balancer.DoneInfo)
	var held []func(balancer.DoneInfo)
	newcomer := 0
	for i := 0; i < 300; i++ {
		a, done := h.Pick()
		if a != as[3] {
			held = append(held, done)
			continue
		}
		newcomer++
		first = done
	}
	if newcomer != 1 {
		t.Fatalf("newcomer got %d calls before answering once, want exactly 1", newcomer)
	}
	h.Clock.Advance(10 * time.Millisecond)
	first(testkit.Outcome(nil))
	// Now it wins every pair it is drawn into: two of four endpoints per
	// pick, so about half the calls.
	got, more := h.Count(100, true)
	if got[as[3]] < 40 {
		t.Errorf("newcomer got %d of 100 calls after answering in 10ms while the others hold 100 each, want about 50", got[as[3]])
	}
	testkit.Finish(held, nil)
	testkit.Finish(more, nil)
}

// TestSlowStartHoldsNewcomerToItsShare: with slow start on (the default),
// a newcomer that answered fast, against peers whose calls stay in flight,
// is still held to its ramped share of the picks: 10% of its weight,
// 0.1/3.1 of them at first and 0.5/3.5 halfway through the window,
// where it won every pair it entered (TestNewcomerGetsOneCallUntilItAnswers)
// without slow start.
func TestSlowStartHoldsNewcomerToItsShare(t *testing.T) {
	h, as := withNewcomer(t, `{}`)
	a, done := h.Pick()
	for a != as[3] {
		defer done(testkit.Outcome(nil))
		a, done = h.Pick()
	}
	h.Clock.Advance(10 * time.Millisecond)
	done(testkit.Outcome(nil))
	for _, tc := range []struct {
		at    time.Duration
		share float64
	}{{0, 0.1 / 3.1}, {15 * time.Second, 0.5 / 3.5}} {
		h.Clock.Advance(tc.at)
		const n = 3000
		got, held := h.Count(n, true)
		testkit.Finish(held, nil)
		if s := float64(got[as[3]]) / n; s < tc.share*0.8 || s > tc.share*1.1 {
			t.Errorf("newcomer's share %v into its ramp = %.1f%%, want about %.1f%%", tc.at, 100*s, 100*tc.share)
		}
	}
}

// TestSlowStartEndsOnEvidence: a newcomer that answers as fast as its
// peers proves warm and gets its share long before its window is over; one
// that answers ten times slower, as a cold process does, keeps its ramp.
// Its peers answer in 20 ms, 4 calls a millisecond.
func TestSlowStartEndsOnEvidence(t *testing.T) {
	for _, tc := range []struct {
		name    string
		latency time.Duration // the newcomer's
		proved  bool
	}{
		{"as fast as its peers", 20 * time.Millisecond, true},
		{"ten times slower", 200 * time.Millisecond, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, as := withNewcomer(t, `{"slowStart": {"window": "30s"}}`)
			backend := func(a string, _ time.Duration) (time.Duration, error) {
				if a == as[3] {
					return tc.latency, nil
				}
				return 20 * time.Millisecond, nil
			}
			run(h, 4, time.Second, backend)
			s := share(run(h, 4, time.Second, backend), as[3])
			switch {
			case tc.proved && s < 0.2:
				t.Errorf("newcomer's share in its second second = %.1f%%, want about its fair 25%%", 100*s)
			case !tc.proved && s > 0.05:
				// Its ramped share 2 s into a 30 s window: 0.1/3.1.
				t.Errorf("newcomer's share in its second second = %.1f%%, want its ramped 3.2%% or less", 100*s)
			}
			// Peak EWMA alone would keep a slow newcomer's share low:
			// whether its ramp goes on is the balancer's to say.
			if ramping := h.CC.State().Picker.(interface{ Snapshot() *engine.Snapshot }).Snapshot().Ramping(); ramping == tc.proved {
				t.Errorf("the balancer publishes the newcomer as ramping: %v, want %v", ramping, !tc.proved)
			}
		})
	}
}

func TestPickAllocatesNothing(t *testing.T) {
	h := testkit.NewHarness(t, peakewma.Name, `{"slowStart": {"window": "10s"}}`)
	as := testkit.Addrs(10)
	h.Start(as[:5]...)
	if err := h.Update(testkit.Endpoints(as)...); err != nil {
		t.Fatal(err)
	}
	h.Ready(as[5:]...)
	p := h.CC.State().Picker
	allocs := testing.AllocsPerRun(2000, func() {
		res, err := p.Pick(balancer.PickInfo{})
		if err != nil {
			t.Fatal(err)
		}
		res.Done(testkit.Outcome(nil))
	})
	if allocs != 0 {
		t.Errorf("Pick+Done allocates %v times per call, want 0", allocs)
	}
}
