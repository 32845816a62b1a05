package ringhash

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/pickwise/pickwise/internal/testkit"
	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/connectivity"
)

// owners maps keys 0..n-1 to the address each goes to now.
func owners(t *testing.T, h *testkit.Harness, n int) []string {
	t.Helper()
	out := make([]string, n)
	for k := range out {
		res, err := h.CC.State().Picker.Pick(balancer.PickInfo{Ctx: WithKey(context.Background(), fmt.Sprint("key-", k))})
		if err != nil {
			t.Fatalf("key %d: %v", k, err)
		}
		res.Done(balancer.DoneInfo{})
		out[k] = res.SubConn.(*testkit.SubConn).Addr()
	}
	return out
}

// onAddr counts the keys whose owner is addr.
func onAddr(owner []string, addr string) int {
	n := 0
	for _, a := range owner {
		if a == addr {
			n++
		}
	}
	return n
}

// moved counts the keys whose owner differs.
func moved(a, b []string) int {
	n := 0
	for i := range a {
		if a[i] != b[i] {
			n++
		}
	}
	return n
}

const rejoinKeys = 4000

// keyOf is a key (of owners' names) that addr owns in owner.
func keyOf(t *testing.T, owner []string, addr string) string {
	t.Helper()
	for k, a := range owner {
		if a == addr {
			return fmt.Sprint("key-", k)
		}
	}
	t.Fatalf("%s owns no key", addr)
	return ""
}

// comeBack brings addr back from TRANSIENT_FAILURE: after its backoff
// its SubConn goes IDLE, something wakes it (the hold, to let it prove
// itself, or a pick of key, which it owns), and it connects.
func comeBack(t *testing.T, h *testkit.Harness, addr, key string) {
	t.Helper()
	sc := h.CC.SubConnFor(addr)
	before := sc.Connects()
	sc.UpdateState(balancer.SubConnState{ConnectivityState: connectivity.Idle})
	if err := h.CC.WaitFor(h.Ctx, func(balancer.State) error {
		if sc.Connects() > before {
			return nil
		}
		if res, err := h.CC.State().Picker.Pick(balancer.PickInfo{Ctx: WithKey(context.Background(), key)}); err == nil {
			res.Done(balancer.DoneInfo{})
		}
		return fmt.Errorf("%s never woke", addr)
	}); err != nil {
		t.Fatal(err)
	}
	sc.UpdateState(balancer.SubConnState{ConnectivityState: connectivity.Connecting})
	sc.UpdateState(balancer.SubConnState{ConnectivityState: connectivity.Ready})
	waitStates(t, h, connectivity.Ready, len(h.CC.State().Picker.(*picker).members))
}

// TestRejoinAfterFailure: an endpoint that goes TRANSIENT_FAILURE and comes
// back gets its keys back only after the hold, then over the ramp, each
// key once; nothing else moves.
func TestRejoinAfterFailure(t *testing.T) {
	as := testkit.Addrs(5)
	h := start(t, `{"rejoinHold": "30s", "rejoinRamp": "10s"}`, testkit.Endpoints(as))
	before := owners(t, h, rejoinKeys)
	mine := onAddr(before, as[2])
	if mine < rejoinKeys/10 {
		t.Fatalf("%s owns %d of %d keys", as[2], mine, rejoinKeys)
	}
	key := keyOf(t, before, as[2])
	fail(t, h, as[2], key, 1)
	away := owners(t, h, rejoinKeys)
	if onAddr(away, as[2]) != 0 || moved(before, away) != mine {
		t.Fatalf("down: %d keys moved, %d still on it; want its %d keys moved", moved(before, away), onAddr(away, as[2]), mine)
	}
	comeBack(t, h, as[2], key)
	h.Clock.Advance(29 * time.Second)
	if held := owners(t, h, rejoinKeys); moved(away, held) != 0 {
		t.Fatalf("29 s after it came back %d keys moved, want 0: the hold is 30 s", moved(away, held))
	}
	h.Clock.Advance(6 * time.Second) // halfway through the ramp
	half := owners(t, h, rejoinKeys)
	back := onAddr(half, as[2])
	if back < mine/2-mine/8 || back > mine/2+mine/8 || moved(away, half) != back {
		t.Fatalf("halfway through the ramp %d of its %d keys are back and %d moved; want about half, and only those", back, mine, moved(away, half))
	}
	h.Clock.Advance(5 * time.Second)
	after := owners(t, h, rejoinKeys)
	if m := moved(before, after); m != 0 {
		t.Fatalf("after the ramp %d keys are not where they were before the failure", m)
	}
	// Each key moved once on the way back: those back at half stayed.
	for k := range half {
		if half[k] == as[2] && after[k] != as[2] {
			t.Fatalf("key %d came back and left again", k)
		}
	}
}

