package engine_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	_ "github.com/pickwise/pickwise/balancer/orcawrr"
	_ "github.com/pickwise/pickwise/balancer/p2c"
	_ "github.com/pickwise/pickwise/balancer/peakewma"
	"github.com/pickwise/pickwise/balancer/ringhash"
	"github.com/pickwise/pickwise/internal/engine"
	"github.com/pickwise/pickwise/internal/testkit"
	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// The failure model, over every policy's real balancer in virtual time:
// one caller, calls that take 2ms, so every candidate is idle at each
// pick, the setting where a cost step starves an endpoint.

var policies = []string{"pickwise_p2c", "pickwise_peak_ewma", "pickwise_orca_wrr", "pickwise_ring_hash"}

var errDown = status.Error(codes.Unavailable, "down")

// blackHoleUntil is a caller over h whose calls to addr fail until healAt.
func blackHoleUntil(h *testkit.Harness, addr string, healAt time.Duration) *testkit.Caller {
	return &testkit.Caller{H: h, Every: 2 * time.Millisecond, Backend: func(a string, at time.Duration) error {
		if a == addr && at < healAt {
			return errDown
		}
		return nil
	}}
}

// keyed gives ring hash a fresh key per call, so that its calls spread
// over the table as the others' do.
func keyed(policy string, c *testkit.Caller) {
	if policy == "pickwise_ring_hash" {
		c.Context = func(i int) context.Context {
			return ringhash.WithKey(context.Background(), fmt.Sprintf("key-%d", i%300))
		}
	}
}

func TestLoneFailureMovesLittle(t *testing.T) {
	for _, policy := range policies[:2] {
		t.Run(policy, func(t *testing.T) {
			h := testkit.NewHarness(t, policy, `{}`)
			as := testkit.Addrs(4)
			h.Start(as...)
			c := &testkit.Caller{H: h, Every: 2 * time.Millisecond}
			c.Run(time.Second, time.Second) // a history of successes
			failedOnce := false
			c.Backend = func(a string, _ time.Duration) error {
				if a == as[0] && !failedOnce {
					failedOnce = true
					return errDown
				}
				return nil
			}
			for sec, counts := range c.Run(3*time.Second, time.Second) {
				share := testkit.Share(counts, as[0])
				t.Logf("second %d after one failure: %.1f%% (fair 25%%)", sec+1, 100*share)
				if share < 0.15 {
					t.Errorf("second %d after one failure: share %.1f%%, want >= 15%%", sec+1, 100*share)
				}
			}
		})
	}
}

func TestBlackHoleEjectedProbedAndReadmitted(t *testing.T) {
	for _, policy := range policies {
		t.Run(policy, func(t *testing.T) {
			h := testkit.NewHarness(t, policy, `{}`)
			as := testkit.Addrs(10)
			h.Start(as...)
			healAt := 5 * time.Second
			c := blackHoleUntil(h, as[0], healAt)
			keyed(policy, c)
			fail := c.Run(healAt, healAt)[0]
			share := testkit.Share(fail, as[0])
			t.Logf("black hole's share over 5 s: %.2f%% (%d calls)", 100*share, fail[as[0]])
			if policy != "pickwise_ring_hash" && share > 0.01 {
				t.Errorf("black hole's share = %.2f%%, want <= 1%%", 100*share)
			}
			// Healed: probes see it and it is back within 2 s.
			after := c.Run(3*time.Second, time.Second)
			t.Logf("shares in the 3 s after healing: %.1f%% %.1f%% %.1f%%", 100*testkit.Share(after[0], as[0]), 100*testkit.Share(after[1], as[0]), 100*testkit.Share(after[2], as[0]))
			if s := testkit.Share(after[2], as[0]); s < 0.05 {
				t.Errorf("share 2-3 s after healing = %.1f%%, want at least half its fair 10%%", 100*s)
			}
		})
	}
}

