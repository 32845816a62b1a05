package fleet

import (
	"context"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

const roundRobin = `{"loadBalancingConfig":[{"round_robin":{}}]}`

// testTimeout bounds every wait in these tests; waits end as soon as their
// condition holds, so it only matters when something is broken.
const testTimeout = 5 * time.Second

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// setup starts n backends and a round-robin client over all of them. Both are
// closed when the test ends, client first so no RPC sees a dying server.
func setup(t *testing.T, n int) (*Fleet, *Client) {
	t.Helper()
	f := StartT(t, n)
	// Short reconnect backoff so a restarted backend is picked up quickly;
	// the default starts at one second.
	c := DialT(t, f.Addrs(), roundRobin, grpc.WithConnectParams(grpc.ConnectParams{
		Backoff:           backoff.Config{BaseDelay: 20 * time.Millisecond, Multiplier: 1.6, MaxDelay: 200 * time.Millisecond},
		MinConnectTimeout: time.Second,
	}))
	return f, c
}

// ctx returns a context that ends with the test or after testTimeout.
func ctx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

// waitHit makes calls until every named backend has answered. Round robin
// only spreads load once each subchannel is connected, and how long that takes
// is up to the scheduler, so tests warm up with this instead of sleeping.
func waitHit(t *testing.T, c *Client, names ...string) {
	t.Helper()
	ctx := ctx(t)
	seen := make(map[string]bool)
	for len(seen) < len(names) {
		b, err := c.Call(ctx, grpc.WaitForReady(true))
		if ctx.Err() != nil {
			t.Fatalf("backends %v did not all answer in %v; saw %v (last error %v)", names, testTimeout, seen, err)
		}
		for _, n := range names {
			if err == nil && b == n {
				seen[n] = true
			}
		}
	}
}

func names(f *Fleet) []string {
	var ns []string
	for _, b := range f.Backends {
		ns = append(ns, b.Name())
	}
	return ns
}

func TestRoundRobinHitsEveryBackend(t *testing.T) {
	f, c := setup(t, 3)
	waitHit(t, c, names(f)...)
	for _, b := range f.Backends {
		b.ResetCounts()
	}

	ctx := ctx(t)
	got := make(map[string]int64)
	for range 30 {
		b, err := c.Call(ctx, grpc.WaitForReady(true))
		if err != nil {
			t.Fatalf("Call: %v", err)
		}
		got[b]++
	}
	for _, b := range f.Backends {
		if got[b.Name()] == 0 {
			t.Errorf("%s got no calls; distribution %v", b.Name(), got)
		}
		// Every successful call runs exactly one handler, so the client's
		// attribution and the server's count must agree.
		if got[b.Name()] != b.Served() {
			t.Errorf("%s: client saw %d calls, server served %d", b.Name(), got[b.Name()], b.Served())
		}
	}
}

func TestErrorRateFailsAndAttributes(t *testing.T) {
	f, c := setup(t, 3)
	waitHit(t, c, names(f)...)
	bad := f.Backends[1]
	bad.SetBehavior(Behavior{ErrorRate: 1, ErrorCode: codes.Unavailable})

	ctx := ctx(t)
	badHits := 0
	for range 30 {
		b, err := c.Call(ctx)
		switch {
		case b == bad.Name():
			badHits++
			if status.Code(err) != codes.Unavailable {
				t.Errorf("call to %s: got %v, want code Unavailable", b, err)
			}
		case err != nil:
			t.Errorf("call to %q failed: %v", b, err)
		}
	}
	if badHits == 0 {
		t.Errorf("no call reached %s", bad.Name())
	}

	// Load attributes failures through the trailer too: every failure must be
	// charged to the failing backend.
	res := c.Load(ctx, 30, 3, time.Second)
	if res.Total != 30 {
		t.Errorf("Load made %d calls, want 30", res.Total)
	}
	if res.Failed == 0 || res.Failed != res.PerBackend[bad.Name()] {
		t.Errorf("Load: %d failed, %d attributed to %s; want equal and > 0 (%+v)", res.Failed, res.PerBackend[bad.Name()], bad.Name(), res)
	}
}

func TestErrorCodeDefaultsToUnavailable(t *testing.T) {
	f, c := setup(t, 1)
	f.Backends[0].SetBehavior(Behavior{ErrorRate: 1})
	b, err := c.Call(ctx(t), grpc.WaitForReady(true))
	if status.Code(err) != codes.Unavailable || b != f.Backends[0].Name() {
		t.Fatalf("Call = %q, %v; want %q, code Unavailable", b, err, f.Backends[0].Name())
	}
}

func TestFailNextFailsExactlyN(t *testing.T) {
	f, c := setup(t, 1)
	waitHit(t, c, names(f)...)
	b := f.Backends[0]
	b.FailNext(2)
	var got []codes.Code
	for range 4 {
		_, err := c.Call(ctx(t), grpc.WaitForReady(true))
		got = append(got, status.Code(err))
	}
	if want := []codes.Code{codes.Unavailable, codes.Unavailable, codes.OK, codes.OK}; !slices.Equal(got, want) {
		t.Errorf("codes after FailNext(2) = %v, want %v", got, want)
	}
	// The one-off failures leave the behavior as it was.
	if diff := cmp.Diff(Behavior{ErrorCode: codes.Unavailable}, b.Behavior()); diff != "" {
		t.Errorf("Behavior after FailNext (-want +got):\n%s", diff)
	}
}

// TestBehaviorTranslation checks the one place a fleet Behavior becomes
// the server's: values the server would reject are clamped, and what the
// backend reports back is what it does.
func TestBehaviorTranslation(t *testing.T) {
	f, err := Start(1)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := f.Backends[0]
	for _, tc := range []struct {
		set, want Behavior
	}{
		{Behavior{}, Behavior{ErrorCode: codes.Unavailable}},
		{
			Behavior{Latency: 5 * time.Millisecond, ErrorRate: 0.5, ErrorCode: codes.ResourceExhausted, ErrorLatency: time.Millisecond},
			Behavior{Latency: 5 * time.Millisecond, ErrorRate: 0.5, ErrorCode: codes.ResourceExhausted, ErrorLatency: time.Millisecond},
		},
		{
			Behavior{Latency: -time.Second, ErrorRate: 3, ErrorLatency: -1},
			Behavior{ErrorRate: 1, ErrorCode: codes.Unavailable},
		},
		{Behavior{ErrorRate: math.NaN()}, Behavior{ErrorCode: codes.Unavailable}},
		{Behavior{ErrorRate: -1, ErrorCode: codes.Code(99)}, Behavior{ErrorCode: codes.Unknown}},
	} {
		b.SetBehavior(tc.set)
		if diff := cmp.Diff(tc.want, b.Behavior()); diff != "" {
			t.Errorf("SetBehavior(%+v): Behavior() (-want +got):\n%s", tc.set, diff)
		}
	}
}

func TestLatencyHonoursDeadline(t *testing.T) {
	f, c := setup(t, 1)
	waitHit(t, c, names(f)...)
	// A minute-long latency must not outlive the call's deadline; if the
	// handler ignored cancellation, Close (and goleak) would notice.
	f.Backends[0].SetBehavior(Behavior{Latency: time.Minute})
	res := c.Load(ctx(t), 2, 2, 50*time.Millisecond)
	if res.Failed != 2 {
		t.Errorf("Load with slow backend: %+v, want 2 failures", res)
	}
}

func TestStopRestartSameAddress(t *testing.T) {
	f, c := setup(t, 3)
	waitHit(t, c, names(f)...)
	down := f.Backends[0]
	addr := down.Addr()

	down.Stop()
	if down.Running() {
		t.Fatal("Running() = true after Stop")
	}
	down.Stop() // idempotent
	down.ResetCounts()
	// The survivors keep serving; WaitForReady rides out the moment the
	// client notices the lost connection.
	waitHit(t, c, f.Backends[1].Name(), f.Backends[2].Name())
	if n := down.Served(); n != 0 {
		t.Errorf("stopped backend served %d calls", n)
	}

	if err := down.Restart(); err != nil {
		t.Fatalf("Restart: %v", err)
	}
	if !down.Running() || down.Addr() != addr {
		t.Fatalf("after Restart: Running=%v Addr=%s, want true %s", down.Running(), down.Addr(), addr)
	}
	waitHit(t, c, down.Name())
	// One connection before the crash and one after, counted across it.
	if n := down.Accepted(); n != 2 {
		t.Errorf("Accepted = %d across a restart, want 2", n)
	}
}

func TestSetAddrsMovesTraffic(t *testing.T) {
	f, c := setup(t, 3)
	waitHit(t, c, names(f)...)

	subset := f.Backends[1:]
	c.SetAddrs([]string{subset[0].Addr(), subset[1].Addr()})
	for _, b := range f.Backends {
		b.ResetCounts()
	}
	// SetAddrs returns after the balancer has dropped backend-0, so from here
	// on no pick can land on it.
	res := c.Load(ctx(t), 30, 3, time.Second, grpc.WaitForReady(true))
	if res.Failed != 0 || res.Total != 30 {
		t.Fatalf("Load: %+v, want 30 calls and no failures", res)
	}
	if n := f.Backends[0].Served(); n != 0 {
		t.Errorf("removed backend served %d calls", n)
	}
	for _, b := range subset {
		if res.PerBackend[b.Name()] == 0 {
			t.Errorf("%s got no calls: %v", b.Name(), res.PerBackend)
		}
	}
}

func TestFleetHelpers(t *testing.T) {
	f, err := Start(2)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for i, b := range f.Backends {
		if f.ByAddr(b.Addr()) != b {
			t.Errorf("ByAddr(%s) did not return backend %d", b.Addr(), i)
		}
	}
	if f.ByAddr("127.0.0.1:1") != nil {
		t.Error("ByAddr of unknown address is not nil")
	}
	if _, err := Start(0); err == nil {
		t.Error("Start(0) succeeded")
	}
	// Accepted is the server's count of client connections: none yet.
	for _, b := range f.Backends {
		if n := b.Accepted(); n != 0 {
			t.Errorf("%s accepted %d connections before any client", b.Name(), n)
		}
	}
	f.Close()
	f.Close() // idempotent
	for _, b := range f.Backends {
		if b.Running() {
			t.Errorf("%s still running after Close", b.Name())
		}
	}
}
