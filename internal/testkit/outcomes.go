package testkit

import (
	"context"
	"errors"
	"time"

	"google.golang.org/grpc/balancer"
)

// Caller is one sequential caller's run over a Harness in virtual time:
// every call takes Every (its Done runs once the clock has moved that
// far), finishes before the next is picked, and ends with what Backend
// says for the address it was placed on when it was picked.
type Caller struct {
	H *Harness
	// Every is the virtual time between two calls.
	Every time.Duration
	// Backend is the outcome of a call to addr at elapsed since the run
	// began; nil means success.
	Backend func(addr string, elapsed time.Duration) error
	// Ctx, if set, is the context of every pick (a call's attempt record,
	// a ring hash key); Context, if set, makes a fresh one per call and
	// wins over Ctx.
	Ctx     context.Context
	Context func(call int) context.Context

	elapsed time.Duration
	calls   int
}

// Run makes calls for d of virtual time and returns the calls each
// address received in each window of that length (the last may be
// partial).
func (c *Caller) Run(d, window time.Duration) []map[string]int {
	c.H.T.Helper()
	var out []map[string]int
	end := c.elapsed + d
	start := c.elapsed
	for c.elapsed < end {
		w := int((c.elapsed - start) / window)
		for len(out) <= w {
			out = append(out, map[string]int{})
		}
		ctx := c.Ctx
		if c.Context != nil {
			ctx = c.Context(c.calls)
		}
		res, err := c.H.CC.State().Picker.Pick(balancer.PickInfo{Ctx: ctx})
		if err != nil {
			c.H.T.Fatalf("Pick at %v: %v", c.elapsed, err)
		}
		addr := res.SubConn.(*SubConn).Addr()
		out[w][addr]++
		var callErr error
		if c.Backend != nil {
			callErr = c.Backend(addr, c.elapsed)
		}
		c.calls++
		c.elapsed += c.Every
		c.H.Clock.Advance(c.Every)
		if res.Done != nil {
			res.Done(Outcome(callErr))
		}
	}
	return out
}

// Share is addr's share of the calls in counts.
func Share(counts map[string]int, addr string) float64 {
	total := 0
	for _, n := range counts {
		total += n
	}
	if total == 0 {
		return 0
	}
	return float64(counts[addr]) / float64(total)
}

// StartLazy is Start for a lazy policy (ring hash), whose endpoints
// connect only when a pick asks for them: keyless picks wake them, one at
// a time, and each is made READY as its SubConn appears.
func (h *Harness) StartLazy(as ...string) {
	h.T.Helper()
	if err := h.Update(Endpoints(as)...); err != nil {
		h.T.Fatal(err)
	}
	ready := map[*SubConn]bool{}
	for len(ready) < len(as) {
		if h.Ctx.Err() != nil {
			h.T.Fatalf("only %d of %d endpoints connected", len(ready), len(as))
		}
		res, err := h.CC.State().Picker.Pick(balancer.PickInfo{Ctx: context.Background()})
		if err == nil {
			res.Done(balancer.DoneInfo{})
		} else if !errors.Is(err, balancer.ErrNoSubConnAvailable) {
			h.T.Fatal(err)
		}
		for _, sc := range h.CC.SubConns() {
			if !ready[sc] {
				ready[sc] = true
				if err := h.CC.SetReady(h.Ctx, sc.Addr()); err != nil {
					h.T.Fatal(err)
				}
			}
		}
	}
}