func TestRingHashBlackHoleKeysMoveAndReturn(t *testing.T) {
	h := testkit.NewHarness(t, "pickwise_ring_hash", `{}`)
	as := testkit.Addrs(10)
	h.Start(as...)
	broken := as[3]
	healAt := 5 * time.Second
	failures := 0
	c := &testkit.Caller{H: h, Every: 2 * time.Millisecond, Backend: func(a string, at time.Duration) error {
		if a == broken && at < healAt {
			failures++
			return errDown
		}
		return nil
	}}
	keyed("pickwise_ring_hash", c)
	homeShare := testkit.Share(c.Run(time.Second, time.Second)[0], broken)
	failures = 0
	got := c.Run(healAt-time.Second, healAt)[0]
	total := 0
	for _, n := range got {
		total += n
	}
	t.Logf("home share before the failure: %.1f%%; client-visible failures while broken: %.2f%% of %d calls", 100*homeShare, 100*float64(failures)/float64(total), total)
	if r := float64(failures) / float64(total); r > 0.02 {
		t.Errorf("failures while broken = %.2f%% of calls, want <= 2%%", 100*r)
	}
	back := c.Run(3*time.Second, 3*time.Second)[0]
	t.Logf("share 0-3 s after healing: %.1f%%", 100*testkit.Share(back, broken))
	last := c.Run(time.Second, time.Second)[0]
	if s := testkit.Share(last, broken); s < 0.9*homeShare {
		t.Errorf("share 3-4 s after healing = %.1f%%, want its keys back (%.1f%% before)", 100*s, 100*homeShare)
	}

	strict := testkit.NewHarness(t, "pickwise_ring_hash", `{"strictAffinity": true}`)
	strict.Start(as...)
	sc := &testkit.Caller{H: strict, Every: 2 * time.Millisecond, Backend: func(a string, _ time.Duration) error {
		if a == broken {
			return errDown
		}
		return nil
	}}
	keyed("pickwise_ring_hash", sc)
	sc.Run(time.Second, time.Second)
	if s := testkit.Share(sc.Run(2*time.Second, 2*time.Second)[0], broken); s < 0.9*homeShare {
		t.Errorf("strictAffinity: the broken endpoint's share = %.1f%%, want its keys kept (%.1f%%)", 100*s, 100*homeShare)
	}
}

func TestEveryoneFailingAvoidsNobody(t *testing.T) {
	for _, policy := range policies[:3] {
		t.Run(policy, func(t *testing.T) {
			h := testkit.NewHarness(t, policy, `{}`)
			as := testkit.Addrs(4)
			h.Start(as...)
			rnd := rand.New(rand.NewPCG(1, 2))
			// A shared dependency is down: every endpoint fails half its
			// calls, at random.
			c := &testkit.Caller{H: h, Every: 2 * time.Millisecond, Backend: func(string, time.Duration) error {
				if rnd.IntN(2) == 0 {
					return errDown
				}
				return nil
			}}
			got := c.Run(4*time.Second, 4*time.Second)[0]
			t.Logf("shares: %v", got)
			for _, a := range as {
				if s := testkit.Share(got, a); s < 0.2 || s > 0.3 {
					t.Errorf("%s: share %.1f%%, want about 25%%: nobody stands out", a, 100*s)
				}
			}
		})
	}
}

func TestEjectionCap(t *testing.T) {
	h := testkit.NewHarness(t, "pickwise_p2c", `{}`)
	as := testkit.Addrs(10)
	h.Start(as...)
	c := &testkit.Caller{H: h, Every: 2 * time.Millisecond, Backend: func(a string, _ time.Duration) error {
		if a == as[0] || a == as[1] || a == as[2] {
			return errDown
		}
		return nil
	}}
	c.Run(2*time.Second, 2*time.Second)
	st := h.CC.State()
	pk, ok := st.Picker.(*engine.LeastLoaded)
	if !ok {
		t.Fatalf("picker is %T", st.Picker)
	}
	// 10% of 10 endpoints: one ejected; the other two are avoided.
	if n := len(pk.Snapshot().Ejected); n != 1 {
		t.Errorf("%d endpoints ejected, want 1 (maxEjectionPercent 10)", n)
	}
}

func TestRetriesGoElsewhere(t *testing.T) {
	for _, policy := range policies {
		t.Run(policy, func(t *testing.T) {
			h := testkit.NewHarness(t, policy, `{}`)
			as := testkit.Addrs(4)
			h.Start(as...)
			for i := 0; i < 200; i++ {
				ctx := engine.WithAttempts(ringhash.WithKey(context.Background(), fmt.Sprint("key-", i)))
				testkit.Finish(h.PickApart(ctx, 4), nil)
			}
		})
	}
	// strictAffinity: every attempt of a key goes home.
	h := testkit.NewHarness(t, "pickwise_ring_hash", `{"strictAffinity": true}`)
	as := testkit.Addrs(4)
	h.Start(as...)
	ctx := engine.WithAttempts(ringhash.WithKey(context.Background(), "k"))
	first := ""
	for attempt := 0; attempt < 3; attempt++ {
		res, err := h.CC.State().Picker.Pick(balancer.PickInfo{Ctx: ctx})
		if err != nil {
			t.Fatal(err)
		}
		a := res.SubConn.(*testkit.SubConn).Addr()
		if first == "" {
			first = a
		} else if a != first {
			t.Errorf("strictAffinity: attempt %d went to %s, want the key's home %s", attempt, a, first)
		}
		res.Done(testkit.Outcome(nil))
	}
}

