package ringhash

import (
	"context"
	"testing"

	"github.com/pickwise/pickwise/internal/testkit"
	"google.golang.org/grpc/balancer"
)

// TestMetricsPicksByReason checks each reason a ring hash pick is counted
// under, and the in-flight costs.
func TestMetricsPicksByReason(t *testing.T) {
	as := testkit.Addrs(4)
	h := start(t, `{"balanceFactor": 1.25}`, testkit.Endpoints(as))
	keys := keyNames(200)
	placement(t, h, keys)
	if got := h.PicksByReason("ring_hash"); got["home"] != 200 || len(got) != 1 {
		t.Fatalf("picks by reason for 200 keys on an idle fleet = %v, want 200 home", got)
	}

	// No key: a random place on the table.
	for i := 0; i < 30; i++ {
		_, done, err := pickCtx(h, context.Background())
		if err != nil {
			t.Fatal(err)
		}
		done(balancer.DoneInfo{})
	}
	if got := h.PicksByReason("ring_hash"); got["random"] != 30 {
		t.Errorf("picks by reason after 30 calls without a key = %v, want 30 random", got)
	}

	// One hot key with calls held: past its endpoint's cap, calls spill.
	hot := WithKey(context.Background(), "hot")
	var pending []func(balancer.DoneInfo)
	for i := 0; i < 40; i++ {
		_, done, err := pickCtx(h, hot)
		if err != nil {
			t.Fatal(err)
		}
		pending = append(pending, done)
	}
	got := h.PicksByReason("ring_hash")
	if got["spilled"] == 0 {
		t.Errorf("picks by reason with a hot key held = %v, want some spilled", got)
	}
	n := len(h.Metrics.Values("pickwise.ring_hash.endpoint_cost"))
	if err := h.Metrics.Collect(); err != nil {
		t.Fatal(err)
	}
	costs := h.Metrics.Values("pickwise.ring_hash.endpoint_cost")[n:]
	sum := 0.0
	for _, c := range costs {
		sum += c
	}
	if len(costs) != 4 || sum != 40 {
		t.Errorf("endpoint costs %v, want the 40 held calls over 4 endpoints", costs)
	}
	testkit.Finish(pending, nil)

	// The key's own endpoint down: its calls walk on.
	k := keyFor(t, h, as[0])
	fail(t, h, as[0], k, 1)
	pickKey(t, h, k)
	if got := h.PicksByReason("ring_hash"); got["unavailable"] != 1 {
		t.Errorf("picks by reason with the key's endpoint down = %v, want 1 unavailable", got)
	}
	if v, ok := h.Metrics.Last("pickwise.ring_hash.endpoints_ready"); !ok || v != 3 {
		t.Errorf("endpoints_ready with one down = %v (recorded %v), want 3", v, ok)
	}
}
