package engine_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/pickwise/pickwise/balancer/ringhash"
	"github.com/pickwise/pickwise/internal/testkit"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// failurePenalty.codes over every policy's real balancer: one host of four
// answers PermissionDenied to every call (a broken credential on one
// machine).

var errDenied = status.Error(codes.PermissionDenied, "denied")

// withDenied is failurePenalty.codes at its default plus PERMISSION_DENIED.
const withDenied = `{"failurePenalty": {"codes": ["UNAVAILABLE", "INTERNAL", "UNKNOWN", "DEADLINE_EXCEEDED", "RESOURCE_EXHAUSTED", "PERMISSION_DENIED"]}}`

func TestListedCodeMakesABlackHole(t *testing.T) {
	for _, policy := range policies {
		t.Run(policy, func(t *testing.T) {
			share := func(cfg string) float64 {
				h := testkit.NewHarness(t, policy, cfg)
				as := testkit.Addrs(4)
				h.Start(as...)
				c := &testkit.Caller{H: h, Every: 2 * time.Millisecond, Backend: func(a string, _ time.Duration) error {
					if a == as[0] {
						return errDenied
					}
					return nil
				}}
				keyed(policy, c)
				c.Run(time.Second, time.Second) // the evidence builds
				return testkit.Share(c.Run(4*time.Second, 4*time.Second)[0], as[0])
			}
			def, listed := share(`{}`), share(withDenied)
			t.Logf("share of the host denying every call: default codes %.1f%%, PERMISSION_DENIED listed %.2f%% (fair 25%%)", 100*def, 100*listed)
			// By default PermissionDenied is the caller's problem: the
			// host keeps its share, and a fast answer wins it calls.
			if def < 0.15 {
				t.Errorf("default codes: share %.1f%%, want about its fair 25%% or more", 100*def)
			}
			// Listed, it is a black hole: ejected, with a probe now and
			// then.
			if listed > 0.01 {
				t.Errorf("PERMISSION_DENIED listed: share %.2f%%, want <= 1%%", 100*listed)
			}
		})
	}
}

// TestListedCodeEveryoneAlikeAvoidsNobody is the other half of the
// judgement: a code every endpoint returns alike (a credential bad
// everywhere, or bad for some callers) is a client-side problem, and
// moves no traffic even when listed.
func TestListedCodeEveryoneAlikeAvoidsNobody(t *testing.T) {
	for _, policy := range policies[:3] {
		for _, rate := range []float64{1, 0.5} {
			t.Run(fmt.Sprintf("%s/rate=%v", policy, rate), func(t *testing.T) {
				h := testkit.NewHarness(t, policy, withDenied)
				as := testkit.Addrs(4)
				h.Start(as...)
				rnd := rand.New(rand.NewPCG(3, 4))
				c := &testkit.Caller{H: h, Every: 2 * time.Millisecond, Backend: func(string, time.Duration) error {
					if rnd.Float64() < rate {
						return errDenied
					}
					return nil
				}}
				for sec, got := range c.Run(4*time.Second, 2*time.Second) {
					for _, a := range as {
						if s := testkit.Share(got, a); s < 0.2 || s > 0.3 {
							t.Errorf("seconds %d-%d: %s: share %.1f%%, want about 25%%: nobody stands out (%v)", 2*sec, 2*sec+2, a, 100*s, got)
						}
					}
				}
			})
		}
	}
}

// TestRingHashInvalidKeyMovesNoOtherKey: with the default codes, one key
// whose calls are all invalid moves none of its home's other keys. With
// INVALID_ARGUMENT listed, which the docs warn against for hash policies,
// the home's rate stands out and its keys can move with it: logged.
func TestRingHashInvalidKeyMovesNoOtherKey(t *testing.T) {
	errInvalid := status.Error(codes.InvalidArgument, "bad request")
	run := func(cfg string) (moved float64) {
		h := testkit.NewHarness(t, "pickwise_ring_hash", cfg)
		as := testkit.Addrs(10)
		h.Start(as...)
		key := func(i int) string {
			if i%10 == 0 {
				return "bad-key" // a tenth of the calls, all invalid
			}
			return fmt.Sprintf("key-%d", i%300)
		}
		calls := 0
		first := map[string]string{} // each good key's endpoint in the first second
		movedCalls, goodCalls := 0, 0
		var at time.Duration
		c := &testkit.Caller{H: h, Every: 2 * time.Millisecond}
		c.Context = func(i int) context.Context {
			calls = i
			return ringhash.WithKey(context.Background(), key(i))
		}
		c.Backend = func(a string, elapsed time.Duration) error {
			at = elapsed
			k := key(calls)
			if k == "bad-key" {
				return errInvalid
			}
			if at < 100*time.Millisecond {
				if _, ok := first[k]; !ok {
					first[k] = a
				}
			} else if home, ok := first[k]; ok {
				goodCalls++
				if a != home {
					movedCalls++
				}
			}
			return nil
		}
		c.Run(3*time.Second, 3*time.Second)
		return float64(movedCalls) / float64(goodCalls)
	}
	def := run(`{}`)
	listed := run(`{"failurePenalty": {"codes": ["UNAVAILABLE", "INVALID_ARGUMENT"]}}`)
	t.Logf("good keys' calls off their first endpoint: default codes %.1f%%, INVALID_ARGUMENT listed %.1f%%", 100*def, 100*listed)
	if def > 0.01 {
		t.Errorf("default codes: %.1f%% of good keys' calls moved, want none", 100*def)
	}
	// With INVALID_ARGUMENT listed the bad key's home is judged by its
	// calls, and its other keys move with it when it is ejected: the
	// hazard the docs warn of, logged above, not a behaviour to keep.
}
