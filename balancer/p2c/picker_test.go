package p2c_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/pickwise/pickwise/balancer/p2c"
	"github.com/pickwise/pickwise/internal/engine"
	"github.com/pickwise/pickwise/internal/testkit"
	"github.com/pickwise/pickwise/lbconfig"
	"google.golang.org/grpc/serviceconfig"

	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/status"
)

func within(t *testing.T, what string, got, want, tol float64) {
	t.Helper()
	if math.Abs(got-want) > tol {
		t.Errorf("%s = %.4f, want %.4f ± %.4f", what, got, want, tol)
	}
}

func TestPickUniformWhenIdle(t *testing.T) {
	h := newHarness(t, `{}`)
	as := addrs(10)
	h.Start(as...)
	// Every RPC finishes before the next pick, so every pair ties and the
	// first draw wins: picks must be uniform.
	const n = 20000
	got, _ := h.Count(n, false)
	for _, a := range as {
		within(t, "share of "+a, float64(got[a])/n, 0.1, 0.01)
	}
}

func TestPickBalancesInFlight(t *testing.T) {
	h := newHarness(t, `{}`)
	as := addrs(10)
	h.Start(as...)
	got, pending := h.Count(1000, true)
	defer finish(pending, nil)
	lo, hi := math.MaxInt, 0
	for _, a := range as {
		lo, hi = min(lo, got[a]), max(hi, got[a])
	}
	// Two choices keep the gap tiny (O(log log n)); random placement of
	// 1,000 RPCs would spread about ±30.
	if hi-lo > 4 {
		t.Errorf("in-flight spread %d..%d, want a gap of at most 4: %v", lo, hi, got)
	}
}

func TestPickChoiceCountCoversAll(t *testing.T) {
	h := newHarness(t, `{"choiceCount": 10}`)
	as := addrs(10)
	h.Start(as...)
	got, pending := h.Count(1000, true)
	defer finish(pending, nil)
	for _, a := range as {
		if got[a] != 100 {
			t.Errorf("%s got %d in-flight RPCs, want exactly 100 when every endpoint is a candidate", a, got[a])
		}
	}
}

func TestPickChoiceCountThree(t *testing.T) {
	h := newHarness(t, `{"choiceCount": 3}`)
	as := addrs(100)
	h.Start(as...)
	got, pending := h.Count(2000, true)
	defer finish(pending, nil)
	for _, a := range as {
		if got[a] < 17 || got[a] > 23 {
			t.Errorf("%s got %d in-flight RPCs, want 20 ± 3 with three choices", a, got[a])
		}
	}
}

func TestPickWeights(t *testing.T) {
	h := newHarness(t, `{}`)
	as := addrs(4)
	weights := []uint32{1, 2, 3, 4}
	if err := h.Update(endpoint(as[0], 1), endpoint(as[1], 2), endpoint(as[2], 3), endpoint(as[3], 4)); err != nil {
		t.Fatal(err)
	}
	h.Ready(as...)
	const n = 2000
	got, pending := h.Count(n, true)
	defer finish(pending, nil)
	// With RPCs held open, the cost (inFlight+1)/weight equalizes, so
	// in-flight counts follow the weights.
	for i, a := range as {
		within(t, fmt.Sprintf("share of weight-%d endpoint", weights[i]), float64(got[a])/n, float64(weights[i])/10, 0.02)
	}
}

func TestPickActiveRequestBias(t *testing.T) {
	t.Run("bias 0 places in proportion to weight", func(t *testing.T) {
		for _, tc := range []struct {
			name    string
			weights []uint32
			choices int
			hold    bool // calls held in flight, which bias 0 must not read
		}{
			{"1:3", []uint32{1, 3}, 2, false},
			{"1:3 held", []uint32{1, 3}, 2, true},
			{"1:2:3:4", []uint32{1, 2, 3, 4}, 2, false},
			{"1:2:3:4 held, three choices", []uint32{1, 2, 3, 4}, 3, true},
			{"1:1:1:1:1:5", []uint32{1, 1, 1, 1, 1, 5}, 4, false},
		} {
			t.Run(tc.name, func(t *testing.T) {
				h := newHarness(t, fmt.Sprintf(`{"activeRequestBias": 0, "choiceCount": %d}`, tc.choices))
				as := addrs(len(tc.weights))
				total := 0
				var eps []resolver.Endpoint
				for i, w := range tc.weights {
					eps = append(eps, endpoint(as[i], w))
					total += int(w)
				}
				if err := h.Update(eps...); err != nil {
					t.Fatal(err)
				}
				h.Ready(as...)
				const n = 10000
				got, pending := h.Count(n, tc.hold)
				defer finish(pending, nil)
				for i, a := range as {
					within(t, fmt.Sprintf("share of weight-%d endpoint", tc.weights[i]), float64(got[a])/n, float64(tc.weights[i])/float64(total), 0.02)
				}
			})
		}
	})
	t.Run("bias 0 with equal weights compares loads", func(t *testing.T) {
		// As in Envoy, the bias applies when weights differ: equal
		// weights leave nothing to place by, and the calls go by load.
		h := newHarness(t, `{"activeRequestBias": 0}`)
		as := addrs(10)
		h.Start(as...)
		got, pending := h.Count(1000, true)
		defer finish(pending, nil)
		lo, hi := math.MaxInt, 0
		for _, a := range as {
			lo, hi = min(lo, got[a]), max(hi, got[a])
		}
		if hi-lo > 4 {
			t.Errorf("in-flight spread %d..%d, want a gap of at most 4: %v", lo, hi, got)
		}
	})
	t.Run("bias 2 favours load over weight", func(t *testing.T) {
		h := newHarness(t, `{"activeRequestBias": 2}`)
		as := addrs(2)
		if err := h.Update(endpoint(as[0], 1), endpoint(as[1], 3)); err != nil {
			t.Fatal(err)
		}
		h.Ready(as...)
		got, pending := h.Count(1000, true)
		defer finish(pending, nil)
		// (a+1)^2/1 = (b+1)^2/3 at balance, so b/a tends to sqrt(3).
		within(t, "in-flight ratio heavy/light", float64(got[as[1]])/float64(got[as[0]]), math.Sqrt(3), 0.05)
	})
}

