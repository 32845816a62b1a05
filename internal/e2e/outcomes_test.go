package e2e_test

import (
	"context"
	"fmt"
	"math"
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
	// timed: the policy picks by measured latency. At one caller, with
	// nothing in flight, its shares of equal backends follow their latency
	// noise, which a neighbour's load adds to, so its subtests never run
	// beside another (see shortParallel).
	timed bool
}{
	{"pickwise_p2c", lb("pickwise_p2c", `{}`), true, false},
	{"pickwise_peak_ewma", lb("pickwise_peak_ewma", `{}`), true, true},
	{"round_robin", lb("round_robin", `{}`), false, false},
	{"least_request_experimental", lb("least_request_experimental", `{}`), false, false},
}

// TestOneTransientFailure: four backends at 2 ms, one caller making
// sequential calls, so that every candidate is idle at each pick.
// Backend 0 fails exactly one call; it must keep most
// of its share in each second after it (a latency policy's seconds: see
// below). The short run checks the first two seconds, where the failure
// weighs most: its evidence is gone within a few dozen of the backend's
// outcomes, and each check's window is still a second, so the bound is
// the same. A latency policy's full run has a fourth second, so that its
// mean is over more of its noise, and it gets a second run on new
// backends and a new channel when the first misses a bound (see below).
// The baselines, which only log, get one second.
func TestOneTransientFailure(t *testing.T) {
	for _, p := range loadAware {
		seconds := scale(3, 2)
		switch {
		case !p.ours:
			seconds = scale(3, 1)
		case p.timed:
			seconds = scale(4, 2)
		}
		t.Run(p.name, func(t *testing.T) {
			if !p.timed {
				shortParallel(t)
			}
			shares := oneFailure(t, p.config, seconds)
			if !p.ours {
				return
			}
			problems := oneFailureProblems(shares, p.timed)
			if len(problems) > 0 && p.timed {
				// A latency policy at one caller follows its backends'
				// noise (see oneFailureProblems). A lone pause is
				// forgiven, but two on backend 0 within the decay time
				// read as a slowdown and can hold it under the mean's
				// bound for seconds. Such pauses are rare and do not repeat;
				// what the failure itself does repeats every time, so a
				// second run on new backends and a new channel decides.
				// The first fleet stays up, idle, until the test ends.
				t.Logf("first run: %s; running once more on new backends", strings.Join(problems, "; "))
				problems = oneFailureProblems(oneFailure(t, p.config, seconds), p.timed)
			}
			for _, m := range problems {
				t.Error(m)
			}
		})
	}
}

// oneFailure starts TestOneTransientFailure's fleet under config, makes
// backend 0 fail one call after a second of calls, and returns backend 0's
// share in each of the seconds after it.
func oneFailure(t *testing.T, config string, seconds int) []float64 {
	ctx, f, c := start(t, 4, config, nil)
	drive(ctx, c, 1, time.Second, time.Second, nil)
	f.Backends[0].FailNext(1)
	ws := drive(ctx, c, 1, time.Duration(seconds)*time.Second, time.Second, nil)
	shares := make([]float64, len(ws))
	var logged []string
	for i, w := range ws {
		shares[i] = w.share(f.Backends[0].Name())
		logged = append(logged, fmt.Sprintf("%.1f%%", 100*shares[i]))
	}
	t.Logf("backend-0's share in each of the %d s after one failure: %s (fair 25%%)", seconds, strings.Join(logged, ", "))
	return shares
}

// oneFailureProblems checks backend 0's shares after its one failure: at
// least 15% on average, and in each second 15% (10% for a latency
// policy, timed).
//
// A latency policy at one caller follows its backends' noise: a call
// that a pause made slow is forgiven when it is a lone far peak, but the
// close calls between idle candidates, and pauses of less than three
// times a call, still move a second's share by chance: with the failure,
// under the race detector, 16.9-33.6% in four runs. So each of its
// seconds is bounded against starvation (an ejection or a penalty at its
// cap leaves a second near 0%), and their mean as tightly as p2c's
// seconds.
func oneFailureProblems(shares []float64, timed bool) []string {
	perSecond := 0.15
	if timed {
		perSecond = 0.10
	}
	var problems []string
	sum := 0.0
	for i, s := range shares {
		sum += s
		if s < perSecond {
			problems = append(problems, fmt.Sprintf("second %d: backend-0's share %.1f%%, want >= %.0f%%", i+1, 100*s, 100*perSecond))
		}
	}
	if mean := sum / float64(len(shares)); mean < 0.15 {
		problems = append(problems, fmt.Sprintf("backend-0's mean share over the %d s %.1f%%, want >= 15%%", len(shares), 100*mean))
	}
	return problems
}

