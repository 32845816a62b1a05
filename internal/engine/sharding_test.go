package engine_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/pickwise/pickwise/internal/testkit"
	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/connectivity"
)

// With every endpoint failed, a call fails with an error that names the
// policy and a connection error of an endpoint still in the list: the
// latest one's, or another's once that endpoint is gone.
func TestAllFailedNamesALiveEndpointsError(t *testing.T) {
	h := testkit.NewHarness(t, "pickwise_p2c", `{}`)
	as := testkit.Addrs(2)
	h.Start(as...)
	h.Down(as[0], errors.New("refused by a"))
	h.Down(as[1], errors.New("refused by b"))
	if err := h.CC.WaitForState(h.Ctx, connectivity.TransientFailure); err != nil {
		t.Fatal(err)
	}
	pickErr := func() string {
		_, err := h.CC.State().Picker.Pick(balancer.PickInfo{})
		if err == nil {
			t.Fatal("a pick succeeded with every endpoint failed")
		}
		return err.Error()
	}
	if got := pickErr(); !strings.Contains(got, "pickwise_p2c") || !strings.Contains(got, "refused by b") {
		t.Errorf("pick error %q, want the policy's name and the latest connection error", got)
	}
	if err := h.Update(testkit.Endpoints(as[:1])...); !errors.Is(err, nil) {
		t.Fatal(err)
	}
	if got := pickErr(); !strings.Contains(got, "refused by a") {
		t.Errorf("pick error after removing the latest failure %q, want the remaining endpoint's", got)
	}
}

// A large fleet's changes that leave the channel READY are published
// together, once per coalescing window; the first READY endpoint and the
// loss of the last one are published at once.
func TestLargeFleetChangesCoalesced(t *testing.T) {
	const n = 1000 // above the size whose every change is published
	h := testkit.NewHarness(t, "pickwise_p2c", `{}`)
	as := testkit.Addrs(n)
	if err := h.Update(testkit.Endpoints(as)...); err != nil {
		t.Fatal(err)
	}
	scs := h.CC.SubConns()
	ready := func(sc *testkit.SubConn) {
		sc.UpdateState(balancer.SubConnState{ConnectivityState: connectivity.Connecting})
		sc.UpdateState(balancer.SubConnState{ConnectivityState: connectivity.Ready})
	}
	ready(scs[0])
	if s := h.CC.State().ConnectivityState; s != connectivity.Ready {
		t.Fatalf("after the first READY endpoint: state %v, want READY at once", s)
	}
	before := h.CC.Updates()
	for _, sc := range scs[1:] {
		ready(sc)
	}
	if got := h.CC.Updates() - before; got > 1 {
		t.Errorf("%d more endpoints READY at one instant: %d pickers, want at most 1 before the window ends", n-1, got)
	}
	h.Clock.Advance(time.Second)
	picked := map[string]bool{}
	for range 20 * n {
		a, done := h.Pick()
		done(balancer.DoneInfo{})
		picked[a] = true
	}
	if len(picked) < n*9/10 {
		t.Errorf("after the window, picks reached %d of %d endpoints, want the picker to hold all of them", len(picked), n)
	}
	// The last READY endpoint going away is published at once.
	for _, sc := range scs {
		sc.UpdateState(balancer.SubConnState{ConnectivityState: connectivity.Idle})
	}
	if s := h.CC.State().ConnectivityState; s == connectivity.Ready {
		t.Errorf("with no endpoint READY: state %v, want it published at once", s)
	}
}