// weighted updates h with endpoints as of the given weights and makes
// them READY.
func weighted(t *testing.T, h *harness, as []string, weights ...uint32) {
	t.Helper()
	eps := make([]resolver.Endpoint, len(as))
	for i, a := range as {
		eps[i] = endpoint(a, weights[i])
	}
	if err := h.Update(eps...); err != nil {
		t.Fatal(err)
	}
	h.Ready(as...)
}

// shares runs n picks on h, each call ending at once with err if it went
// to bad, and returns each endpoint's share of them.
func shares(h *harness, n int, bad string, err error) map[string]float64 {
	got := map[string]float64{}
	for range n {
		a, done := h.Pick()
		got[a] += 1.0 / float64(n)
		if a == bad {
			done(outcome(err))
			continue
		}
		done(outcome(nil))
	}
	return got
}

// TestPickBiasZeroAvoidsFailing: placing by weight keeps the failure
// check, ejection and its probes: a failing endpoint of weight 3 loses its
// share, the others take it in proportion to their weights, and it gets
// its share back once it recovers.
func TestPickBiasZeroAvoidsFailing(t *testing.T) {
	as := addrs(4)
	failure := status.Error(codes.Internal, "boom")
	// The others' shares without the failing endpoint: weights 1, 1, 3.
	healthy := func(t *testing.T, got map[string]float64) {
		t.Helper()
		rest := 1 - got[as[0]]
		for i, w := range []float64{1, 1, 3} {
			within(t, "share of the rest taken by "+as[i+1], got[as[i+1]]/rest, w/5, 0.03)
		}
	}
	t.Run("failure penalty", func(t *testing.T) {
		h := newHarness(t, `{"activeRequestBias": 0, "ejection": {"enabled": false}}`)
		weighted(t, h, as, 3, 1, 1, 3)
		shares(h, 1000, as[0], failure)
		got := shares(h, 10000, as[0], failure)
		if got[as[0]] > 0.03 {
			t.Errorf("share of a failing endpoint of weight 3 in 8 = %.2f%%, want below 3%%", 100*got[as[0]])
		}
		healthy(t, got)
	})
	t.Run("ejection", func(t *testing.T) {
		h := newHarness(t, `{"activeRequestBias": 0}`)
		weighted(t, h, as, 3, 1, 1, 3)
		shares(h, 1000, as[0], failure)
		h.Clock.Advance(100 * time.Millisecond) // the health tick ejects it
		got := shares(h, 10000, as[0], failure)
		if got[as[0]] > 0.01 {
			t.Errorf("share of a failing endpoint of weight 3 in 8 = %.2f%%, want below 1%%", 100*got[as[0]])
		}
		healthy(t, got)
		// Recovered: its probes succeed and it is readmitted.
		for range 20 {
			h.Clock.Advance(100 * time.Millisecond)
			shares(h, 50, "", nil)
		}
		got = shares(h, 10000, "", nil)
		for i, w := range []float64{3, 1, 1, 3} {
			within(t, "share after recovery of "+as[i], got[as[i]], w/8, 0.02)
		}
	})
}

// TestPickBiasZeroRetriesGoElsewhere: placing by weight, the attempts of
// one call still avoid the endpoints their earlier attempts used, even the
// one that holds most of the weight.
func TestPickBiasZeroRetriesGoElsewhere(t *testing.T) {
	h := newHarness(t, `{"activeRequestBias": 0}`)
	as := addrs(4)
	weighted(t, h, as, 1, 1, 1, 5)
	for range 200 {
		finish(h.PickApart(engine.WithAttempts(context.Background()), 4), nil)
	}
}

// TestSlowStartRampByWeight: with activeRequestBias 0 a newcomer's share
// follows its ramped weight, and the others keep theirs in proportion.
func TestSlowStartRampByWeight(t *testing.T) {
	h := newHarness(t, `{"activeRequestBias": 0, "slowStart": {"window": "10s", "aggression": 1, "minWeightPercent": 10, "timeOnly": true}}`)
	as := addrs(3)
	weighted(t, h, as[:2], 1, 3)
	h.Serve()
	// The third endpoint, of weight 2, joins after the first call: it
	// ramps.
	weighted(t, h, as, 1, 3, 2)
	check := func(f float64) {
		t.Helper()
		got := shares(h, 10000, "", nil)
		ramped := []float64{1, 3, 2 * f}
		for i, w := range ramped {
			within(t, fmt.Sprintf("share of %s at factor %v", as[i], f), got[as[i]], w/(4+2*f), 0.015)
		}
	}
	check(0.1)
	h.Clock.Advance(5 * time.Second)
	check(0.5)
	h.Clock.Advance(5 * time.Second)
	check(1)
}