// TestBlackHoleAndRecovery: ten backends at 2 ms; backend 0 fails every
// call at once for 5 s, then heals. Its share while broken, and in each
// of the 2 s after healing, at 1 caller and at 40.
//
// What the hole gets while broken is about a fixed number of calls (the
// failures that eject it) plus a probe every probe interval or so. At one
// caller, a few hundred calls a second, that is a share that shrinks as
// the phase grows, so our policies keep the 5 s phase in the short run
// too. At 40 callers the same dozen calls are under a tenth of the 1%
// bound after 1.5 s already (of some 15,000 calls; 6,000 under -race), so
// the short run breaks the hole for that long.
// Recovery is timed from healing, so the windows up to the asserted one
// (1.5-2 s) stay. The baselines, which only log, get a second of each.
// blackHoleBudget is the calls TestBlackHoleAndRecovery lets the hole
// have while broken however few calls the phase holds: what ejecting it
// costs (see the test), with a little slack.
const blackHoleBudget = 16

func TestBlackHoleAndRecovery(t *testing.T) {
	for _, callers := range []int{1, 40} {
		for _, p := range loadAware {
			brokenFor := scale(5*time.Second, 1500*time.Millisecond)
			healedFor := scale(2500*time.Millisecond, 2000*time.Millisecond)
			switch {
			case !p.ours:
				brokenFor = scale(5*time.Second, time.Second)
				healedFor = scale(2500*time.Millisecond, time.Second)
			case callers == 1:
				brokenFor = 5 * time.Second
			}
			t.Run(fmt.Sprintf("%s/callers=%d", p.name, callers), func(t *testing.T) {
				if callers == 1 && !p.timed {
					shortParallel(t)
				}
				ctx, f, c := start(t, 10, p.config, nil)
				hole := f.Backends[0]
				hole.SetBehavior(fleet.Behavior{Latency: 2 * time.Millisecond, ErrorRate: 1, ErrorCode: codes.Unavailable})
				broken := merged(drive(ctx, c, callers, brokenFor, brokenFor, nil))
				hole.SetBehavior(fleet.Behavior{Latency: 2 * time.Millisecond})
				after := drive(ctx, c, callers, healedFor, 500*time.Millisecond, nil)
				s := broken.share(hole.Name())
				var healed []string
				for _, w := range after {
					healed = append(healed, fmt.Sprintf("%.1f%%", 100*w.share(hole.Name())))
				}
				t.Logf("%s, %d callers: black hole's share while broken %.2f%% (%d of %d calls in %v); each half second after healing: %s (fair 10%%)",
					p.name, callers, 100*s, broken.per[hole.Name()], broken.total, brokenFor, strings.Join(healed, ", "))
				if !p.ours {
					return
				}
				// The bound is 1%, or the fixed cost of ejecting it where
				// that is more: the five failures ejection needs, the few
				// the penalty lets through before, and a probe per
				// ejection (1 s, then 2 s, 4 s), about 13 calls in all. At
				// one caller on a slow machine, under -race, 5 s is only
				// some 1,200 calls, where those 13 are just over 1%.
				if limit := max(0.01, blackHoleBudget/float64(broken.total)); s > limit {
					t.Errorf("black hole's share %.2f%% (%d calls), want <= %.2f%%: 1%%, or %d calls", 100*s, broken.per[hole.Name()], 100*limit, blackHoleBudget)
				}
				// Within 2 s: the half second that ends then holds at least
				// half the fair 10%. At one caller that half second is only
				// some 180 calls, where a backend at its fair share falls
				// below 5% by chance now and then (sd 2.2 points), so the
				// bound is also never above the fair share less three
				// standard deviations of that many calls.
				//
				// A latency policy at one caller is judged on the best half
				// second up to then instead: with nothing in flight, one
				// slow answer (the client's own garbage collector is
				// enough) prices any backend out for seconds, healed or
				// not, so a backend back at its share can leave it again
				// by chance (7.7%, 7.0%, 3.2%, 2.5% in one run; see also
				// TestOneTransientFailure's control). Recovery is what is
				// asserted: a hole that stays out fails either way.
				windows := after[3:4]
				if p.timed && callers == 1 {
					windows = after[:4]
				}
				best, bestWant, bestTotal := -1.0, 0.0, 0
				for _, w := range windows {
					sd := math.Sqrt(0.1 * 0.9 / float64(max(w.total, 1)))
					want := min(0.05, 0.1-3*sd)
					if r := w.share(hole.Name()); best < 0 || r-want > best-bestWant {
						best, bestWant, bestTotal = r, want, w.total
					}
				}
				if best < bestWant {
					t.Errorf("share %.1f%% of %d calls in the best checked half second up to 2 s after healing, want at least %.1f%% (half its fair 10%%, or 3 sd below it)", 100*best, bestTotal, 100*bestWant)
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
// the broken backend's keys come back. The short run breaks it for 1.5 s
// and counts failures over the last half second, some 3,000 calls (700
// under -race). Once the hole is out, what fails is its probes, about one
// a second, so the rate does not grow as the window shrinks, and the 2%
// bound is still over ten failures at the smaller count.
func TestHashBlackHole(t *testing.T) {
	brokenFor := scale(5*time.Second, 1500*time.Millisecond)
	every := scale(time.Second, 500*time.Millisecond)
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
			ws := drive(ctx, c, 20, brokenFor, every, keyOf)
			seen := merged(ws[int(time.Second/every):])
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
// successful call count what the black hole costs the fleet. The short
// run makes 600 calls, each of the 300 keys twice: the calls before the
// hole is ejected and a probe or two after.
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
			shortParallel(t)
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
			calls := scale(3000, 600)
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
