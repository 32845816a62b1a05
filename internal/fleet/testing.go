package fleet

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
)

// The helpers below are for tests that use a fleet: they fail the test
// instead of returning errors and clean up when it ends.

// Context returns a context that ends with the test or after d, which
// bounds a whole end-to-end test: waits end as soon as their condition
// holds, so d matters only when something is broken.
func Context(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}

// StartT starts n backends that answer at once and stops them when the test
// ends.
func StartT(t testing.TB, n int) *Fleet {
	t.Helper()
	f, err := Start(n)
	if err != nil {
		t.Fatalf("fleet.Start(%d): %v", n, err)
	}
	t.Cleanup(f.Close)
	return f
}

// DialT opens a channel to addrs with serviceConfig and closes it when the
// test ends. Cleanups run last in, first out, so a channel dialled after
// StartT closes before the fleet it talks to.
func DialT(t testing.TB, addrs []string, serviceConfig string, opts ...grpc.DialOption) *Client {
	t.Helper()
	c, err := Dial(addrs, serviceConfig, opts...)
	if err != nil {
		t.Fatalf("fleet.Dial: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// AddrsOf lists the addresses of bs.
func AddrsOf(bs []*Backend) []string {
	addrs := make([]string, len(bs))
	for i, b := range bs {
		addrs[i] = b.Addr()
	}
	return addrs
}

// WaitFor polls cond until it holds, failing the test if ctx ends first.
// Polling with a short tick rather than sleeping a fixed time keeps tests
// fast on a quick machine and correct on a slow one.
func WaitFor(t testing.TB, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("timed out waiting for %s", what)
		case <-tick.C:
		}
	}
}