func TestSlowStartRamp(t *testing.T) {
	// By time alone: the held calls end with no time passed, which shows
	// the newcomer as fast as its peers and would end its ramp.
	h := newHarness(t, `{"slowStart": {"window": "10s", "aggression": 1, "minWeightPercent": 10, "timeOnly": true}}`)
	as := addrs(3)
	h.Start(as[:2]...)
	h.Serve()

	// The third endpoint joins after the first call: it ramps.
	if err := h.Update(endpoint(as[0], 0), endpoint(as[1], 0), endpoint(as[2], 0)); err != nil {
		t.Fatal(err)
	}
	h.Ready(as[2])

	share := func() float64 {
		const n = 2100
		got, pending := h.Count(n, true)
		finish(pending, nil)
		return float64(got[as[2]]) / n
	}
	// With calls held, the newcomer would take every pick its in-flight
	// count is below its peers': slow start holds it to factor / (2 +
	// factor).
	within(t, "newcomer share at 0s (factor 0.1)", share(), 0.1/2.1, 0.01)
	h.Clock.Advance(5 * time.Second)
	within(t, "newcomer share at 5s (factor 0.5)", share(), 0.5/2.5, 0.015)

	updates := h.CC.Updates()
	h.Clock.Advance(5 * time.Second)
	if h.CC.Updates() == updates {
		t.Error("no new picker when the ramp ended")
	}
	if p := h.Clock.Pending(); p != 0 {
		t.Errorf("%d timers pending after the ramp ended, want 0", p)
	}
	within(t, "newcomer share after the window", share(), 1.0/3, 0.015)
}

// joinLoaded starts pickwise_p2c under cfg over eight endpoints holding
// perPeer calls each, then adds a ninth and makes it READY: the newcomer
// is the last of the returned addresses. The held calls end with the
// test.
func joinLoaded(t *testing.T, cfg string, perPeer int) (*harness, []string) {
	t.Helper()
	h := newHarness(t, cfg)
	as := addrs(9)
	h.Start(as[:8]...)
	h.Serve()
	_, held := h.Count(8*perPeer, true)
	t.Cleanup(func() { finish(held, nil) })
	if err := h.Update(endpointsOf(as)...); err != nil {
		t.Fatal(err)
	}
	h.Ready(as[8])
	return h, as
}

// TestSlowStartRampsInEveryRegime: a newcomer's share of the picks
// follows its ramp whatever the loads. Against peers that each hold many
// long-lived calls, where a newcomer with none is cheaper at any factor,
// it is held to 0.1/8.1 of the picks at first (it took every pair it was
// drawn into, about 2/9, when its cost was divided by the factor), and to
// 0.5/8.5 halfway through. Among idle candidates, where every cost ties,
// it gets the same shares (it got none until its ramp ended). After the
// window it competes as the others do.
func TestSlowStartRampsInEveryRegime(t *testing.T) {
	for _, tc := range []struct {
		name     string
		peerLoad int // calls each old endpoint holds
		after    float64
	}{
		{"long-lived calls", 400, 2.0 / 9},
		{"idle", 0, 1.0 / 9},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// By time alone: calls here end at once, which shows the
			// newcomer as fast as its peers and would end its ramp.
			h, as := joinLoaded(t, `{"slowStart": {"window": "10s", "timeOnly": true}}`, tc.peerLoad)
			share := func() float64 {
				// Each call ends at once: the loads stay as they are.
				const n = 9000
				got, _ := h.Count(n, false)
				return float64(got[as[8]]) / n
			}
			within(t, "newcomer's share as its ramp starts", share(), 0.1/8.1, 0.004)
			h.Clock.Advance(5 * time.Second)
			within(t, "newcomer's share halfway through its ramp", share(), 0.5/8.5, 0.006)
			h.Clock.Advance(5 * time.Second)
			within(t, "newcomer's share after its ramp", share(), tc.after, 0.015)
		})
	}
}