// TestRejoinAfterRemoval: removed and re-added within the hold, an
// endpoint's keys stay where they went; a failure during the hold starts
// it over. A newcomer takes its keys at once. Ten endpoints: the ring's
// 1,024 entries are then 128 per endpoint whatever the count, so removing
// one moves only its own keys (with fewer, the others' entries grow to
// fill the ring, and a removal moves some of their keys too).
func TestRejoinAfterRemoval(t *testing.T) {
	as := testkit.Addrs(11)
	h := start(t, `{"rejoinHold": "30s", "rejoinRamp": "0s"}`, testkit.Endpoints(as[:10]))
	before := owners(t, h, rejoinKeys)
	key := keyOf(t, before, as[2])
	if err := h.Update(testkit.Endpoints(append(as[:2:2], as[3:10]...))...); err != nil {
		t.Fatal(err)
	}
	away := owners(t, h, rejoinKeys)
	if m, mine := moved(before, away), onAddr(before, as[2]); m != mine {
		t.Fatalf("removal moved %d keys, want its own %d", m, mine)
	}
	if err := h.Update(testkit.Endpoints(as[:10])...); err != nil {
		t.Fatal(err)
	}
	// The returner is woken so that it can prove itself; make it READY.
	if err := h.CC.WaitFor(h.Ctx, func(balancer.State) error {
		if sc := h.CC.SubConnFor(as[2]); sc == nil || sc.Connects() == 0 {
			return fmt.Errorf("%s not woken", as[2])
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	h.Ready(as[2])
	if back := owners(t, h, rejoinKeys); moved(away, back) != 0 {
		t.Fatalf("re-added: %d keys moved at once, want 0", moved(away, back))
	}
	h.Clock.Advance(20 * time.Second)
	// A flap while held: no key leads to it, so it is not woken by a
	// pick but by the hold itself, and fails.
	comeBack(t, h, as[2], key)
	sc := h.CC.SubConnFor(as[2])
	sc.UpdateState(balancer.SubConnState{ConnectivityState: connectivity.Connecting})
	sc.UpdateState(balancer.SubConnState{ConnectivityState: connectivity.TransientFailure, ConnectionError: errors.New("flap")})
	waitStates(t, h, connectivity.TransientFailure, 1)
	comeBack(t, h, as[2], key)
	h.Clock.Advance(20 * time.Second) // 40 s since it came back, 20 s since the flap
	if back := owners(t, h, rejoinKeys); moved(away, back) != 0 {
		t.Fatalf("a flap during the hold: %d keys moved 20 s later, want 0 (the hold starts over)", moved(away, back))
	}
	h.Clock.Advance(11 * time.Second)
	if back := owners(t, h, rejoinKeys); moved(before, back) != 0 {
		t.Fatalf("30 s after the flap %d keys are not home", moved(before, back))
	}

	// A newcomer is not held: its first key wakes it, and it keeps it.
	if err := h.Update(testkit.Endpoints(as)...); err != nil {
		t.Fatal(err)
	}
	connectAll(t, h, as)
	grown := owners(t, h, rejoinKeys)
	if onAddr(grown, as[10]) == 0 {
		t.Fatal("a newcomer got no keys")
	}
}

// TestRejoinOff: rejoinHold "0s" and rejoinRamp "0s" give keys back the
// moment the endpoint is READY, as grpc-go's ring_hash does.
func TestRejoinOff(t *testing.T) {
	as := testkit.Addrs(4)
	h := start(t, `{"rejoinHold": "0s", "rejoinRamp": "0s"}`, testkit.Endpoints(as))
	before := owners(t, h, rejoinKeys)
	key := keyOf(t, before, as[1])
	fail(t, h, as[1], key, 1)
	comeBack(t, h, as[1], key)
	if after := owners(t, h, rejoinKeys); moved(before, after) != 0 {
		t.Fatalf("%d keys not back at once with the hold off", moved(before, after))
	}
}

// TestRejoinConfig: the durations' bounds.
func TestRejoinConfig(t *testing.T) {
	cfg, err := ParseConfig([]byte(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	if c := cfg.(*Config); time.Duration(c.RejoinHold) != DefaultRejoinHold || time.Duration(c.RejoinRamp) != DefaultRejoinRamp {
		t.Errorf("defaults %v, %v", time.Duration(c.RejoinHold), time.Duration(c.RejoinRamp))
	}
	for js, want := range map[string]string{
		`{"rejoinHold": "-1s"}`: `pickwise_ring_hash: rejoinHold -1s: must be in [0s, 1h0m0s]`,
		`{"rejoinRamp": "2h"}`:  `pickwise_ring_hash: rejoinRamp 2h0m0s: must be in [0s, 1h0m0s]`,
		`{"rejoinHold": 30}`:    `pickwise_ring_hash:`,
	} {
		if _, err := ParseConfig([]byte(js)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseConfig(%s) = %v, want %q", js, err, want)
		}
	}
}

// TestRejoinYieldsToFailure: a held endpoint takes a call rather than let
// it fail when every other endpoint is down.
func TestRejoinYieldsToFailure(t *testing.T) {
	as := testkit.Addrs(2)
	h := start(t, `{"rejoinHold": "30s"}`, testkit.Endpoints(as))
	before := owners(t, h, 200)
	key0, key1 := keyOf(t, before, as[0]), keyOf(t, before, as[1])
	fail(t, h, as[0], key0, 1)
	comeBack(t, h, as[0], key0) // held for 30 s
	fail(t, h, as[1], key1, 1)
	after := owners(t, h, 200)
	if n := onAddr(after, as[0]); n != 200 {
		t.Fatalf("with the only other endpoint down, the held one took %d of 200 keys, want all", n)
	}
}
