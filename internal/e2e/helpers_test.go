package e2e_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	_ "github.com/pickwise/pickwise/balancer/p2c"
	_ "github.com/pickwise/pickwise/balancer/peakewma"
	_ "github.com/pickwise/pickwise/balancer/ringhash"
	"github.com/pickwise/pickwise/internal/fleet"
	"google.golang.org/grpc"
	_ "google.golang.org/grpc/balancer/leastrequest"
	_ "google.golang.org/grpc/balancer/ringhash"
	"google.golang.org/grpc/metadata"
)

// e2eTimeout bounds every test; the scenarios take seconds.
const e2eTimeout = 2 * time.Minute

// scale is a test's size: full in the full run, short under -short. A
// short run checks every property the full one checks, on fewer calls and
// on shorter phases where the property does not depend on their length.
func scale[T any](full, short T) T {
	if testing.Short() {
		return short
	}
	return full
}

// shortParallel lets a subtest run beside its siblings under -short (two
// at a time on two cores, -parallel's default). Only subtests whose one
// caller makes one call at a time, under a policy that does not pick by
// latency, call it: such a caller waits on its backends nearly all the
// time, so a sibling takes little CPU from it, and its picks do not
// depend on how fast the answers are. What such a subtest checks is calls
// counted; where a slower call rate moves a share (a black hole's, at one
// caller: the same few calls over fewer), it moves it toward failing, not
// away. The full run keeps every subtest to itself.
func shortParallel(t *testing.T) {
	if testing.Short() {
		t.Parallel()
	}
}

// keyHeader carries the hash key of keyed calls.
const keyHeader = "x-key"

// lb is a service config naming one policy.
func lb(policy, cfg string) string {
	return fmt.Sprintf(`{"loadBalancingConfig":[{%q:%s}]}`, policy, cfg)
}

// window is what one stretch of a run saw.
type window struct {
	per    map[string]int // calls per answering backend, failures included
	failed int
	total  int
}

func (w window) share(backend string) float64 {
	if w.total == 0 {
		return 0
	}
	return float64(w.per[backend]) / float64(w.total)
}

// drive sends calls from workers goroutines for d, each call with the
// context ctxFor gives it (nil: ctx), and returns what each window of the
// run saw.
func drive(ctx context.Context, c *fleet.Client, workers int, d, every time.Duration, ctxFor func(i int) context.Context) []window {
	n := int((d + every - 1) / every)
	out := make([]window, n)
	for i := range out {
		out[i].per = map[string]int{}
	}
	var mu sync.Mutex
	var seq int
	start := time.Now()
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for ctx.Err() == nil {
				el := time.Since(start)
				if el >= d {
					return
				}
				mu.Lock()
				i := seq
				seq++
				mu.Unlock()
				cctx := ctx
				if ctxFor != nil {
					cctx = ctxFor(i)
				}
				callCtx, cancel := context.WithTimeout(cctx, 5*time.Second)
				backend, err := c.Call(callCtx)
				cancel()
				w := min(int(el/every), n-1)
				mu.Lock()
				out[w].total++
				if backend != "" {
					out[w].per[backend]++
				}
				if err != nil {
					out[w].failed++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return out
}

// merged adds windows up.
func merged(ws []window) window {
	m := window{per: map[string]int{}}
	for _, w := range ws {
		for b, n := range w.per {
			m.per[b] += n
		}
		m.failed += w.failed
		m.total += w.total
	}
	return m
}

// keyCtx is a context whose calls carry key k.
func keyCtx(ctx context.Context, k string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, keyHeader, k)
}

// warm sends calls until every backend of f has answered one.
func warm(t *testing.T, ctx context.Context, c *fleet.Client, f *fleet.Fleet, ctxFor func(int) context.Context) {
	t.Helper()
	seen := map[string]bool{}
	for i := 0; len(seen) < len(f.Backends); i++ {
		if ctx.Err() != nil {
			t.Fatalf("warm-up: only %d of %d backends answered", len(seen), len(f.Backends))
		}
		cctx := ctx
		if ctxFor != nil {
			cctx = ctxFor(i)
		}
		if b, err := c.Call(cctx); err == nil {
			seen[b] = true
		}
	}
}

// start starts n backends answering in 2 ms, dials them with
// serviceConfig and warms the channel (with keyFor's keys, if set).
func start(t *testing.T, n int, serviceConfig string, keyFor func(context.Context, int) context.Context, opts ...grpc.DialOption) (context.Context, *fleet.Fleet, *fleet.Client) {
	t.Helper()
	ctx := fleet.Context(t, e2eTimeout)
	f := fleet.StartT(t, n)
	setLatency(f, 2*time.Millisecond)
	c := fleet.DialT(t, f.Addrs(), serviceConfig, opts...)
	var ctxFor func(int) context.Context
	if keyFor != nil {
		ctxFor = func(i int) context.Context { return keyFor(ctx, i) }
	}
	warm(t, ctx, c, f, ctxFor)
	return ctx, f, c
}

// keyed300 gives call i one of 300 keys.
func keyed300(ctx context.Context, i int) context.Context {
	return keyCtx(ctx, fmt.Sprint("key-", i%300))
}

// setLatency gives every backend of f the same answer time.
func setLatency(f *fleet.Fleet, d time.Duration) {
	for _, b := range f.Backends {
		bh := b.Behavior()
		bh.Latency = d
		b.SetBehavior(bh)
	}
}