// TestSlowStartEndsOnEvidence: a ramp ends once the newcomer's answers
// show it warm, and not before, nor otherwise. Calls go one at a time,
// each answered after its endpoint's latency on the test's clock: a
// newcomer answering as fast as its peers proves warm within its first
// answers and gets its fair share long before its 30 s window is over; one
// ten times slower, as a cold process is, keeps its ramp, and so does one
// whose ramp goes by time alone (timeOnly) or whose calls fail fast.
func TestSlowStartEndsOnEvidence(t *testing.T) {
	const peerLatency = 2 * time.Millisecond
	failure := status.Error(codes.Unavailable, "backend down")
	for _, tc := range []struct {
		name     string
		cfg      string
		latency  time.Duration // the newcomer's
		err      error         // the newcomer's answers' error
		provedBy int           // picks within which the ramp ends; 0: never
	}{
		{"as fast as its peers", `{}`, peerLatency, nil, 3000},
		{"a little slower", `{}`, peerLatency * 5 / 4, nil, 3000},
		{"ten times slower", `{}`, 10 * peerLatency, nil, 0},
		{"fast, timeOnly", `{"slowStart": {"timeOnly": true}}`, peerLatency, nil, 0},
		{"failing fast", `{"ejection": {"enabled": false}}`, peerLatency / 10, failure, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, as := joinLoaded(t, tc.cfg, 0)
			newcomer := as[8]
			// share runs n calls and returns the newcomer's share.
			share := func(n int) float64 {
				got := 0
				for range n {
					a, done := h.Pick()
					info := outcome(nil)
					if a == newcomer {
						got++
						h.Clock.Advance(tc.latency)
						info = outcome(tc.err)
					} else {
						h.Clock.Advance(peerLatency)
					}
					done(info)
				}
				return float64(got) / float64(n)
			}
			ramping := func() bool {
				return h.CC.State().Picker.(interface{ Snapshot() *engine.Snapshot }).Snapshot().Ramping()
			}
			if tc.provedBy > 0 {
				share(tc.provedBy)
				if s := share(9000); s < 0.09 {
					t.Errorf("after its answers: newcomer's share %.2f%%, want its fair 11.1%%", 100*s)
				}
				if ramping() {
					t.Error("the balancer still publishes the newcomer as ramping after it proved warm")
				}
				return
			}
			// At most 16 s into a 30 s ramp: a factor of about 0.53 at
			// the end, a share of 0.53/8.53, 6.2%.
			if s := share(6000); s > 0.05 {
				t.Errorf("newcomer's share %.2f%% over its first 6,000 calls, want its ramped share, under 5%%", 100*s)
			}
			if !ramping() {
				t.Error("the balancer no longer publishes the newcomer as ramping, 16 s into its 30 s window")
			}
		})
	}
}

// TestSlowStartRelief: a client that sends few calls gets too few
// answers from a ramping endpoint to prove it warm (its ramped share, a
// call every second or two), but when its peers are overloaded (their
// calls wait in queues, and the client's timed one has waited twice as
// long as the newcomer's slowest answer) one answer ends the ramp; with
// peers that answer as fast as it does, one answer leaves it ramping.
func TestSlowStartRelief(t *testing.T) {
	testkit.CheckRampRelief(t, 100, func(t *testing.T) (*harness, string) {
		h, as := joinLoaded(t, `{}`, 0)
		return h, as[8]
	})
}

// TestSlowStartEvidenceIsPerRamp: a backend proved warm in one ramp is
// ramped again when its connection fails and comes back, as a restarted
// process would be, and its evidence starts over with the new ramp: one
// fast answer, which with the first ramp's answers would make five, does
// not end it; and come back ten times slower, it keeps its ramp.
func TestSlowStartEvidenceIsPerRamp(t *testing.T) {
	const latency = 2 * time.Millisecond
	h, as := joinLoaded(t, `{}`, 0)
	newcomer := as[8]
	ramping := func() bool {
		return h.CC.State().Picker.(interface{ Snapshot() *engine.Snapshot }).Snapshot().Ramping()
	}
	calls := func(n int, newcomerLatency time.Duration) (got int) {
		for range n {
			a, done := h.Pick()
			if a == newcomer {
				got++
				h.Clock.Advance(newcomerLatency)
			} else {
				h.Clock.Advance(latency)
			}
			done(outcome(nil))
		}
		return got
	}
	calls(3000, latency)
	if ramping() {
		t.Fatal("the newcomer did not prove warm")
	}
	h.Down(newcomer, errors.New("connection refused"))
	h.Up(newcomer)
	if !ramping() {
		t.Fatal("no ramp after the newcomer's connection failed and came back")
	}
	// One fast answer in the new ramp is not five.
	for calls(1, latency) == 0 {
	}
	h.Clock.Advance(time.Second) // past any republish
	if !ramping() {
		t.Fatal("one answer in its new ramp proved the newcomer warm: the first ramp's answers counted")
	}
	h.Down(newcomer, errors.New("connection refused"))
	h.Up(newcomer)
	// About 7 s into the new 30 s ramp: a factor of 0.25 at most, a
	// share under 0.25/8.25, 3%.
	if s := float64(calls(3000, 10*latency)) / 3000; s > 0.035 {
		t.Errorf("share after it came back ten times slower = %.2f%%, want its ramped share, about 3%% at most", 100*s)
	}
	if !ramping() {
		t.Error("the newcomer, back ten times slower, no longer ramps: its first ramp's answers proved it")
	}
}

