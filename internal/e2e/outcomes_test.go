package e2e_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/pickwise/pickwise/attempts"
	"github.com/pickwise/pickwise/internal/fleet"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
)

var loadAware = []struct {
	name, config string
	ours         bool
}{
	{"pickwise_p2c", lb("pickwise_p2c", `{}`), true},
	{"pickwise_peak_ewma", lb("pickwise_peak_ewma", `{}`), true},
	{"round_robin", lb("round_robin", `{}`), false},
	{"least_request_experimental", lb("least_request_experimental", `{}`), false},
}

// TestOneTransientFailure: four backends at 2 ms, one caller making
// sequential calls, so that every candidate is idle at each pick. Backend
// 0 fails exactly one call; it must keep most of its share.
func TestOneTransientFailure(t *testing.T) {
	for _, p := range loadAware {
		t.Run(p.name, func(t *testing.T) {
			ctx, f, c := start(t, 4, p.config, nil)
			drive(ctx, c, 1, time.Second, time.Second, nil)
			f.Backends[0].FailNext(1)
			ws := drive(ctx, c, 1, 3*time.Second, time.Second, nil)
			var shares []string
			for _, w := range ws {
				shares = append(shares, fmt.Sprintf("%.1f%%", 100*w.share(f.Backends[0].Name())))
			}
			t.Logf("%s: backend-0's share in each of the 3 s after one failure: %s (fair 25%%)", p.name, strings.Join(shares, ", "))
			if !p.ours {
				return
			}
			for i, w := range ws {
				if s := w.share(f.Backends[0].Name()); s < 0.15 {
					t.Errorf("second %d: backend-0's share %.1f%%, want >= 15%%", i+1, 100*s)
				}
			}
		})
	}
}

// TestBlackHoleAndRecovery: ten backends at 2 ms; backend 0 fails every
// call at once for 5 s, then heals. Its share while broken, and in each
// of the 2 s after healing, at 1 caller and at 40.
func TestBlackHoleAndRecovery(t *testing.T) {
	for _, callers := range []int{1, 40} {
		for _, p := range loadAware {
			t.Run(fmt.Sprintf("%s/callers=%d", p.name, callers), func(t *testing.T) {
				ctx, f, c := start(t, 10, p.config, nil)
				hole := f.Backends[0]
				hole.SetBehavior(fleet.Behavior{Latency: 2 * time.Millisecond, ErrorRate: 1, ErrorCode: codes.Unavailable})
				broken := merged(drive(ctx, c, callers, 5*time.Second, 5*time.Second, nil))
				hole.SetBehavior(fleet.Behavior{Latency: 2 * time.Millisecond})
				after := drive(ctx, c, callers, 2500*time.Millisecond, 500*time.Millisecond, nil)
				s := broken.share(hole.Name())
				var healed []string
				for _, w := range after {
					healed = append(healed, fmt.Sprintf("%.1f%%", 100*w.share(hole.Name())))
				}
				t.Logf("%s, %d callers: black hole's share while broken %.2f%% (%d of %d calls); each half second after healing: %s (fair 10%%)",
					p.name, callers, 100*s, broken.per[hole.Name()], broken.total, strings.Join(healed, ", "))
				if !p.ours {
					return
				}
				if s > 0.01 {
					t.Errorf("black hole's share %.2f%%, want <= 1%%", 100*s)
				}
				// Within 2 s: the half second that ends then.
				if r := after[3].share(hole.Name()); r < 0.05 {
					t.Errorf("share 1.5-2 s after healing %.1f%%, want at least half its fair 10%%", 100*r)
				}
			})
		}
	}
}

var hashPolicies = []struct {
	name, config string
	ours         bool
}{
	{"pickwise_ring_hash", lb("pickwise_ring_hash", `{"requestHashHeader":"`+keyHeader+`"}`), true},
	{"pickwise_ring_hash (maglev, bounded 1.25)", lb("pickwise_ring_hash", `{"requestHashHeader":"`+keyHeader+`","table":"maglev","balanceFactor":1.25}`), true},
	{"ring_hash_experimental", lb("ring_hash_experimental", `{"requestHashHeader":"`+keyHeader+`"}`), false},
}

