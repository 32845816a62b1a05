package attempts_test

import (
	"strings"
	"testing"
	"time"

	"github.com/pickwise/pickwise/attempts"
	"github.com/pickwise/pickwise/balancer/ringhash"
	"github.com/pickwise/pickwise/internal/fleet"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// retried is a pickwise_ring_hash service config with grpc's retry policy:
// three attempts on UNAVAILABLE.
const retried = `{"loadBalancingConfig":[{"pickwise_ring_hash":{"ejection":{"enabled":false}}}],` +
	`"methodConfig":[{"name":[{"service":"` + fleet.ServiceName + `"}],` +
	`"retryPolicy":{"maxAttempts":3,"initialBackoff":"0.001s","maxBackoff":"0.002s","backoffMultiplier":2,"retryableStatusCodes":["UNAVAILABLE"]}}]}`

// attemptsPerBackend fails every call on three backends and returns how
// many attempts of 20 calls of one key each backend saw, under
// serviceConfig.
func attemptsPerBackend(t *testing.T, serviceConfig string, opts ...grpc.DialOption) []int64 {
	t.Helper()
	ctx := fleet.Context(t, time.Minute)
	f := fleet.StartT(t, 3)
	c := fleet.DialT(t, f.Addrs(), serviceConfig, opts...)
	key := ringhash.WithKey(ctx, "user-42")
	// Wait until every endpoint is connected: ring hash connects lazily,
	// and a retry can only go to a READY endpoint.
	fleet.WaitFor(t, ctx, "every backend to answer", func() bool {
		for i := 0; i < 30; i++ {
			_, _ = c.Call(ringhash.WithKey(ctx, strings.Repeat("k", i+1)))
		}
		for _, b := range f.Backends {
			if b.Served() == 0 {
				return false
			}
		}
		return true
	})
	for _, b := range f.Backends {
		b.SetBehavior(fleet.Behavior{ErrorRate: 1, ErrorCode: codes.Unavailable})
		b.ResetCounts()
	}
	for i := 0; i < 20; i++ {
		if _, err := c.Call(key); err == nil {
			t.Fatal("a call succeeded on a fleet that fails every call")
		}
	}
	out := make([]int64, len(f.Backends))
	for i, b := range f.Backends {
		out[i] = b.Served()
	}
	return out
}

func TestRetriesGoToTheKeysNextCandidates(t *testing.T) {
	// grpc-go retries but does not hedge (it parses no hedgingPolicy), so
	// retryPolicy is what runs here; hedged attempts, in flight at once,
	// are kept apart the same way (internal/engine's TestRetriesGoElsewhere).
	for _, tc := range []struct{ name, config string }{{"retryPolicy", retried}} {
		t.Run(tc.name, func(t *testing.T) {
			without := attemptsPerBackend(t, tc.config)
			with := attemptsPerBackend(t, tc.config, grpc.WithChainUnaryInterceptor(attempts.UnaryClientInterceptor()))
			t.Logf("attempts per backend for 20 calls of one key, 3 attempts each: without the interceptor %v, with it %v", without, with)
			// Without: every attempt goes to the key's home.
			homes := 0
			for _, n := range without {
				if n == 60 {
					homes++
				}
			}
			if homes != 1 {
				t.Errorf("without the interceptor: %v, want all 60 attempts on one backend", without)
			}
			// With: each call's three attempts on three backends.
			for i, n := range with {
				if n != 20 {
					t.Errorf("with the interceptor: backend %d saw %d attempts, want 20 (one of each call's three): %v", i, n, with)
				}
			}
		})
	}
}