// TestSlowStartEvidenceActsAtOnce: a picker stops holding an endpoint to
// its ramp as soon as the endpoint proves warm, before the balancer
// publishes the picker that no longer lists it as ramping.
func TestSlowStartEvidenceActsAtOnce(t *testing.T) {
	h, as := joinLoaded(t, `{}`, 0)
	newcomer := as[8]
	p := h.CC.State().Picker
	updates := h.CC.Updates()
	// Calls answered in 0.5 µs: the newcomer's five opening calls prove
	// it within its first picks, and a republish waits 1 ms, almost twice
	// the 0.58 ms of picks here.
	step := 500 * time.Nanosecond
	pick := func() string {
		res, err := p.Pick(balancer.PickInfo{})
		if err != nil {
			t.Fatal(err)
		}
		h.Clock.Advance(step)
		res.Done(outcome(nil))
		return res.SubConn.(*testkit.SubConn).Addr()
	}
	for range 250 { // 0.125 ms
		pick()
	}
	got := 0
	for range 900 { // 0.45 ms more
		if pick() == newcomer {
			got++
		}
	}
	if h.CC.Updates() != updates {
		t.Fatal("the balancer published a new picker before the measured picks; the test measures the old one")
	}
	if s := float64(got) / 900; s < 0.08 {
		t.Errorf("the same picker's share to the newcomer after it proved warm = %.2f%%, want its fair 11.1%%", 100*s)
	}
}

// TestSlowStartShareWithMovingClock: the ramp's share applies to the
// picks to come as the factor grows, not to every pick the picker has
// made: with the clock moving on each pick, a newcomer against peers
// holding long-lived calls takes its share of the moment, second by
// second (once counted against all picks so far, it took twice that).
func TestSlowStartShareWithMovingClock(t *testing.T) {
	// By time alone: each call here ends at once, which shows the
	// newcomer as fast as its peers, and would end its ramp.
	h, as := joinLoaded(t, `{"slowStart": {"window": "10s", "timeOnly": true}}`, 400)
	const perSecond = 2000
	for second := 1; second <= 8; second++ {
		got := 0
		for range perSecond {
			a, done := h.Pick()
			if a == as[8] {
				got++
			}
			done(outcome(nil))
			h.Clock.Advance(time.Second / perSecond)
		}
		// The factor over this second runs from (second-1)/10 to
		// second/10, at least 0.1: its share at the middle.
		f := max(0.1, (float64(second)-0.5)/10)
		want := f / (8 + f)
		if s := float64(got) / perSecond; s < 0.75*want || s > 1.25*want {
			t.Errorf("second %d of the ramp: newcomer's share %.2f%%, want about %.2f%%", second, 100*s, 100*want)
		}
	}
}

// TestSlowStartShareAcrossPickers: what a ramping endpoint earned and
// took is its own, from the start of its ramp, and outlives the picker:
// with a new picker every 50 picks (a peer's weight changing back and
// forth), the newcomer still takes its ramped share, not a pick more for
// each new picker.
func TestSlowStartShareAcrossPickers(t *testing.T) {
	// By time alone, as in TestSlowStartRampsInEveryRegime.
	h, as := joinLoaded(t, `{"slowStart": {"window": "30s", "timeOnly": true}}`, 400)
	eps := endpointsOf(as)
	const rounds, per = 100, 50
	got := 0
	for r := range rounds {
		before := h.CC.Updates()
		eps[0] = endpoint(as[0], uint32(1+r%2))
		if err := h.Update(eps...); err != nil {
			t.Fatal(err)
		}
		if h.CC.Updates() == before {
			t.Fatal("a peer's new weight published no new picker")
		}
		n, _ := h.Count(per, false)
		got += n[as[8]]
	}
	// Its share at factor 0.1 against 8 peers of weight 1 or 2 (8.1 to
	// 9.1): 1.1% to 1.2% of the picks.
	if s := float64(got) / (rounds * per); s < 0.008 || s > 0.016 {
		t.Errorf("newcomer's share with a new picker every %d picks = %.2f%%, want about 1.2%%", per, 100*s)
	}
}

// TestSlowStartKeepsFailureCheck: when every endpoint ramps (the client
// lost every connection and got them back), each is over its share most
// of the time and the pick falls back to them; a backend failing every
// call is still passed over, as without slow start.
func TestSlowStartKeepsFailureCheck(t *testing.T) {
	h := newHarness(t, `{"slowStart": {"window": "30s"}, "ejection": {"enabled": false}}`)
	as := addrs(10)
	h.Start(as...)
	for _, a := range as {
		h.Down(a, errors.New("connection reset"))
	}
	for _, a := range as {
		h.Up(a)
	}
	bad := as[0]
	failure := status.Error(codes.Unavailable, "backend down")
	const n = 5000
	got := 0
	for range n {
		a, done := h.Pick()
		if a == bad {
			got++
			done(outcome(failure))
			continue
		}
		done(outcome(nil))
	}
	if s := float64(got) / n; s > 0.03 {
		t.Errorf("failing backend's share with the whole fleet ramping = %.2f%%, want under 3%%", 100*s)
	}
}

func TestSlowStartAggression(t *testing.T) {
	h := newHarness(t, `{"slowStart": {"window": "10s", "aggression": 2, "minWeightPercent": 1}}`)
	as := addrs(2)
	h.Start(as[0])
	h.Serve()
	if err := h.Update(endpoint(as[0], 0), endpoint(as[1], 0)); err != nil {
		t.Fatal(err)
	}
	h.Ready(as[1])
	h.Clock.Advance(2500 * time.Millisecond)
	const n = 3000
	got, pending := h.Count(n, true)
	defer finish(pending, nil)
	// factor = 0.25^(1/2) = 0.5: share 0.5/1.5.
	within(t, "newcomer share at a quarter of the window", float64(got[as[1]])/n, 1.0/3, 0.01)
}

