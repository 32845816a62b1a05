package engine_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/pickwise/pickwise/balancer/p2c"
	"github.com/pickwise/pickwise/internal/testkit"
	"github.com/pickwise/pickwise/lbconfig"
	"google.golang.org/grpc/serviceconfig"
)

// The parking of removed endpoints (parked.go) where a config or the
// clock moves while they are out; balancer/p2c's parked_test.go has the
// common cases.

func parseP2C(t *testing.T, js string) serviceconfig.LoadBalancingConfig {
	t.Helper()
	cfg, err := p2c.ParseConfig(json.RawMessage(js))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// updateP2C gives h's balancer the pickwise_p2c config js and the
// endpoints at addrs, as one resolver update.
func updateP2C(t *testing.T, h *testkit.Harness, js string, addrs ...string) {
	t.Helper()
	h.Cfg = parseP2C(t, js)
	if err := h.Update(testkit.Endpoints(addrs)...); err != nil {
		t.Fatal(err)
	}
}

// TestParkedEjectedEndpointReturns: an endpoint ejected when it left, and
// back after a config turned ejection or the whole failure penalty off,
// is readmitted: nothing else would, since no probe goes to it without
// ejection and no health tick looked at it while it was out.
func TestParkedEjectedEndpointReturns(t *testing.T) {
	for _, off := range []string{`{"ejection": {"enabled": false}}`, `{"failurePenalty": {"enabled": false}}`} {
		t.Run(off, func(t *testing.T) {
			h := testkit.NewHarness(t, p2c.Name, `{}`)
			as := testkit.Addrs(10)
			h.Start(as...)
			healAt := 2 * time.Second
			c := blackHoleUntil(h, as[0], healAt)
			if s := testkit.Share(c.Run(healAt, healAt)[0], as[0]); s > 0.01 {
				t.Fatalf("black hole's share %.2f%%: the setup did not eject it", 100*s)
			}
			if err := h.Update(testkit.Endpoints(as[1:])...); err != nil {
				t.Fatal(err)
			}
			updateP2C(t, h, off, as...)
			// It healed while it was out.
			if s := testkit.Share(c.Run(time.Second, time.Second)[0], as[0]); s < 0.05 {
				t.Errorf("share of the healed endpoint back from parking = %.1f%%, want about its fair 10%%", 100*s)
			}
		})
	}
}

// TestParkedGraceTurnedOff: a config that sets removalGrace to 0s closes
// the connections parked under the old one.
func TestParkedGraceTurnedOff(t *testing.T) {
	h := testkit.NewHarness(t, p2c.Name, `{}`)
	as := testkit.Addrs(3)
	h.Start(as...)
	sc := h.CC.SubConnFor(as[2])
	if err := h.Update(testkit.Endpoints(as[:2])...); err != nil {
		t.Fatal(err)
	}
	if sc.IsShutdown() {
		t.Fatal("removed endpoint's connection closed at once under the default removalGrace")
	}
	updateP2C(t, h, `{"removalGrace": "0s"}`, as[:2]...)
	if !sc.IsShutdown() {
		t.Fatal("a parked connection outlived a config that set removalGrace to 0s")
	}
	if n := h.Clock.Pending(); n != 0 {
		t.Errorf("%d timers pending with nothing parked and nothing failing", n)
	}
}

// TestParkedClosedInTurn: endpoints removed at different times are each
// closed after their own grace, by sweeps that re-arm for the next.
func TestParkedClosedInTurn(t *testing.T) {
	h := testkit.NewHarness(t, p2c.Name, `{}`)
	as := testkit.Addrs(4)
	h.Start(as...)
	first, second := h.CC.SubConnFor(as[3]), h.CC.SubConnFor(as[2])
	grace := lbconfig.DefaultRemovalGrace
	if err := h.Update(testkit.Endpoints(as[:3])...); err != nil {
		t.Fatal(err)
	}
	h.Clock.Advance(grace / 2)
	if err := h.Update(testkit.Endpoints(as[:2])...); err != nil {
		t.Fatal(err)
	}
	h.Clock.Advance(grace / 2)
	if !first.IsShutdown() || second.IsShutdown() {
		t.Fatalf("after the first's grace: first closed %v, second closed %v; want true, false", first.IsShutdown(), second.IsShutdown())
	}
	h.Clock.Advance(grace / 2)
	if !second.IsShutdown() {
		t.Fatal("the second parked connection outlived its grace")
	}
	if n := h.Clock.Pending(); n != 0 {
		t.Errorf("%d timers pending with nothing parked", n)
	}
}

// TestParkedGraceChanged: a config that changes removalGrace applies it
// to the endpoints parked before it too, each counted from its own
// removal: a shorter grace closes at once those removed longer ago than
// it, and the others when it ends; a longer one keeps them longer.
func TestParkedGraceChanged(t *testing.T) {
	h := testkit.NewHarness(t, p2c.Name, `{}`) // the default grace, 10s
	as := testkit.Addrs(5)
	h.Start(as...)
	first, second, third := h.CC.SubConnFor(as[4]), h.CC.SubConnFor(as[3]), h.CC.SubConnFor(as[2])
	update := func(cfg string, n int) { t.Helper(); updateP2C(t, h, cfg, as[:n]...) }
	update(`{}`, 4) // first removed at 0s
	h.Clock.Advance(4 * time.Second)
	update(`{}`, 3) // second removed at 4s
	h.Clock.Advance(time.Second)
	update(`{"removalGrace": "3s"}`, 3) // at 5s: first's grace is over, second's ends at 7s
	h.Clock.Advance(0)
	if !first.IsShutdown() || second.IsShutdown() {
		t.Fatalf("grace shortened to 3s at 5s: first (removed at 0s) closed %v, second (at 4s) closed %v; want true, false", first.IsShutdown(), second.IsShutdown())
	}
	h.Clock.Advance(2 * time.Second)
	if !second.IsShutdown() {
		t.Fatal("the second parked connection outlived the shortened grace")
	}
	update(`{"removalGrace": "3s"}`, 2) // third removed at 7s
	h.Clock.Advance(time.Second)
	update(`{"removalGrace": "20s"}`, 2) // at 8s: third's grace now ends at 27s
	h.Clock.Advance(18 * time.Second)
	if third.IsShutdown() {
		t.Fatal("a parked connection was closed at 26s, before the lengthened grace ends at 27s")
	}
	h.Clock.Advance(time.Second)
	if !third.IsShutdown() {
		t.Fatal("a parked connection outlived the lengthened grace")
	}
	if n := h.Clock.Pending(); n != 0 {
		t.Errorf("%d timers pending with nothing parked", n)
	}
}

// TestParkedGraceShortenedBehindReturn: a grace shortened while the
// first in the parking queue has returned closes the next one at its new
// deadline, not at the old one's.
func TestParkedGraceShortenedBehindReturn(t *testing.T) {
	h := testkit.NewHarness(t, p2c.Name, `{}`) // the default grace, 10s
	as := testkit.Addrs(5)
	h.Start(as...)
	returned, parked := h.CC.SubConnFor(as[4]), h.CC.SubConnFor(as[3])
	updateP2C(t, h, `{}`, as[:4]...) // as[4] parked at 0s
	h.Clock.Advance(time.Second)
	updateP2C(t, h, `{}`, as...) // back at 1s: its queue entry is stale
	h.Clock.Advance(time.Second)
	updateP2C(t, h, `{}`, as[0], as[1], as[2], as[4]) // as[3] parked at 2s
	h.Clock.Advance(time.Second)
	updateP2C(t, h, `{"removalGrace": "2s"}`, as[0], as[1], as[2], as[4]) // at 3s: as[3]'s grace ends at 4s
	h.Clock.Advance(time.Second)
	if !parked.IsShutdown() {
		t.Fatal("a parked connection outlived the grace shortened to 2s behind a returned endpoint's stale entry")
	}
	if returned.IsShutdown() {
		t.Fatal("the endpoint back in the list lost its connection")
	}
}

// TestLazyPolicyDoesNotPark: a lazy policy's connections follow its
// picks, and a removed endpoint's closes at once.
func TestLazyPolicyDoesNotPark(t *testing.T) {
	h := testkit.NewHarness(t, "pickwise_ring_hash", `{}`)
	as := testkit.Addrs(3)
	h.StartLazy(as...)
	sc := h.CC.SubConnFor(as[2])
	if err := h.Update(testkit.Endpoints(as[:2])...); err != nil {
		t.Fatal(err)
	}
	if !sc.IsShutdown() {
		t.Fatal("ring hash kept a removed endpoint's connection")
	}
}

// TestParkedFailuresCountOnReturn: an endpoint that left with failures
// counted, not ejected, is passed over on its return as before it left,
// though the health ticks stopped while it was out, when no listed
// endpoint had failures: a weighted schedule reads failures only while
// some endpoint is known to have them.
func TestParkedFailuresCountOnReturn(t *testing.T) {
	h := testkit.NewHarness(t, "pickwise_orca_wrr", `{"ejection": {"enabled": false}}`)
	as := testkit.Addrs(4)
	h.Start(as...)
	c := blackHoleUntil(h, as[0], time.Hour)
	if s := testkit.Share(c.Run(3*time.Second, time.Second)[2], as[0]); s > 0.1 {
		t.Fatalf("failing endpoint's share %.1f%%: the setup did not penalize it", 100*s)
	}
	if err := h.Update(testkit.Endpoints(as[1:])...); err != nil {
		t.Fatal(err)
	}
	c.Run(2*time.Second, 2*time.Second) // the others succeed: the ticks stop
	if err := h.Update(testkit.Endpoints(as)...); err != nil {
		t.Fatal(err)
	}
	got, _ := h.Count(2000, false) // no outcomes: nothing new is learnt
	if s := testkit.Share(got, as[0]); s > 0.1 {
		t.Errorf("failing endpoint's share back from parking = %.1f%%, want it passed over as before it left", 100*s)
	}
}