func TestRingHashKeylessCallsProbeAndReadmit(t *testing.T) {
	h := testkit.NewHarness(t, "pickwise_ring_hash", `{}`)
	as := testkit.Addrs(5)
	h.Start(as...)
	healAt := 3 * time.Second
	c := blackHoleUntil(h, as[0], healAt)
	// Keyed calls while it fails: it is ejected.
	keyed("pickwise_ring_hash", c)
	c.Run(healAt, healAt)
	// Then only calls without a key: they reach the ejected endpoint only
	// as probes, and its probes must readmit it.
	c.Context = nil
	after := c.Run(3*time.Second, time.Second)
	t.Logf("keyless calls after healing: the readmitted endpoint's share %.1f%%, %.1f%%, %.1f%% (fair 20%%)",
		100*testkit.Share(after[0], as[0]), 100*testkit.Share(after[1], as[0]), 100*testkit.Share(after[2], as[0]))
	if s := testkit.Share(after[2], as[0]); s < 0.1 {
		t.Errorf("share 2-3 s after healing %.1f%%, want it readmitted by its probes (fair 20%%)", 100*s)
	}
}

func TestProbesThatNeverReachTheServerAreNoEvidence(t *testing.T) {
	h := testkit.NewHarness(t, "pickwise_p2c", `{}`)
	as := testkit.Addrs(4)
	h.Start(as...)
	c := &testkit.Caller{H: h, Every: 2 * time.Millisecond, Backend: func(a string, _ time.Duration) error {
		if a == as[0] {
			return errDown
		}
		return nil
	}}
	c.Run(2*time.Second, 2*time.Second)
	pk := h.CC.State().Picker.(*engine.LeastLoaded)
	if n := len(pk.Snapshot().Ejected); n != 1 {
		t.Fatalf("%d endpoints ejected, want the black hole", n)
	}
	// Every probe from now on ends as grpc ends a pick whose connection
	// was not ready: an empty DoneInfo. However many, it stays out.
	for i := 0; i < 3000; i++ {
		h.Clock.Advance(2 * time.Millisecond)
		res, err := h.CC.State().Picker.Pick(balancer.PickInfo{})
		if err != nil {
			t.Fatal(err)
		}
		if res.SubConn.(*testkit.SubConn).Addr() == as[0] {
			res.Done(balancer.DoneInfo{})
		} else {
			res.Done(testkit.Outcome(nil))
		}
	}
	pk = h.CC.State().Picker.(*engine.LeastLoaded)
	if n := len(pk.Snapshot().Ejected); n != 1 {
		t.Errorf("%d endpoints ejected after probes that never reached the server, want the black hole still out", n)
	}
}

// A stream the server refused unprocessed, above the last stream a GOAWAY
// lets through, ends in grpc with this status; grpc reports the attempt
// as sent (BytesSent), since it had created the stream, and retries it
// elsewhere at once.
var errRefusedByDrain = status.Error(codes.Unavailable, "the connection is draining")

// TestRefusedByADrainIsNoEvidence: every call to one endpoint ends as a
// stream its server refused while draining. However many, they are no
// evidence: nothing is ejected and the endpoint keeps its share. The same
// calls cut off by a connection that died mid-call (a crash) are evidence,
// and eject it.
func TestRefusedByADrainIsNoEvidence(t *testing.T) {
	for _, c := range []struct {
		name    string
		err     error
		ejected int
	}{
		{"refused by a drain", errRefusedByDrain, 0},
		{"connection lost mid-call", status.Error(codes.Unavailable, "error reading from server: EOF"), 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := testkit.NewHarness(t, "pickwise_p2c", `{}`)
			as := testkit.Addrs(4)
			h.Start(as...)
			calls := map[string]int{}
			for range 2000 {
				h.Clock.Advance(2 * time.Millisecond)
				res, err := h.CC.State().Picker.Pick(balancer.PickInfo{})
				if err != nil {
					t.Fatal(err)
				}
				addr := res.SubConn.(*testkit.SubConn).Addr()
				calls[addr]++
				if addr == as[0] {
					res.Done(balancer.DoneInfo{Err: c.err, BytesSent: true})
				} else {
					res.Done(testkit.Outcome(nil))
				}
			}
			pk := h.CC.State().Picker.(*engine.LeastLoaded)
			if n := len(pk.Snapshot().Ejected); n != c.ejected {
				t.Errorf("%d endpoints ejected, want %d", n, c.ejected)
			}
			share := testkit.Share(calls, as[0])
			t.Logf("its share of 2000 calls: %.1f%% (fair 25%%)", 100*share)
			if c.ejected == 0 && share < 0.2 {
				t.Errorf("share %.1f%%, want about its fair 25%%: refused streams moved calls away", 100*share)
			}
		})
	}
}