func TestSlowStartInitialFleetDoesNotRamp(t *testing.T) {
	h := newHarness(t, `{"slowStart": {"window": "10s"}}`)
	as := addrs(4)
	h.Start(as...)
	got, pending := h.Count(400, true)
	defer finish(pending, nil)
	for _, a := range as {
		within(t, "share of initial endpoint "+a, float64(got[a])/400, 0.25, 0.01)
	}
	if p := h.Clock.Pending(); p != 0 {
		t.Errorf("%d ramp timers pending for the initial fleet, want 0", p)
	}
}

// TestSlowStartInitialFleetOverTwoUpdates: an endpoint that joins after
// the channel is READY but before its first call is part of the initial
// fleet, as a resolver that sends its list in two updates makes it; one
// that joins after the first call ramps.
func TestSlowStartInitialFleetOverTwoUpdates(t *testing.T) {
	h := newHarness(t, `{"slowStart": {"window": "10s", "timeOnly": true}}`)
	as := addrs(3)
	h.Start(as[0])
	if err := h.Update(endpointsOf(as[:2])...); err != nil {
		t.Fatal(err)
	}
	h.Ready(as[1])
	got, pending := h.Count(400, true)
	finish(pending, nil)
	within(t, "share of the endpoint of the second update", float64(got[as[1]])/400, 0.5, 0.01)
	if err := h.Update(endpointsOf(as)...); err != nil {
		t.Fatal(err)
	}
	h.Ready(as[2])
	got, pending = h.Count(2100, true)
	finish(pending, nil)
	within(t, "share of the endpoint that joined after the first call", float64(got[as[2]])/2100, 0.1/2.1, 0.01)
}

func TestSlowStartAfterConnectionFailure(t *testing.T) {
	h := newHarness(t, `{"slowStart": {"window": "10s"}}`)
	as := addrs(2)
	h.Start(as...)
	h.Down(as[1], errors.New("connection refused"))
	h.Up(as[1])

	const n = 1100
	got, pending := h.Count(n, true)
	defer finish(pending, nil)
	within(t, "share of the recovered endpoint", float64(got[as[1]])/n, 0.1/1.1, 0.01)
}

func TestSlowStartNotAfterGracefulReconnect(t *testing.T) {
	h := newHarness(t, `{"slowStart": {"window": "10s"}}`)
	as := addrs(2)
	h.Start(as...)
	// A GOAWAY moves a READY SubConn to IDLE and the reconnect succeeds at
	// once: the same warm process.
	sc := h.Lose(as[1])
	sc.UpdateState(balancer.SubConnState{ConnectivityState: connectivity.Connecting})
	sc.UpdateState(balancer.SubConnState{ConnectivityState: connectivity.Ready})
	if err := h.CC.WaitForState(h.Ctx, connectivity.Ready); err != nil {
		t.Fatal(err)
	}
	got, pending := h.Count(400, true)
	defer finish(pending, nil)
	within(t, "share of the reconnected endpoint", float64(got[as[1]])/400, 0.5, 0.01)
}

func TestEndpointsRemovedAndAdded(t *testing.T) {
	// Slow start by time alone: calls here end at once, which would prove
	// the added endpoint warm (TestSlowStartEndsOnEvidence).
	h := newHarness(t, `{"slowStart": {"timeOnly": true}}`)
	as := addrs(4)
	h.Start(as[:3]...)
	removed := h.CC.SubConnFor(as[2])

	if err := h.Update(endpoint(as[0], 0), endpoint(as[1], 0)); err != nil {
		t.Fatal(err)
	}
	got, _ := h.Count(1000, false)
	if got[as[2]] != 0 {
		t.Errorf("removed endpoint got %d picks", got[as[2]])
	}
	// Its connection is kept for its return, then closed (parked_test.go).
	if removed.IsShutdown() {
		t.Error("removed endpoint's SubConn was shut down before removalGrace")
	}
	h.Clock.Advance(lbconfig.DefaultRemovalGrace)
	if !removed.IsShutdown() {
		t.Error("removed endpoint's SubConn was not shut down after removalGrace")
	}

	if err := h.Update(endpoint(as[0], 0), endpoint(as[1], 0), endpoint(as[3], 0)); err != nil {
		t.Fatal(err)
	}
	h.Ready(as[3])
	// It joined after the first call: slow start (on by default) holds
	// it to 10% of its weight, then lets it compete on equal terms.
	got, _ = h.Count(3000, false)
	within(t, "share of the added endpoint as its ramp starts", float64(got[as[3]])/3000, 0.1/2.1, 0.01)
	h.Clock.Advance(lbconfig.DefaultSlowStartWindow)
	got, _ = h.Count(3000, false)
	within(t, "share of the added endpoint after its ramp", float64(got[as[3]])/3000, 1.0/3, 0.04)
}

