package ringhash

import (
	"context"
	"fmt"
	"testing"

	"github.com/pickwise/pickwise/internal/testkit"
	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// blackHoleRun drives keyed calls (held, 12 at a time, so that bounded
// load spills) and keyless ones over 5 endpoints, one of which fails
// every call at once. It returns the black hole's share of the spilled
// calls and of the keyless ones.
func blackHoleRun(t *testing.T, cfg string) (spilled, keyless float64) {
	t.Helper()
	as := testkit.Addrs(5)
	h := start(t, cfg, testkit.Endpoints(as))
	bh := as[0]
	p := currentPicker(t, h)
	home := func(k string) string { return p.members[p.tbl.first(hashKey(k)).endpoint].Conn.Stats.Addr() }
	end := func(a string, done func(balancer.DoneInfo)) bool {
		if a == bh {
			done(testkit.Outcome(status.Error(codes.Unavailable, "black hole")))
			return true
		}
		return false
	}
	var held []func(balancer.DoneInfo)
	var nSpilled, bhSpilled, bhKeyless int
	const calls = 6000
	for i := 0; i < calls; i++ {
		k := fmt.Sprintf("key-%d", i%500)
		a, done, err := pickCtx(h, WithKey(context.Background(), k))
		if err != nil {
			t.Fatal(err)
		}
		if a != home(k) {
			nSpilled++
			if a == bh {
				bhSpilled++
			}
		}
		if !end(a, done) {
			held = append(held, done)
		}
		if len(held) > 12 {
			held[0](balancer.DoneInfo{})
			held = held[1:]
		}
		// One call in three has no key.
		if i%3 == 0 {
			a, done, err := pickCtx(h, context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if a == bh {
				bhKeyless++
			}
			if !end(a, done) {
				done(balancer.DoneInfo{})
			}
		}
	}
	testkit.Finish(held, nil)
	if nSpilled < 200 {
		t.Fatalf("only %d of %d calls spilled; the test needs bounded load to act", nSpilled, calls)
	}
	return float64(bhSpilled) / float64(nSpilled), float64(bhKeyless) / (calls / 3)
}

// TestBlackHoleDrawsNoOverflow checks that calls without an endpoint of
// their own, bounded load's overflow and keyless calls, avoid an endpoint
// that fails everything, while its keys stay put.
func TestBlackHoleDrawsNoOverflow(t *testing.T) {
	onSpill, onKeyless := blackHoleRun(t, `{"balanceFactor": 1.25}`)
	offSpill, offKeyless := blackHoleRun(t, `{"balanceFactor": 1.25, "failurePenalty": {"enabled": false}}`)
	t.Logf("black hole's share of spilled calls: %.1f%% with the penalty, %.1f%% without", 100*onSpill, 100*offSpill)
	t.Logf("black hole's share of keyless calls: %.1f%% with the penalty, %.1f%% without (fair: 20%%)", 100*onKeyless, 100*offKeyless)
	if onSpill > 0.02 {
		t.Errorf("black hole took %.1f%% of spilled calls with the penalty on, want <= 2%%", 100*onSpill)
	}
	if offSpill < 0.3 {
		t.Errorf("black hole took %.1f%% of spilled calls with the penalty off; the scenario no longer shows the problem", 100*offSpill)
	}
	if onKeyless > 0.02 {
		t.Errorf("black hole took %.1f%% of keyless calls with the penalty on, want <= 2%%", 100*onKeyless)
	}
	if offKeyless < 0.1 {
		t.Errorf("black hole took %.1f%% of keyless calls with the penalty off, want near its fair 20%%", 100*offKeyless)
	}
}
