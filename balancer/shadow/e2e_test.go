package shadow_test

// End-to-end: real gRPC channels over loopback to internal/fleet backends,
// pickwise_shadow selected by service config. Each backend counts the
// connections it accepted, which is how the tests tell that the candidate
// opened none of its own.

import (
	"fmt"
	"math"
	"testing"
	"time"

	_ "github.com/pickwise/pickwise/balancer/p2c"
	"github.com/pickwise/pickwise/balancer/ringhash"
	"github.com/pickwise/pickwise/balancer/shadow"
	"github.com/pickwise/pickwise/internal/fleet"
	"google.golang.org/grpc/resolver"
)

func shadowConfig(live, candidate string, sampleRate, canaryPercent float64) string {
	return fmt.Sprintf(`{"loadBalancingConfig": [{"pickwise_shadow": {"live": [%s], "candidate": [%s], "sampleRate": %v, "canaryPercent": %v}}]}`, live, candidate, sampleRate, canaryPercent)
}

// pushConfig sends c's channel serviceConfig with f's endpoints, as a
// control plane pushing a rollout's next step would.
func pushConfig(t *testing.T, c *fleet.Client, f *fleet.Fleet, serviceConfig string) {
	t.Helper()
	sc := c.Resolver.CC().ParseServiceConfig(serviceConfig)
	if sc.Err != nil {
		t.Fatal(sc.Err)
	}
	state := resolver.State{ServiceConfig: sc}
	for _, a := range f.Addrs() {
		state.Endpoints = append(state.Endpoints, resolver.Endpoint{Addresses: []resolver.Address{{Addr: a}}})
	}
	c.Resolver.UpdateState(state)
}

// summaryFor returns the summary of the shadow balancer whose channel has
// target, failing the test if there is none.
func summaryFor(t *testing.T, target string) shadow.Summary {
	t.Helper()
	for _, s := range shadow.Summaries() {
		if s.Target == target {
			return s
		}
	}
	t.Fatalf("no pickwise_shadow balancer for target %q among %d", target, len(shadow.Summaries()))
	return shadow.Summary{}
}

// TestShadowOpensNoConnection runs round_robin live with pickwise_p2c as
// the candidate asked on every pick: each backend accepts one connection,
// every call is compared, and both policies spread the calls evenly.
func TestShadowOpensNoConnection(t *testing.T) {
	ctx := fleet.Context(t, 30*time.Second)
	f := fleet.StartT(t, 4)
	c := fleet.DialT(t, f.Addrs(), shadowConfig(`{"round_robin": {}}`, `{"pickwise_p2c": {}}`, 1, 0))
	// The candidate reports READY on its own schedule: wait until it has
	// an answer for every pick before counting.
	fleet.WaitFor(t, ctx, "the candidate answering", func() bool {
		before := summaryFor(t, c.Conn.CanonicalTarget()).Compared
		c.Load(ctx, 20, 1, 0)
		return summaryFor(t, c.Conn.CanonicalTarget()).Compared-before == 20
	})
	before := summaryFor(t, c.Conn.CanonicalTarget())
	const calls = 4000
	res := c.Load(ctx, calls, 8, 0)
	if res.Failed != 0 {
		t.Fatalf("%d of %d calls failed", res.Failed, res.Total)
	}
	for _, b := range f.Backends {
		if got := b.Accepted(); got != 1 {
			t.Errorf("backend %s accepted %d connections, want 1: the candidate must share live's", b.Name(), got)
		}
	}
	s := summaryFor(t, c.Conn.CanonicalTarget())
	if s.Live != "round_robin" || s.Candidate != "pickwise_p2c" {
		t.Errorf("summary names live %q, candidate %q", s.Live, s.Candidate)
	}
	if got := s.Compared - before.Compared; got != calls {
		t.Errorf("compared %d picks of %d, with sampleRate 1", got, calls)
	}
	if len(s.Endpoints) != 4 {
		t.Fatalf("summary has %d endpoints, want 4: %+v", len(s.Endpoints), s.Endpoints)
	}
	for _, e := range s.Endpoints {
		live, cand := e.Shares(s)
		if math.Abs(live-0.25) > 0.03 || math.Abs(cand-0.25) > 0.05 {
			t.Errorf("endpoint %s: live share %.3f, candidate share %.3f, want both near 0.25", e.Addr, live, cand)
		}
	}
	if s.LiveArm.Calls < calls || s.LiveArm.Failed != 0 || s.CanaryArm.Calls != 0 {
		t.Errorf("arms: live %+v, canary %+v; want %d+ live calls without failure and no canary", s.LiveArm, s.CanaryArm, calls)
	}
}