func TestEndpointFlapping(t *testing.T) {
	h := newHarness(t, `{}`)
	as := addrs(3)
	h.Start(as...)
	for round := 0; round < 5; round++ {
		h.Down(as[1], errors.New("reset"))
		got, _ := h.Count(300, false)
		if got[as[1]] != 0 {
			t.Fatalf("round %d: endpoint in TRANSIENT_FAILURE got %d picks", round, got[as[1]])
		}
		h.Up(as[1])
		got, _ = h.Count(300, false)
		if got[as[1]] == 0 {
			t.Fatalf("round %d: endpoint back to READY got no picks", round)
		}
	}
}

func TestNoReadyEndpointQueues(t *testing.T) {
	h := newHarness(t, `{}`)
	as := addrs(2)
	if err := h.Update(endpoint(as[0], 0), endpoint(as[1], 0)); err != nil {
		t.Fatal(err)
	}
	for _, a := range as {
		sc, err := h.CC.WaitForSubConn(h.Ctx, a)
		if err != nil {
			t.Fatal(err)
		}
		sc.UpdateState(balancer.SubConnState{ConnectivityState: connectivity.Connecting})
	}
	if err := h.CC.WaitForState(h.Ctx, connectivity.Connecting); err != nil {
		t.Fatal(err)
	}
	if _, err := h.CC.State().Picker.Pick(balancer.PickInfo{}); !errors.Is(err, balancer.ErrNoSubConnAvailable) {
		t.Fatalf("Pick while CONNECTING: %v, want ErrNoSubConnAvailable so RPCs queue", err)
	}
}

func TestAllTransientFailure(t *testing.T) {
	h := newHarness(t, `{}`)
	as := addrs(3)
	h.Start(as...)
	for _, a := range as {
		h.Down(a, errors.New("connection refused by "+a))
	}
	if err := h.CC.WaitForState(h.Ctx, connectivity.TransientFailure); err != nil {
		t.Fatal(err)
	}
	_, err := h.CC.State().Picker.Pick(balancer.PickInfo{})
	if err == nil || !strings.Contains(err.Error(), "pickwise_p2c: none of 3 endpoints is READY") || !strings.Contains(err.Error(), "connection refused by") {
		t.Fatalf("Pick error = %v, want one naming the policy and the connection error", err)
	}
	// A status error would end wait-for-ready RPCs instead of queueing them.
	if _, isStatus := status.FromError(err); isStatus {
		t.Errorf("Pick error %v is a status error; wait-for-ready RPCs would fail", err)
	}
}

func TestEmptyEndpointList(t *testing.T) {
	testkit.CheckEmptyEndpointList(t, p2c.Name)
}

func TestDoneAfterEndpointRemoved(t *testing.T) {
	h := newHarness(t, `{}`)
	as := addrs(2)
	h.Start(as...)
	_, pending := h.Count(10, true)
	if err := h.Update(endpoint(as[0], 0)); err != nil {
		t.Fatal(err)
	}
	finish(pending, status.Error(codes.Unavailable, "connection closed"))
	got, _ := h.Count(10, false)
	if got[as[0]] != 10 {
		t.Fatalf("picks after removal: %v", got)
	}
}

// blackHoleShare runs a small closed-loop simulation over the picker: the
// first of n endpoints fails every RPC at once, the others hold each RPC
// until concurrency newer ones have started. It returns the failing
// endpoint's share of picks.
func blackHoleShare(t *testing.T, cfg string, n, concurrency, picks int) float64 {
	h := newHarness(t, cfg)
	as := addrs(n)
	h.Start(as...)
	var queue []func(balancer.DoneInfo)
	bad := 0
	for i := 0; i < picks; i++ {
		a, done := h.Pick()
		if a == as[0] {
			bad++
			done(outcome(status.Error(codes.Unavailable, "dependency down")))
			continue
		}
		queue = append(queue, done)
		if len(queue) > concurrency {
			queue[0](outcome(nil))
			queue = queue[1:]
		}
	}
	finish(queue, nil)
	return float64(bad) / float64(picks)
}

func TestFailurePenaltyBlackHole(t *testing.T) {
	off := blackHoleShare(t, `{"failurePenalty": {"enabled": false}}`, 10, 30, 20000)
	on := blackHoleShare(t, `{}`, 10, 30, 20000)
	t.Logf("black-hole share over the picker: penalty off %.1f%%, on %.2f%%", 100*off, 100*on)
	// Plain P2C sends the black hole about 1-(9/10)^2 = 19%: it is in a
	// random pair that often and wins almost every pair it is in.
	within(t, "black-hole share without the penalty", off, 0.19, 0.03)
	if on > 0.01 {
		t.Errorf("black-hole share with the penalty = %.2f%%, want at most 1%%", 100*on)
	}
}

func TestFailurePenaltyIgnoresClientErrors(t *testing.T) {
	for _, code := range []codes.Code{codes.InvalidArgument, codes.NotFound, codes.Canceled, codes.PermissionDenied, codes.FailedPrecondition} {
		t.Run(code.String(), func(t *testing.T) {
			h := newHarness(t, `{}`)
			as := addrs(2)
			h.Start(as...)
			for i := 0; i < 200; i++ {
				a, done := h.Pick()
				var err error
				if a == as[0] {
					err = status.Error(code, "caller's fault")
				}
				done(outcome(err))
			}
			got, pending := h.Count(400, true)
			defer finish(pending, nil)
			within(t, "share of the endpoint returning client errors", float64(got[as[0]])/400, 0.5, 0.01)
		})
	}
}

