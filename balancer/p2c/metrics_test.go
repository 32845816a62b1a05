package p2c_test

import (
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// gauge collects and returns a gauge's latest value.
func gauge(t *testing.T, h *harness, name string) float64 {
	t.Helper()
	if err := h.Metrics.Collect(); err != nil {
		t.Fatal(err)
	}
	v, ok := h.Metrics.Last(name)
	if !ok {
		t.Fatalf("%s never recorded", name)
	}
	return v
}

func TestMetricsPicksByReason(t *testing.T) {
	h := newHarness(t, `{}`)
	as := addrs(4)
	h.Start(as...)

	// Calls that end at once leave every in-flight count at 0: ties.
	h.Count(200, false)
	got := h.PicksByReason("p2c")
	if got["tie"] != 200 || len(got) != 1 {
		t.Fatalf("picks by reason after 200 idle calls = %v, want 200 ties", got)
	}
	rs := h.Metrics.Records("pickwise.p2c.picks")
	if l := rs[0].Labels; l["grpc.target"] != "test:///harness" || l["grpc.lb.locality"] != "" {
		t.Errorf("labels %v, want target test:///harness and an empty locality", l)
	}

	// Held calls make the counts differ: the cheaper candidate wins.
	_, pending := h.Count(400, true)
	got = h.PicksByReason("p2c")
	if got["least_loaded"] < 200 {
		t.Errorf("picks by reason with calls held = %v, want most by least_loaded", got)
	}
	if sum := got["least_loaded"] + got["tie"]; sum != 600 {
		t.Errorf("picks counted %v times, want 600", sum)
	}
	finish(pending, nil)

	// A backend that fails every call: the penalty steers picks away.
	for i := 0; i < 300; i++ {
		a, done := h.Pick()
		var err error
		if a == as[0] {
			err = status.Error(codes.Unavailable, "black hole")
		}
		done(outcome(err))
	}
	got = h.PicksByReason("p2c")
	if got["avoided_failing"] == 0 {
		t.Errorf("picks by reason with a failing backend = %v, want some avoided_failing", got)
	}

	// Collecting again without picks records nothing new.
	before := len(h.Metrics.Records("pickwise.p2c.picks"))
	h.PicksByReason("p2c")
	if after := len(h.Metrics.Records("pickwise.p2c.picks")); after != before {
		t.Errorf("a collection without picks recorded %d records", after-before)
	}

	// Picks made after the last collection are recorded when the
	// balancer closes, and the reporter is gone.
	h.Count(7, false)
	total := sumValues(h.Metrics.Values("pickwise.p2c.picks"))
	h.B.Close()
	if after := sumValues(h.Metrics.Values("pickwise.p2c.picks")); after != total+7 {
		t.Errorf("picks after close = %v, want %v", after, total+7)
	}
	if n := h.Metrics.Reporters(); n != 0 {
		t.Errorf("%d metrics reporters registered after Close, want 0", n)
	}
}

func TestMetricsOnlyReadyAndRemovedEndpoint(t *testing.T) {
	h := newHarness(t, `{}`)
	as := addrs(2)
	h.Start(as...)
	h.Count(10, false)
	// The second endpoint leaves: its picks are recorded as it goes, and
	// the survivor's picks have no choice.
	if err := h.Update(endpoint(as[0], 0)); err != nil {
		t.Fatal(err)
	}
	if total := sumValues(h.Metrics.Values("pickwise.p2c.picks")); total == 0 {
		t.Error("the removed endpoint's picks were not recorded when it left")
	}
	if got, _ := h.Count(50, false); got[as[0]] != 50 {
		t.Fatalf("picks after the update = %v, want all on %s", got, as[0])
	}
	got := h.PicksByReason("p2c")
	if got["only_ready"] != 50 {
		t.Errorf("picks by reason with one endpoint = %v, want 50 only_ready", got)
	}
	if n := sumValues(h.Metrics.Values("pickwise.p2c.picks")); n != 60 {
		t.Errorf("picks recorded %v, want 60", n)
	}
	if v := gauge(t, h, "pickwise.p2c.endpoints_ready"); v != 1 {
		t.Errorf("endpoints_ready = %v, want 1", v)
	}
}

func TestMetricsSlowStartAndCosts(t *testing.T) {
	h := newHarness(t, `{"slowStart": {"window": "10s", "minWeightPercent": 10}}`)
	as := addrs(3)
	h.Start(as[:2]...)
	h.Serve()
	if v := gauge(t, h, "pickwise.p2c.endpoints_in_slow_start"); v != 0 {
		t.Errorf("endpoints_in_slow_start with the initial fleet = %v, want 0", v)
	}
	if err := h.Update(endpointsOf(as)...); err != nil {
		t.Fatal(err)
	}
	h.Ready(as[2])
	if v := gauge(t, h, "pickwise.p2c.endpoints_in_slow_start"); v != 1 {
		t.Errorf("endpoints_in_slow_start with a newcomer = %v, want 1", v)
	}
	if v := gauge(t, h, "pickwise.p2c.endpoints_ready"); v != 3 {
		t.Errorf("endpoints_ready = %v, want 3", v)
	}

	// Costs: one sample per READY endpoint per collection. With calls
	// held, the old endpoints' costs rise above an idle endpoint's 1, and
	// p2c keeps them close. The newcomer is held to its ramped share of
	// the picks rather than priced higher: it holds fewer calls, and its
	// cost is the lowest.
	_, pending := h.Count(30, true)
	n := len(h.Metrics.Values("pickwise.p2c.endpoint_cost"))
	if err := h.Metrics.Collect(); err != nil {
		t.Fatal(err)
	}
	costs := h.Metrics.Values("pickwise.p2c.endpoint_cost")[n:]
	if len(costs) != 3 {
		t.Fatalf("endpoint_cost samples per collection = %d, want 3", len(costs))
	}
	slices.Sort(costs)
	if costs[0] >= costs[1] || costs[1] < 2 || costs[2] > 2*costs[1] {
		t.Errorf("endpoint costs %v: want one below the others, and those >= 2 and within 2x of each other", costs)
	}
	finish(pending, nil)

	h.Clock.Advance(10 * time.Second)
	if v := gauge(t, h, "pickwise.p2c.endpoints_in_slow_start"); v != 0 {
		t.Errorf("endpoints_in_slow_start after the window = %v, want 0", v)
	}
}

func sumValues(vs []float64) float64 {
	s := 0.0
	for _, v := range vs {
		s += v
	}
	return s
}

// TestMetricsCollectWhilePicking collects while goroutines pick: every
// pick is counted once (and the race detector sees the counters).
func TestMetricsCollectWhilePicking(t *testing.T) {
	h := newHarness(t, `{}`)
	as := addrs(5)
	h.Start(as...)
	picker := h.CC.State().Picker
	const workers, each = 4, 2000
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				res, err := picker.Pick(balancer.PickInfo{})
				if err != nil {
					t.Error(err)
					return
				}
				res.Done(balancer.DoneInfo{})
			}
		}()
	}
	for i := 0; i < 50; i++ {
		if err := h.Metrics.Collect(); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	if err := h.Metrics.Collect(); err != nil {
		t.Fatal(err)
	}
	if n := sumValues(h.Metrics.Values("pickwise.p2c.picks")); n != workers*each {
		t.Errorf("picks counted %v, want %d", n, workers*each)
	}
}

// TestMetricsFlushWithoutCollection checks that pick counts reach the
// recorder within a second even if the sink never runs the async reporter
// (grpc's OpenTelemetry plugin does not when none of the policy's gauges
// is enabled), and that an idle balancer keeps no timer for it.
func TestMetricsFlushWithoutCollection(t *testing.T) {
	h := newHarness(t, `{}`)
	as := addrs(3)
	h.Start(as...)
	h.Count(50, false)
	if n := sumValues(h.Metrics.Values("pickwise.p2c.picks")); n != 0 {
		t.Fatalf("picks recorded before any flush: %v", n)
	}
	h.Clock.Advance(time.Second)
	if n := sumValues(h.Metrics.Values("pickwise.p2c.picks")); n != 50 {
		t.Errorf("picks recorded a second after 50 calls = %v, want 50", n)
	}
	if p := h.Clock.Pending(); p != 0 {
		t.Errorf("%d timers pending on an idle balancer, want 0", p)
	}
	h.Count(20, false)
	h.Clock.Advance(time.Second)
	if n := sumValues(h.Metrics.Values("pickwise.p2c.picks")); n != 70 {
		t.Errorf("picks recorded after 20 more calls = %v, want 70", n)
	}
}
