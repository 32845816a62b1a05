package subset_test

// End-to-end: real gRPC channels over loopback to internal/fleet backends,
// pickwise_subset selected by service config with the default child
// (pickwise_p2c). Connections are counted on both sides: by a dialer each
// client installs (grpc.WithContextDialer), which tells which client
// opened which connection, and by the backends themselves (the
// connections they accepted).

import (
	"context"
	"fmt"
	"maps"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	_ "github.com/pickwise/pickwise/balancer/p2c" // the default child
	"github.com/pickwise/pickwise/balancer/subset"
	"github.com/pickwise/pickwise/internal/fleet"
	"github.com/pickwise/pickwise/internal/subsetting"
	"google.golang.org/grpc"
)

// dialCounter counts the connections a channel opens, per address.
type dialCounter struct {
	mu    sync.Mutex
	dials map[string]int
}

func (d *dialCounter) dial(ctx context.Context, addr string) (net.Conn, error) {
	d.mu.Lock()
	d.dials[addr]++
	d.mu.Unlock()
	var nd net.Dialer
	return nd.DialContext(ctx, "tcp", addr)
}

func (d *dialCounter) snapshot() map[string]int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return maps.Clone(d.dials)
}

// dialed lists the addresses dialed at least once, sorted.
func (d *dialCounter) dialed() []string {
	return slices.Sorted(maps.Keys(d.snapshot()))
}

// e2eClient is one client of the fleet with its index.
type e2eClient struct {
	index int
	c     *fleet.Client
	d     *dialCounter
}

// served maps the backend names of a Load result to addresses, sorted.
func served(f *fleet.Fleet, res fleet.LoadResult) []string {
	var out []string
	for _, b := range f.Backends {
		if res.PerBackend[b.Name()] > 0 {
			out = append(out, b.Addr())
		}
	}
	slices.Sort(out)
	return out
}

// settle sends batches of calls until the client has dialed exactly want
// and a whole batch was served by want alone, without a failure. It fails
// the test if ctx ends first; nothing here depends on timing.
func settle(t *testing.T, ctx context.Context, f *fleet.Fleet, cl e2eClient, want []string, what string) fleet.LoadResult {
	t.Helper()
	var res fleet.LoadResult
	fleet.WaitFor(t, ctx, what, func() bool {
		res = cl.c.Load(ctx, 60, 4, 0)
		return res.Failed == 0 && slices.Equal(served(f, res), want) && isSubset(cl.d.dialed(), want)
	})
	return res
}

// isSubset reports whether every element of a is in b.
func isSubset(a, b []string) bool {
	for _, x := range a {
		if !slices.Contains(b, x) {
			return false
		}
	}
	return true
}

// TestE2E: 3 clients with indices 0..2 over 9 backends, subsets of 3.
// The balanced mode gives every backend exactly one client (9 pairs, 9
// backends), each client dials only its 3 backends and its RPCs succeed
// through the child. Then a backend of client 0's subset leaves its
// resolver: client 0 moves to the new subset and never dials the removed
// backend again, while the other clients are untouched.
func TestE2E(t *testing.T) {
	ctx := fleet.Context(t, 60*time.Second)
	f := fleet.StartT(t, 9)
	addrs := f.Addrs()
	const size, count = 3, 3

	var clients []e2eClient
	for i := range count {
		d := &dialCounter{dials: map[string]int{}}
		sc := fmt.Sprintf(`{"loadBalancingConfig": [{%q: {"subsetSize": %d, "clientIndex": %d, "clientCount": %d}}]}`, subset.Name, size, i, count)
		c := fleet.DialT(t, addrs, sc, grpc.WithContextDialer(d.dial))
		clients = append(clients, e2eClient{index: i, c: c, d: d})
	}

	want := make([][]string, count)
	perBackend := map[string]int{}
	for _, cl := range clients {
		w, err := subsetting.Balanced(addrs, size, cl.index, count)
		if err != nil {
			t.Fatal(err)
		}
		want[cl.index] = w
		res := settle(t, ctx, f, cl, w, fmt.Sprintf("client %d to use exactly %v", cl.index, w))
		got := cl.d.dialed()
		if !slices.Equal(got, w) {
			t.Errorf("client %d dialed %v, want its subset %v", cl.index, got, w)
		}
		for _, a := range got {
			perBackend[a]++
		}
		t.Logf("client %d: subset %v, dials %v, last batch %v", cl.index, w, cl.d.snapshot(), res.PerBackend)
	}
	// Balanced: 3 clients x 3 = 9 pairs over 9 backends, one client each;
	// each backend accepted exactly that one client's connection.
	accepted := map[string]int64{}
	for _, b := range f.Backends {
		accepted[b.Addr()] = b.Accepted()
	}
	for _, a := range addrs {
		if perBackend[a] != 1 {
			t.Errorf("backend %s has %d clients, want 1", a, perBackend[a])
		}
		if accepted[a] != 1 {
			t.Errorf("backend %s accepted %d connections, want 1", a, accepted[a])
		}
	}
	t.Logf("clients per backend: %v; connections accepted per backend: %v", perBackend, accepted)

	// Remove one of client 0's backends from client 0's resolver.
	c0 := clients[0]
	removed := want[0][0]
	without := slices.DeleteFunc(slices.Clone(addrs), func(a string) bool { return a == removed })
	c0.c.SetAddrs(without)
	dialsOfRemoved := c0.d.snapshot()[removed]
	want0, err := subsetting.Balanced(without, size, 0, count)
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(want0, removed) {
		t.Fatalf("the new subset %v still holds %s", want0, removed)
	}
	// Dials since the removal must all be in the new subset.
	before := c0.d.snapshot()
	var res fleet.LoadResult
	fleet.WaitFor(t, ctx, fmt.Sprintf("client 0 to move to %v", want0), func() bool {
		res = c0.c.Load(ctx, 60, 4, 0)
		return res.Failed == 0 && slices.Equal(served(f, res), want0)
	})
	after := c0.d.snapshot()
	for a, n := range after {
		if n > before[a] && !slices.Contains(want0, a) {
			t.Errorf("client 0 dialed %s after the removal, outside its new subset %v", a, want0)
		}
	}
	if after[removed] != dialsOfRemoved {
		t.Errorf("client 0 dialed the removed backend %s again", removed)
	}
	t.Logf("client 0 after removing %s: subset %v, dials %v, last batch %v", removed, want0, after, res.PerBackend)

	// The other clients are untouched: same subset, no new dial.
	for _, cl := range clients[1:] {
		dials := cl.d.snapshot()
		settle(t, ctx, f, cl, want[cl.index], fmt.Sprintf("client %d to keep %v", cl.index, want[cl.index]))
		if got := cl.d.snapshot(); !maps.Equal(got, dials) {
			t.Errorf("client %d dialed again: %v -> %v", cl.index, dials, got)
		}
	}
}