// failingRun makes picks that finish at once; those on the first endpoint
// fail while *failing is set. It returns that endpoint's share.
func failingRun(h *harness, as []string, failing *bool, picks int) float64 {
	bad := 0
	for i := 0; i < picks; i++ {
		a, done := h.Pick()
		var err error
		if a == as[0] {
			bad++
			if *failing {
				err = status.Error(codes.Internal, "boom")
			}
		}
		done(outcome(err))
	}
	return float64(bad) / float64(picks)
}

func TestFailingEndpointRecoversFromProbes(t *testing.T) {
	h := newHarness(t, `{}`)
	as := addrs(4)
	h.Start(as...)
	failing := true
	failingRun(h, as, &failing, 1000)
	if share := failingRun(h, as, &failing, 4000); share > 0.01 {
		t.Errorf("share of a failing endpoint = %.2f%%, want below 1%%", 100*share)
	}

	// Still broken: it is ejected, and its probes, one every 300ms, fail,
	// so time alone never brings it back.
	for i := 0; i < 20; i++ {
		h.Clock.Advance(time.Second)
		if share := failingRun(h, as, &failing, 500); share > 0.01 {
			t.Errorf("second %d: share of a still-failing endpoint = %.2f%%, want below 1%%", i, 100*share)
		}
	}

	// Recovered: the next probes succeed and it is readmitted.
	failing = false
	for i := 0; i < 10; i++ {
		h.Clock.Advance(100 * time.Millisecond)
		failingRun(h, as, &failing, 50)
	}
	within(t, "share after recovery", failingRun(h, as, &failing, 4000), 0.25, 0.03)
	// Nothing is failing or ejected: the health timer stops, and the flush
	// the calls above armed is due within a second and not rearmed.
	h.Clock.Advance(time.Second)
	if p := h.Clock.Pending(); p != 0 {
		t.Errorf("%d timers pending once every failure was forgiven, want 0", p)
	}
}

func TestFailuresBeforeTheServerDoNotCount(t *testing.T) {
	h := newHarness(t, `{}`)
	as := addrs(2)
	h.Start(as...)
	for i := 0; i < 200; i++ {
		a, done := h.Pick()
		if a == as[0] {
			// A stream refused on a draining connection: nothing was sent.
			done(balancer.DoneInfo{Err: status.Error(codes.Unavailable, "transport is closing")})
			continue
		}
		done(outcome(nil))
	}
	got, pending := h.Count(400, true)
	defer finish(pending, nil)
	within(t, "share of the endpoint whose attempts never reached it", float64(got[as[0]])/400, 0.5, 0.01)
}

func TestFailurePenaltyOffForgetsFailures(t *testing.T) {
	h := newHarness(t, `{}`)
	as := addrs(2)
	h.Start(as...)
	failing := true
	failingRun(h, as, &failing, 500)
	failing = false
	// Turn the penalty off, then on again: the old failures are gone.
	off, err := p2cConfig(`{"failurePenalty": {"enabled": false}}`)
	if err != nil {
		t.Fatal(err)
	}
	h.Cfg = off
	if err := h.Update(endpointsOf(as)...); err != nil {
		t.Fatal(err)
	}
	if h.Cfg, err = p2cConfig(`{}`); err != nil {
		t.Fatal(err)
	}
	if err := h.Update(endpointsOf(as)...); err != nil {
		t.Fatal(err)
	}
	within(t, "share after the penalty was reset", failingRun(h, as, &failing, 4000), 0.5, 0.03)
}

func TestPickAllocatesNothing(t *testing.T) {
	cases := map[string]string{
		"default":    `{}`,
		"slow start": `{"slowStart": {"window": "10s"}}`,
		"bias 1.5":   `{"activeRequestBias": 1.5, "choiceCount": 4}`,
		"bias 0":     `{"activeRequestBias": 0, "choiceCount": 3}`,
	}
	for name, cfg := range cases {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, cfg)
			as := addrs(10)
			h.Start(as[:5]...)
			var eps []resolver.Endpoint
			for i, a := range as {
				eps = append(eps, endpoint(a, uint32(1+i%3)))
			}
			if err := h.Update(eps...); err != nil {
				t.Fatal(err)
			}
			h.Ready(as[5:]...) // these ramp when slow start is on
			// One endpoint carries a failure history so the penalty path runs.
			for i := 0; i < 50; i++ {
				a, done := h.Pick()
				var err error
				if a == as[0] {
					err = status.Error(codes.Unavailable, "x")
				}
				done(outcome(err))
			}
			p := h.CC.State().Picker
			allocs := testing.AllocsPerRun(2000, func() {
				res, err := p.Pick(balancer.PickInfo{})
				if err != nil {
					t.Fatal(err)
				}
				res.Done(balancer.DoneInfo{})
			})
			if allocs != 0 {
				t.Errorf("Pick+Done allocates %v times per call, want 0", allocs)
			}
		})
	}
}

func p2cConfig(js string) (serviceconfig.LoadBalancingConfig, error) {
	return p2c.ParseConfig([]byte(js))
}