// TestHashBlackHole: ten backends, 300 keys by header, 20 callers; one
// backend fails every call for 5 s, then heals. Client-visible failures
// once the policy has seen them (after the first second), and how soon
// the broken backend's keys come back.
func TestHashBlackHole(t *testing.T) {
	for _, p := range hashPolicies {
		t.Run(p.name, func(t *testing.T) {
			ctx, f, c := start(t, 10, p.config, keyed300)
			keyOf := func(i int) context.Context { return keyed300(ctx, i) }
			// The keys whose home is backend 3.
			hole := f.Backends[3]
			var homeKeys []string
			for i := 0; i < 300; i++ {
				k := fmt.Sprint("key-", i)
				if b, err := c.Call(keyCtx(ctx, k)); err == nil && b == hole.Name() {
					homeKeys = append(homeKeys, k)
				}
			}
			if len(homeKeys) == 0 {
				t.Fatal("no key lives on backend-3")
			}
			hole.SetBehavior(fleet.Behavior{Latency: 2 * time.Millisecond, ErrorRate: 1, ErrorCode: codes.Unavailable})
			ws := drive(ctx, c, 20, 5*time.Second, time.Second, keyOf)
			seen := merged(ws[1:])
			failRate := float64(seen.failed) / float64(seen.total)
			hole.SetBehavior(fleet.Behavior{Latency: 2 * time.Millisecond})
			// Keys back home: each of its keys is called once every 250ms,
			// with ordinary traffic besides, until 90% land on it again.
			healed := time.Now()
			back := 0
			for time.Since(healed) < 30*time.Second && ctx.Err() == nil {
				drive(ctx, c, 20, 250*time.Millisecond, 250*time.Millisecond, keyOf)
				back = 0
				for _, k := range homeKeys {
					if b, err := c.Call(keyCtx(ctx, k)); err == nil && b == hole.Name() {
						back++
					}
				}
				if back*10 >= len(homeKeys)*9 {
					break
				}
			}
			took := time.Since(healed)
			t.Logf("%s: client-visible failures after the first second %.2f%% of %d calls (backend-3 is home to %d of 300 keys); %d of them back home %.1f s after healing",
				p.name, 100*failRate, seen.total, len(homeKeys), back, took.Seconds())
			if !p.ours {
				return
			}
			if failRate > 0.02 {
				t.Errorf("client-visible failures %.2f%%, want <= 2%%", 100*failRate)
			}
			if back*10 < len(homeKeys)*9 {
				t.Errorf("%d of %d keys back home 30 s after healing, want >= 90%%", back, len(homeKeys))
			}
		})
	}
}

// retryConfig adds grpc's retry policy (3 attempts on UNAVAILABLE) to a
// service config naming one policy.
func retryConfig(sc string) string {
	return strings.TrimSuffix(sc, "}") + `,"methodConfig":[{"name":[{"service":"` + fleet.ServiceName + `"}],` +
		`"retryPolicy":{"maxAttempts":3,"initialBackoff":"0.005s","maxBackoff":"0.02s","backoffMultiplier":2,"retryableStatusCodes":["UNAVAILABLE"]}}]}`
}

// TestRetryStorm: one black hole among ten backends, keyed calls, grpc's
// retry policy with three attempts. With the attempts interceptor, a
// retry goes to the key's next candidate: no call fails. Attempts per
// successful call count what the black hole costs the fleet.
func TestRetryStorm(t *testing.T) {
	type variant struct {
		name, config string
		interceptor  bool
		ours         bool
	}
	variants := []variant{
		{"pickwise_ring_hash + attempts", retryConfig(hashPolicies[0].config), true, true},
		{"pickwise_ring_hash", retryConfig(hashPolicies[0].config), false, false},
		{"ring_hash_experimental", retryConfig(hashPolicies[2].config), false, false},
		{"pickwise_p2c + attempts", retryConfig(loadAware[0].config), true, true},
		{"round_robin", retryConfig(loadAware[2].config), false, false},
		{"least_request_experimental", retryConfig(loadAware[3].config), false, false},
	}
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			var opts []grpc.DialOption
			if v.interceptor {
				opts = append(opts, grpc.WithChainUnaryInterceptor(attempts.UnaryClientInterceptor()))
			}
			ctx, f, c := start(t, 10, v.config, keyed300, opts...)
			keyOf := func(i int) context.Context { return keyed300(ctx, i) }
			hole := f.Backends[3]
			hole.SetBehavior(fleet.Behavior{ErrorRate: 1, ErrorCode: codes.Unavailable})
			for _, b := range f.Backends {
				b.ResetCounts()
			}
			const calls = 3000
			failed := 0
			for i := 0; i < calls; i++ {
				if _, err := c.Call(keyOf(i)); err != nil {
					failed++
				}
			}
			var served int64
			for _, b := range f.Backends {
				served += b.Served()
			}
			perSuccess := float64(served) / float64(max(calls-failed, 1))
			t.Logf("%s: %d of %d calls failed; %.3f attempts reached a backend per successful call", v.name, failed, calls, perSuccess)
			if v.ours && failed != 0 {
				t.Errorf("%d of %d calls failed, want 0", failed, calls)
			}
		})
	}
}