// TestCanary sends every call through the candidate (pick_first, which
// sends all to one backend) with canaryPercent 100, then rolls back with
// canaryPercent 0: the calls follow, and no backend accepts a second
// connection.
func TestCanary(t *testing.T) {
	ctx := fleet.Context(t, 30*time.Second)
	f := fleet.StartT(t, 3)
	c := fleet.DialT(t, f.Addrs(), shadowConfig(`{"round_robin": {}}`, `{"pick_first": {}}`, 0, 100))
	fleet.WaitFor(t, ctx, "every call placed by the canary", func() bool {
		// One backend is not enough: live's round_robin also places
		// every call on one while only one is connected, taking the
		// canary's calls the candidate cannot place yet (fallbacks).
		before := summaryFor(t, c.Conn.CanonicalTarget())
		res := c.Load(ctx, 30, 1, 0)
		after := summaryFor(t, c.Conn.CanonicalTarget())
		return res.Failed == 0 && len(res.PerBackend) == 1 &&
			after.CanaryFallbacks == before.CanaryFallbacks && after.CanaryArm.Calls >= before.CanaryArm.Calls+30
	})
	s := summaryFor(t, c.Conn.CanonicalTarget())
	if s.CanaryArm.Calls == 0 || s.CanaryArm.Failed != 0 {
		t.Errorf("canary arm %+v, want calls and no failure", s.CanaryArm)
	}

	// Rollback: the same children with canaryPercent 0, pushed as a new
	// service config. round_robin places every call again, and the
	// canary's counts survive, since changing only canaryPercent keeps
	// both children.
	pushConfig(t, c, f, shadowConfig(`{"round_robin": {}}`, `{"pick_first": {}}`, 0, 0))
	res := c.Load(ctx, 300, 3, 0)
	if res.Failed != 0 || len(res.PerBackend) != 3 {
		t.Errorf("after rollback: %d failed, served by %v; want round_robin over all 3", res.Failed, res.PerBackend)
	}
	after := summaryFor(t, c.Conn.CanonicalTarget())
	if after.CanaryArm.Calls != s.CanaryArm.Calls || after.CanaryPercent != 0 {
		t.Errorf("after rollback: canary arm %+v at canaryPercent %v, want the %d calls before it kept and 0", after.CanaryArm, after.CanaryPercent, s.CanaryArm.Calls)
	}
	for _, b := range f.Backends {
		if got := b.Accepted(); got != 1 {
			t.Errorf("backend %s accepted %d connections, want 1", b.Name(), got)
		}
	}
}

// TestKeyMovement asks the shadow what a switch from a ring to a Maglev
// table would move, then makes the switch and measures it: the share of
// keys the shadow reports the candidate maps elsewhere is within a point
// of the share whose backend changed.
func TestKeyMovement(t *testing.T) {
	ctx := fleet.Context(t, 60*time.Second)
	f := fleet.StartT(t, 10)
	ring, maglev := `{"pickwise_ring_hash": {}}`, `{"pickwise_ring_hash": {"table": "maglev"}}`
	c := fleet.DialT(t, f.Addrs(), shadowConfig(ring, maglev, 1, 0))
	keys := make([]string, 5000)
	for i := range keys {
		keys[i] = fmt.Sprintf("user-%d", i)
	}
	serve := func() map[string]string {
		got := make(map[string]string, len(keys))
		for _, k := range keys {
			b, err := c.Call(ringhash.WithKey(ctx, k))
			if err != nil {
				t.Fatalf("key %s: %v", k, err)
			}
			got[k] = b
		}
		return got
	}
	// Lazy: every backend connects once a key needs it, and the candidate
	// answers once live has connected what it chose.
	fleet.WaitFor(t, ctx, "every backend connected and the candidate answering", func() bool {
		before := summaryFor(t, c.Conn.CanonicalTarget())
		serve()
		after := summaryFor(t, c.Conn.CanonicalTarget())
		return after.NoPrediction == before.NoPrediction
	})
	before := summaryFor(t, c.Conn.CanonicalTarget())
	onRing := serve()
	after := summaryFor(t, c.Conn.CanonicalTarget())
	compared, agreed := after.Compared-before.Compared, after.Agreed-before.Agreed
	if compared != int64(len(keys)) {
		t.Fatalf("compared %d of %d keyed calls", compared, len(keys))
	}
	reported := 1 - float64(agreed)/float64(compared)

	// The switch: Maglev live.
	pushConfig(t, c, f, shadowConfig(maglev, maglev, 1, 0))
	onMaglev := serve()
	moved := 0
	for _, k := range keys {
		if onRing[k] != onMaglev[k] {
			moved++
		}
	}
	measured := float64(moved) / float64(len(keys))
	t.Logf("keys moved by a ring -> Maglev switch over 10 backends: the shadow reported %.2f%%, the switch moved %.2f%%", 100*reported, 100*measured)
	if math.Abs(reported-measured) > 0.01 {
		t.Errorf("reported %.4f, measured %.4f: more than a point apart", reported, measured)
	}
	if measured < 0.5 {
		t.Errorf("measured movement %.4f: a ring and a Maglev table over 10 backends should disagree on most keys", measured)
	}
	for _, b := range f.Backends {
		if got := b.Accepted(); got != 1 {
			t.Errorf("backend %s accepted %d connections, want 1", b.Name(), got)
		}
	}
}
