package ringhash

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/pickwise/pickwise/internal/testkit"
	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/resolver"
	grpcringhash "google.golang.org/grpc/resolver/ringhash"
)

// tableConfigs are the policy's configs for the three tables, at defaults.
var tableConfigs = []struct{ name, cfg string }{
	{TableRing, `{"table": "ring"}`},
	{TableMaglev, `{"table": "maglev"}`},
	{TableRendezvous, `{"table": "rendezvous"}`},
}

// currentPicker is the balancer's latest picker as ours.
func currentPicker(t testing.TB, h *testkit.Harness) *picker {
	t.Helper()
	p, ok := h.CC.State().Picker.(*picker)
	if !ok {
		t.Fatalf("picker is %T, want *picker", h.CC.State().Picker)
	}
	return p
}

// states counts the latest picker's members by state.
func states(p *picker) map[connectivity.State]int {
	m := map[connectivity.State]int{}
	for _, st := range p.states {
		m[st.State()]++
	}
	return m
}

// connectAll wakes every endpoint of the latest picker, makes addrs READY
// and waits for a picker in which all of them are.
func connectAll(t testing.TB, h *testkit.Harness, addrs []string) {
	t.Helper()
	p := currentPicker(t, h)
	for i := range p.members {
		p.members[i].ExitIdle()
	}
	h.Ready(addrs...)
	waitStates(t, h, connectivity.Ready, len(addrs))
}

// waitStates waits for a picker with n members in state st.
func waitStates(t testing.TB, h *testkit.Harness, st connectivity.State, n int) *picker {
	t.Helper()
	var p *picker
	if err := h.CC.WaitFor(h.Ctx, func(s balancer.State) error {
		var ok bool
		if p, ok = s.Picker.(*picker); !ok {
			return fmt.Errorf("picker is %T", s.Picker)
		}
		if got := states(p)[st]; got != n {
			return fmt.Errorf("%d endpoints %v, want %d", got, st, n)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return p
}

// start builds the policy with cfg over eps and connects them all.
func start(t testing.TB, cfg string, eps []resolver.Endpoint) *testkit.Harness {
	t.Helper()
	h := testkit.NewHarness(t, Name, cfg)
	if err := h.Update(eps...); err != nil {
		t.Fatal(err)
	}
	addrs := make([]string, len(eps))
	for i, ep := range eps {
		addrs[i] = ep.Addresses[0].Addr
	}
	connectAll(t, h, addrs)
	return h
}

// pickCtx picks once with ctx from the latest picker.
func pickCtx(h *testkit.Harness, ctx context.Context) (string, func(balancer.DoneInfo), error) {
	res, err := h.CC.State().Picker.Pick(balancer.PickInfo{Ctx: ctx})
	if err != nil {
		return "", nil, err
	}
	return res.SubConn.(*testkit.SubConn).Addr(), res.Done, nil
}

// pickKey picks once for key (WithKey) and finishes the call.
func pickKey(t testing.TB, h *testkit.Harness, key string) string {
	t.Helper()
	a, done, err := pickCtx(h, WithKey(context.Background(), key))
	if err != nil {
		t.Fatalf("Pick(%q): %v", key, err)
	}
	done(balancer.DoneInfo{})
	return a
}

// placement maps each of keys to the endpoint it is picked for.
func placement(t testing.TB, h *testkit.Harness, keys []string) map[string]string {
	t.Helper()
	m := make(map[string]string, len(keys))
	for _, k := range keys {
		m[k] = pickKey(t, h, k)
	}
	return m
}

func keyNames(n int) []string {
	ks := make([]string, n)
	for i := range ks {
		ks[i] = fmt.Sprintf("user-%d", i)
	}
	return ks
}

func reversed(eps []resolver.Endpoint) []resolver.Endpoint {
	r := slices.Clone(eps)
	slices.Reverse(r)
	return r
}

// TestLazyConnect checks gRFC A61's connection management: nothing
// connects until a pick needs it, a key's pick wakes only its endpoint
// and waits for it, and the channel reports IDLE meanwhile.
func TestLazyConnect(t *testing.T) {
	h := testkit.NewHarness(t, Name, `{}`)
	as := testkit.Addrs(5)
	if err := h.Update(testkit.Endpoints(as)...); err != nil {
		t.Fatal(err)
	}
	if st := h.CC.State().ConnectivityState; st != connectivity.Idle {
		t.Fatalf("state before any pick = %v, want IDLE", st)
	}
	if n := len(h.CC.SubConns()); n != 0 {
		t.Fatalf("%d SubConns before any pick, want 0", n)
	}
	p := currentPicker(t, h)
	want := p.members[p.tbl.first(hashKey("k")).endpoint].Conn.Stats.Addr()
	if _, _, err := pickCtx(h, WithKey(context.Background(), "k")); !errors.Is(err, balancer.ErrNoSubConnAvailable) {
		t.Fatalf("Pick on an IDLE endpoint = %v, want ErrNoSubConnAvailable (queue)", err)
	}
	sc, err := h.CC.WaitForSubConn(h.Ctx, want)
	if err != nil {
		t.Fatal(err)
	}
	sc.UpdateState(balancer.SubConnState{ConnectivityState: connectivity.Connecting})
	sc.UpdateState(balancer.SubConnState{ConnectivityState: connectivity.Ready})
	waitStates(t, h, connectivity.Ready, 1)
	if got := pickKey(t, h, "k"); got != want {
		t.Fatalf("key picked %s, want its endpoint %s", got, want)
	}
	if n := len(h.CC.SubConns()); n != 1 {
		t.Fatalf("%d SubConns after one key, want 1", n)
	}
	if st := h.CC.State().ConnectivityState; st != connectivity.Ready {
		t.Fatalf("state = %v, want READY", st)
	}
	// The balancer's ExitIdle must not wake the other four.
	h.B.ExitIdle()
	if got := states(currentPicker(t, h))[connectivity.Idle]; got != 4 {
		t.Fatalf("%d IDLE endpoints after ExitIdle, want 4", got)
	}
}

// TestStalePickerCountsPick checks a pick through a picker taken while the
// key's endpoint was still connecting, made after the endpoint turned
// READY: the engine re-offers that picker, so calls queued for the key go
// out through it before the next snapshot. Such a call must be counted
// like any other: in flight (bounded load's cap and the cost metric read
// it), in the picks metric, and through the engine's Done.
func TestStalePickerCountsPick(t *testing.T) {
	for _, cfg := range []string{`{}`, `{"balanceFactor": 1.5}`} {
		t.Run(cfg, func(t *testing.T) {
			h := testkit.NewHarness(t, Name, cfg)
			if err := h.Update(testkit.Endpoints(testkit.Addrs(3))...); err != nil {
				t.Fatal(err)
			}
			stale := currentPicker(t, h)
			home := stale.members[stale.tbl.first(hashKey("k")).endpoint].Conn.Stats
			key := balancer.PickInfo{Ctx: WithKey(context.Background(), "k")}
			if _, err := stale.Pick(key); !errors.Is(err, balancer.ErrNoSubConnAvailable) {
				t.Fatalf("Pick on an IDLE endpoint = %v, want ErrNoSubConnAvailable (queue)", err)
			}
			h.Ready(home.Addr())
			waitStates(t, h, connectivity.Ready, 1)

			res, err := stale.Pick(key)
			if err != nil {
				t.Fatalf("Pick through the stale picker after its endpoint turned READY: %v", err)
			}
			if got := res.SubConn.(*testkit.SubConn).Addr(); got != home.Addr() {
				t.Fatalf("key picked %s, want its endpoint %s", got, home.Addr())
			}
			if res.Done == nil {
				t.Fatal("the pick has no Done: the call would never leave the in-flight count")
			}
			if n := home.InFlight(); n != 1 {
				t.Errorf("in flight on the key's endpoint = %d, want 1", n)
			}
			res.Done(balancer.DoneInfo{})
			if n := home.InFlight(); n != 0 {
				t.Errorf("in flight after Done = %d, want 0", n)
			}
			if got := h.PicksByReason("ring_hash"); got["home"] != 1 {
				t.Errorf("picks by reason = %v, want 1 home", got)
			}
		})
	}
}

// TestStaleReadyMemberWaits: a picker shows a key's endpoint READY, and
// the endpoint's connection fails before the next picker. A pick through
// the old picker waits for the next one (ErrNoSubConnAvailable), which
// places the key on its next candidate, rather than failing the call with
// the failed child's error.
func TestStaleReadyMemberWaits(t *testing.T) {
	for _, cfg := range []string{`{}`, `{"balanceFactor": 1.5}`} {
		t.Run(cfg, func(t *testing.T) {
			as := testkit.Addrs(3)
			h := start(t, cfg, testkit.Endpoints(as))
			key := keyFor(t, h, as[0])
			stale := currentPicker(t, h)
			info := balancer.PickInfo{Ctx: WithKey(context.Background(), key)}
			sc := h.CC.SubConnFor(as[0])
			sc.UpdateState(balancer.SubConnState{ConnectivityState: connectivity.Idle})
			sc.UpdateState(balancer.SubConnState{ConnectivityState: connectivity.Connecting})
			sc.UpdateState(balancer.SubConnState{ConnectivityState: connectivity.TransientFailure, ConnectionError: errors.New("connection refused")})
			waitStates(t, h, connectivity.TransientFailure, 1)
			if _, err := stale.Pick(info); !errors.Is(err, balancer.ErrNoSubConnAvailable) {
				t.Fatalf("Pick through a picker that shows the failed endpoint READY = %v, want ErrNoSubConnAvailable (wait for the next picker)", err)
			}
			if got := pickKey(t, h, key); got == as[0] {
				t.Fatalf("the next picker placed the key on its failed endpoint %s", got)
			}
		})
	}
}

// TestIdleTriggersConnect checks that a key whose endpoint lost its
// connection (READY -> IDLE, no automatic reconnect) reconnects it on its
// next pick and waits for it rather than moving.
func TestIdleTriggersConnect(t *testing.T) {
	as := testkit.Addrs(4)
	h := start(t, `{}`, testkit.Endpoints(as))
	target := pickKey(t, h, "k")
	sc := reconnectOnPick(t, h, target, "k")
	sc.UpdateState(balancer.SubConnState{ConnectivityState: connectivity.Connecting})
	sc.UpdateState(balancer.SubConnState{ConnectivityState: connectivity.Ready})
	waitStates(t, h, connectivity.Ready, len(as))
	if got := pickKey(t, h, "k"); got != target {
		t.Fatalf("after reconnect the key went to %s, want %s", got, target)
	}
}

// TestPickerDeterminism checks that placement depends only on the endpoint set:
// the same key reaches the same endpoint across picker rebuilds, endpoint
// list reorderings and independent balancers, and a state change does not
// rebuild the table.
func TestPickerDeterminism(t *testing.T) {
	keys := keyNames(2000)
	for _, tc := range tableConfigs {
		t.Run(tc.name, func(t *testing.T) {
			eps := testkit.Endpoints(testkit.Addrs(10))
			h := start(t, tc.cfg, eps)
			want := placement(t, h, keys)
			tbl := currentPicker(t, h).tbl

			// A connectivity change publishes a picker over the same table.
			sc := h.CC.SubConnFor(want[keys[0]])
			sc.UpdateState(balancer.SubConnState{ConnectivityState: connectivity.Idle})
			waitStates(t, h, connectivity.Idle, 1)
			if currentPicker(t, h).tbl != tbl {
				t.Errorf("a state change rebuilt the table")
			}
			sc.UpdateState(balancer.SubConnState{ConnectivityState: connectivity.Connecting})
			sc.UpdateState(balancer.SubConnState{ConnectivityState: connectivity.Ready})
			waitStates(t, h, connectivity.Ready, 10)

			// A reordered list: a new picker, the same placement.
			shuffled := slices.Clone(eps)
			rand.New(rand.NewPCG(1, 2)).Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
			if err := h.Update(shuffled...); err != nil {
				t.Fatal(err)
			}
			if got := placement(t, h, keys); !mapsEqual(got, want) {
				t.Errorf("placement changed after reordering the endpoint list")
			}
			if currentPicker(t, h).tbl != tbl {
				t.Errorf("reordering the endpoint list rebuilt the table")
			}

			// Another balancer, given the list in another order.
			h2 := start(t, tc.cfg, reversed(eps))
			if got := placement(t, h2, keys); !mapsEqual(got, want) {
				t.Errorf("two balancers with the same endpoints place keys differently")
			}
		})
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestPickerWeights checks that an endpoint of weight 2 owns twice the share of
// one of weight 1, within 10%, in every table.
func TestPickerWeights(t *testing.T) {
	keys := keyNames(30000)
	for _, tc := range tableConfigs {
		t.Run(tc.name, func(t *testing.T) {
			as := testkit.Addrs(6)
			eps := testkit.Endpoints(as)
			eps[0] = testkit.Endpoint(as[0], 2)
			h := start(t, tc.cfg, eps)
			counts := map[string]int{}
			for _, a := range placement(t, h, keys) {
				counts[a]++
			}
			heavy := float64(counts[as[0]])
			light := float64(len(keys)-counts[as[0]]) / float64(len(as)-1)
			ratio := heavy / light
			t.Logf("weight 2 share %.3f, weight 1 mean share %.3f, ratio %.3f", heavy/float64(len(keys)), light/float64(len(keys)), ratio)
			if math.Abs(ratio-2) > 0.2 {
				t.Errorf("weight-2 endpoint owns %.3fx a weight-1 endpoint's share, want 2 +-10%%", ratio)
			}
		})
	}
}

// reconnectOnPick drops addr's connection (READY -> IDLE, no automatic
// reconnect under a lazy policy), checks that a pick for key queues and
// makes it reconnect, and returns its SubConn for the test to drive.
func reconnectOnPick(t testing.TB, h *testkit.Harness, addr, key string) *testkit.SubConn {
	t.Helper()
	sc := h.CC.SubConnFor(addr)
	before := sc.Connects()
	sc.UpdateState(balancer.SubConnState{ConnectivityState: connectivity.Idle})
	// IDLE may be brief: with no other endpoint READY, gRFC A61 has the
	// balancer wake one at once, and it turns CONNECTING.
	if err := h.CC.WaitFor(h.Ctx, func(s balancer.State) error {
		p, ok := s.Picker.(*picker)
		if !ok {
			return fmt.Errorf("picker is %T", s.Picker)
		}
		for i := range p.members {
			if m, st := &p.members[i], p.states[i].State(); m.Conn.Stats.Addr() == addr {
				if st != connectivity.Idle && st != connectivity.Connecting {
					return fmt.Errorf("%s is %v, want IDLE or CONNECTING", addr, st)
				}
				return nil
			}
		}
		return fmt.Errorf("%s not in the picker", addr)
	}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := pickCtx(h, WithKey(context.Background(), key)); !errors.Is(err, balancer.ErrNoSubConnAvailable) {
		t.Fatalf("Pick on an IDLE endpoint = %v, want ErrNoSubConnAvailable", err)
	}
	if err := h.CC.WaitFor(h.Ctx, func(balancer.State) error {
		if sc.Connects() == before {
			return fmt.Errorf("no reconnect of %s", addr)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return sc
}

// fail drives addr's connection to TRANSIENT_FAILURE the way it happens
// under a lazy policy: the connection drops (IDLE), a pick for key wakes
// it, and the attempt fails; failed endpoints are then down.
func fail(t testing.TB, h *testkit.Harness, addr, key string, failed int) {
	t.Helper()
	sc := reconnectOnPick(t, h, addr, key)
	sc.UpdateState(balancer.SubConnState{ConnectivityState: connectivity.Connecting})
	sc.UpdateState(balancer.SubConnState{ConnectivityState: connectivity.TransientFailure, ConnectionError: errors.New("connection refused")})
	waitStates(t, h, connectivity.TransientFailure, failed)
}

// TestTransientFailureSkip checks gRFC A61's walk: the keys of an endpoint
// in TRANSIENT_FAILURE go to the next candidates along the table, the
// other keys stay, and the channel stays READY.
func TestTransientFailureSkip(t *testing.T) {
	keys := keyNames(1000)
	for _, tc := range tableConfigs {
		t.Run(tc.name, func(t *testing.T) {
			as := testkit.Addrs(5)
			h := start(t, tc.cfg, testkit.Endpoints(as))
			before := placement(t, h, keys)
			down := before[keys[0]]
			fail(t, h, down, keys[0], 1)
			if st := h.CC.State().ConnectivityState; st != connectivity.Ready {
				t.Fatalf("state with one endpoint down = %v, want READY", st)
			}
			if MovedOnlyFrom(t, before, placement(t, h, keys), down) == 0 {
				t.Fatalf("no key moved")
			}
		})
	}
}

// TestAllFailed checks the aggregate state and error when every endpoint
// has failed: TRANSIENT_FAILURE, and a pick fails with the connection
// error rather than queueing.
func TestAllFailed(t *testing.T) {
	as := testkit.Addrs(2)
	h := start(t, `{}`, testkit.Endpoints(as))
	fail(t, h, as[0], keyFor(t, h, as[0]), 1)
	fail(t, h, as[1], keyFor(t, h, as[1]), 2)
	if err := h.CC.WaitForState(h.Ctx, connectivity.TransientFailure); err != nil {
		t.Fatal(err)
	}
	_, _, err := pickCtx(h, WithKey(context.Background(), "k"))
	if err == nil || errors.Is(err, balancer.ErrNoSubConnAvailable) {
		t.Fatalf("Pick with every endpoint failed = %v, want the connection error", err)
	}
}

// MovedOnlyFrom checks that between placements before and after only the
// keys of gone moved, none of them to gone, and returns how many moved.
// Exported for the end-to-end tests, which live in package ringhash_test.
func MovedOnlyFrom(t testing.TB, before, after map[string]string, gone string) int {
	t.Helper()
	moved := 0
	for k, a := range after {
		switch {
		case a == gone:
			t.Fatalf("key %q still placed on %s, which is gone", k, gone)
		case before[k] == gone:
			moved++
		case a != before[k]:
			t.Fatalf("key %q moved from %s to %s though its endpoint stayed", k, before[k], a)
		}
	}
	return moved
}

// keyFor returns a key the latest picker places on addr.
func keyFor(t testing.TB, h *testkit.Harness, addr string) string {
	t.Helper()
	p := currentPicker(t, h)
	for i := 0; i < 100000; i++ {
		k := fmt.Sprintf("probe-%d", i)
		if p.members[p.tbl.first(hashKey(k)).endpoint].Conn.Stats.Addr() == addr {
			return k
		}
	}
	t.Fatalf("no key for %s", addr)
	return ""
}

// TestKeySources checks the key order: WithKey, then the request hash
// header (several values joined with ","), then a random hash.
func TestKeySources(t *testing.T) {
	as := testkit.Addrs(5)
	h := start(t, `{"requestHashHeader": "X-Key"}`, testkit.Endpoints(as))
	ctx := context.Background()
	hdr := func(vals ...string) context.Context {
		md := metadata.MD{}
		md.Append("x-key", vals...)
		return metadata.NewOutgoingContext(ctx, md)
	}
	a := keyFor(t, h, as[0])
	b := keyFor(t, h, as[1])
	for _, tc := range []struct {
		name string
		ctx  context.Context
		want string
	}{
		{"header", hdr(a), as[0]},
		{"header appended", metadata.AppendToOutgoingContext(ctx, "x-key", b), as[1]},
		{"WithKey wins over the header", WithKey(hdr(a), b), as[1]},
		{"several values joined", hdr("p", "q"), pickKey(t, h, "p,q")},
	} {
		for range 10 {
			got, done, err := pickCtx(h, tc.ctx)
			if err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			done(balancer.DoneInfo{})
			if got != tc.want {
				t.Fatalf("%s: picked %s, want %s", tc.name, got, tc.want)
			}
		}
	}
	// No key: a random hash each time, so every endpoint is reached.
	seen := map[string]int{}
	for range 500 {
		got, done, err := pickCtx(h, ctx)
		if err != nil {
			t.Fatal(err)
		}
		done(balancer.DoneInfo{})
		seen[got]++
	}
	if len(seen) != len(as) {
		t.Fatalf("random-hash picks reached %v, want all %d endpoints", seen, len(as))
	}
}

// TestRandomHashWakesOne checks gRFC A76's rule for picks without a key:
// with nothing READY, a pick wakes one IDLE endpoint and queues, and picks
// made while it connects wake no other.
func TestRandomHashWakesOne(t *testing.T) {
	h := testkit.NewHarness(t, Name, `{}`)
	if err := h.Update(testkit.Endpoints(testkit.Addrs(5))...); err != nil {
		t.Fatal(err)
	}
	if _, _, err := pickCtx(h, context.Background()); !errors.Is(err, balancer.ErrNoSubConnAvailable) {
		t.Fatalf("Pick = %v, want ErrNoSubConnAvailable", err)
	}
	waitStates(t, h, connectivity.Connecting, 1)
	// pickfirst may report CONNECTING before it creates its SubConn, on a
	// goroutine of the engine's: wait for the SubConn too.
	if err := h.CC.WaitFor(h.Ctx, func(balancer.State) error {
		if n := len(h.CC.SubConns()); n != 1 {
			return fmt.Errorf("%d SubConns, want 1", n)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for range 100 {
		if _, _, err := pickCtx(h, context.Background()); !errors.Is(err, balancer.ErrNoSubConnAvailable) {
			t.Fatalf("Pick = %v, want ErrNoSubConnAvailable", err)
		}
	}
	if n := len(h.CC.SubConns()); n != 1 {
		t.Fatalf("%d SubConns after keyless picks, want 1", n)
	}
}

// TestBoundedLoadHotKey drives a Zipf(1.1) key stream over 10 endpoints
// with up to 200 calls held in flight and balanceFactor 1.25: no endpoint
// ever carries more than 1.25 x the mean + 1, and at least 80% of calls
// still land on their key's first choice.
func TestBoundedLoadHotKey(t *testing.T) {
	const (
		endpoints = 10
		keys      = 100000
		calls     = 20000
		held      = 200
		factor    = 1.25
	)
	for _, tc := range tableConfigs {
		t.Run(tc.name, func(t *testing.T) {
			as := testkit.Addrs(endpoints)
			h := start(t, fmt.Sprintf(`{"table": %q, "balanceFactor": %v}`, tc.name, factor), testkit.Endpoints(as))
			p := currentPicker(t, h)
			rnd := rand.New(rand.NewPCG(7, 11))
			zipf := rand.NewZipf(rnd, 1.1, 1, keys-1)
			type call struct {
				addr string
				done func(balancer.DoneInfo)
			}
			var pending []call
			load := map[string]int{}
			total, first, worst := 0, 0, 0.0
			for range calls {
				k := fmt.Sprintf("key-%d", zipf.Uint64())
				a, done, err := pickCtx(h, WithKey(context.Background(), k))
				if err != nil {
					t.Fatal(err)
				}
				if a == p.members[p.tbl.first(hashKey(k)).endpoint].Conn.Stats.Addr() {
					first++
				}
				pending = append(pending, call{a, done})
				load[a]++
				total++
				mean := float64(total) / endpoints
				for _, n := range load {
					if float64(n) > factor*mean+1 {
						t.Fatalf("an endpoint carries %d calls, mean %.1f: above %v x mean + 1", n, mean, factor)
					}
					if total >= held {
						worst = max(worst, float64(n)/mean)
					}
				}
				if len(pending) > held {
					i := rnd.IntN(len(pending))
					c := pending[i]
					pending[i] = pending[len(pending)-1]
					pending = pending[:len(pending)-1]
					c.done(balancer.DoneInfo{})
					load[c.addr]--
					total--
				}
			}
			for _, c := range pending {
				c.done(balancer.DoneInfo{})
			}
			share := float64(first) / calls
			t.Logf("first choice %.1f%%, worst max/mean at full concurrency %.2f", 100*share, worst)
			if share < 0.8 {
				t.Fatalf("%.1f%% of calls on their first choice, want >= 80%%", 100*share)
			}
			if n := p.load.total.Load(); n != 0 {
				t.Fatalf("in-flight total %d after every call finished, want 0", n)
			}
		})
	}
}

// weightedFleet is four endpoints of weight 1 (light) and four of weight
// 4 (heavy), and the weight of each address.
func weightedFleet() (light, heavy []string, eps []resolver.Endpoint, weights map[string]float64) {
	as := testkit.Addrs(8)
	light, heavy = as[:4], as[4:]
	weights = map[string]float64{}
	for i, a := range as {
		w := uint32(1)
		if i >= 4 {
			w = 4
		}
		eps = append(eps, testkit.Endpoint(a, w))
		weights[a] = float64(w)
	}
	return light, heavy, eps, weights
}

// holdCalls picks n calls, the i-th for key(i), keeping up to held of them
// in flight and finishing a random one past that. After each pick it calls
// check with the chosen address, each address's calls in flight and their
// total. It returns each address's picks.
func holdCalls(t *testing.T, h *testkit.Harness, rnd *rand.Rand, n, held int, key func(i int) string, check func(a string, load map[string]int, total int)) map[string]int {
	t.Helper()
	type call struct {
		addr string
		done func(balancer.DoneInfo)
	}
	var pending []call
	picks, load := map[string]int{}, map[string]int{}
	for i := range n {
		a, done, err := pickCtx(h, WithKey(context.Background(), key(i)))
		if err != nil {
			t.Fatal(err)
		}
		pending = append(pending, call{a, done})
		picks[a]++
		load[a]++
		check(a, load, len(pending))
		if len(pending) > held {
			j := rnd.IntN(len(pending))
			c := pending[j]
			pending[j] = pending[len(pending)-1]
			pending = pending[:len(pending)-1]
			c.done(balancer.DoneInfo{})
			load[c.addr]--
		}
	}
	for _, c := range pending {
		c.done(balancer.DoneInfo{})
	}
	if n := currentPicker(t, h).load.total.Load(); n != 0 {
		t.Fatalf("in-flight total %d after every call finished, want 0", n)
	}
	return picks
}

// TestBoundedLoadWeighted holds up to 200 calls of uniform keys in flight
// over endpoints of weights 1 and 4 with balanceFactor 1.25, so that the
// caps bind: no endpoint carries more than 1.25 x its weight's share of
// the load, plus one, and an endpoint of weight 4 takes at least 3.5 x the
// calls of one of weight 1, as its keys would without bounded load.
func TestBoundedLoadWeighted(t *testing.T) {
	const (
		keys   = 100000
		calls  = 20000
		held   = 200
		factor = 1.25
	)
	for _, tc := range tableConfigs {
		t.Run(tc.name, func(t *testing.T) {
			light, heavy, eps, weights := weightedFleet()
			var total float64
			for _, w := range weights {
				total += w
			}
			h := start(t, fmt.Sprintf(`{"table": %q, "balanceFactor": %v}`, tc.name, factor), eps)
			rnd := rand.New(rand.NewPCG(3, 5))
			picks := holdCalls(t, h, rnd, calls, held, func(int) string {
				return fmt.Sprintf("key-%d", rnd.IntN(keys))
			}, func(a string, load map[string]int, n int) {
				if limit := factor * float64(n) * weights[a] / total; float64(load[a]) > limit+1 {
					t.Fatalf("%s (weight %v) carries %d of %d calls: above %v x its share + 1 = %.1f", a, weights[a], load[a], n, factor, limit+1)
				}
			})
			mean := func(as []string) float64 {
				s := 0
				for _, a := range as {
					s += picks[a]
				}
				return float64(s) / float64(len(as))
			}
			ratio := mean(heavy) / mean(light)
			t.Logf("calls per endpoint: weight 4 %.0f, weight 1 %.0f, ratio %.2f", mean(heavy), mean(light), ratio)
			if ratio < 3.5 {
				t.Errorf("an endpoint of weight 4 takes %.2fx the calls of one of weight 1, want >= 3.5", ratio)
			}
		})
	}
}

// TestBoundedLoadWeightedHotKey holds 400 calls of one key in flight over
// endpoints of weights 1 and 4 with balanceFactor 1.25: a key whose
// endpoint weighs 1 spills once that endpoint holds its weighted cap,
// 1.25 x 1/20 of the calls, and one whose endpoint weighs 4 stays on it
// four times as long.
func TestBoundedLoadWeightedHotKey(t *testing.T) {
	const (
		calls  = 400
		factor = 1.25
	)
	for _, tc := range tableConfigs {
		t.Run(tc.name, func(t *testing.T) {
			light, heavy, eps, weights := weightedFleet()
			h := start(t, fmt.Sprintf(`{"table": %q, "balanceFactor": %v}`, tc.name, factor), eps)
			home := map[string]int{}
			for _, a := range []string{light[0], heavy[0]} {
				k := keyFor(t, h, a)
				picks := holdCalls(t, h, rand.New(rand.NewPCG(1, 2)), calls, calls, func(int) string { return k },
					func(string, map[string]int, int) {})
				home[a] = picks[a]
			}
			l, hv := home[light[0]], home[heavy[0]]
			t.Logf("of %d calls held, home kept %d (weight 1) and %d (weight 4)", calls, l, hv)
			if limit := int(math.Ceil(factor * calls * weights[light[0]] / 20)); l > limit || l == calls {
				t.Errorf("a hot key's endpoint of weight 1 kept %d of %d calls, want its weighted cap %d", l, calls, limit)
			}
			if float64(hv) < 3.5*float64(l) {
				t.Errorf("a hot key's endpoint of weight 4 kept %d calls, weight 1 %d: want >= 3.5x", hv, l)
			}
		})
	}
}

// TestBoundedLoadSharesReadyWeight checks that the caps share the load
// among the endpoints that can take it: with three of the four endpoints
// of weight 4 down, the fourth's cap is 1.25 x 4/8 of the load, not
// 4/20, so that the caps of those left still add up to 1.25 x the load
// and a hot key's overflow goes to them rather than back home.
func TestBoundedLoadSharesReadyWeight(t *testing.T) {
	const (
		calls  = 400
		factor = 1.25
	)
	_, heavy, eps, _ := weightedFleet()
	h := start(t, fmt.Sprintf(`{"balanceFactor": %v}`, factor), eps)
	for i, a := range heavy[1:] {
		fail(t, h, a, keyFor(t, h, a), i+1)
	}
	k := keyFor(t, h, heavy[0])
	picks := holdCalls(t, h, rand.New(rand.NewPCG(1, 2)), calls, calls, func(int) string { return k },
		func(string, map[string]int, int) {})
	want := int(math.Ceil(factor * calls * 4 / 8))
	if got := picks[heavy[0]]; got < want-1 || got > want {
		t.Errorf("a hot key's endpoint of weight 4 among READY weights of 8 kept %d of %d calls, want its cap %d", got, calls, want)
	}
}

// TestBoundedLoadCountsRejoinedEndpoint: an endpoint back from a failure
// counts in bounded load's total weight, held or not, so that once its
// hold and ramp are over, by the clock and with no new picker, the caps
// are what they were before it failed.
func TestBoundedLoadCountsRejoinedEndpoint(t *testing.T) {
	const calls = 400
	as := testkit.Addrs(2)
	h := start(t, `{"balanceFactor": 1.25, "rejoinHold": "1s", "rejoinRamp": "1s"}`, testkit.Endpoints(as))
	back := keyFor(t, h, as[1])
	fail(t, h, as[1], back, 1)
	comeBack(t, h, as[1], back)
	h.Clock.Advance(3 * time.Second)
	k := keyFor(t, h, as[0])
	picks := holdCalls(t, h, rand.New(rand.NewPCG(3, 4)), calls, calls, func(int) string { return k },
		func(string, map[string]int, int) {})
	if want := int(math.Ceil(1.25 * calls / 2)); picks[as[0]] < want-1 || picks[as[0]] > want {
		t.Errorf("a hot key's home kept %d of %d calls after the other endpoint rejoined, want its cap %d", picks[as[0]], calls, want)
	}
}

// TestPickAllocs checks that a pick with a WithKey key and its Done
// allocate nothing, with and without bounded load.
func TestPickAllocs(t *testing.T) {
	for _, cfg := range []string{`{}`, `{"balanceFactor": 1.25}`, `{"table": "maglev"}`, `{"table": "rendezvous"}`} {
		h := start(t, cfg, testkit.Endpoints(testkit.Addrs(10)))
		p := h.CC.State().Picker
		info := balancer.PickInfo{Ctx: WithKey(context.Background(), "k")}
		allocs := testing.AllocsPerRun(1000, func() {
			res, err := p.Pick(info)
			if err != nil {
				t.Fatal(err)
			}
			res.Done(balancer.DoneInfo{})
		})
		if allocs != 0 {
			t.Errorf("%s: %v allocs per pick, want 0", cfg, allocs)
		}
	}
}

// TestEmptyEndpointList checks that an empty list is refused and that the
// policy recovers when endpoints arrive.
func TestEmptyEndpointList(t *testing.T) {
	h := testkit.NewHarness(t, Name, `{}`)
	if err := h.Update(); !errors.Is(err, balancer.ErrBadResolverState) {
		t.Fatalf("UpdateClientConnState with no endpoints = %v, want ErrBadResolverState", err)
	}
	if err := h.CC.WaitForState(h.Ctx, connectivity.TransientFailure); err != nil {
		t.Fatal(err)
	}
	if _, err := h.CC.State().Picker.Pick(balancer.PickInfo{}); err == nil {
		t.Fatal("Pick with no endpoints succeeded")
	}
	as := testkit.Addrs(2)
	if err := h.Update(testkit.Endpoints(as)...); err != nil {
		t.Fatal(err)
	}
	connectAll(t, h, as)
	pickKey(t, h, "k")
}

// TestFailureWakesAnother checks gRFC A61's rule that while the channel is
// not READY one endpoint is always connecting: when the only connected
// endpoint fails, the balancer wakes an IDLE one by itself.
func TestFailureWakesAnother(t *testing.T) {
	h := testkit.NewHarness(t, Name, `{}`)
	as := testkit.Addrs(3)
	if err := h.Update(testkit.Endpoints(as)...); err != nil {
		t.Fatal(err)
	}
	if _, _, err := pickCtx(h, WithKey(context.Background(), "k")); !errors.Is(err, balancer.ErrNoSubConnAvailable) {
		t.Fatalf("Pick = %v, want ErrNoSubConnAvailable", err)
	}
	if err := h.CC.WaitFor(h.Ctx, func(balancer.State) error {
		if n := len(h.CC.SubConns()); n != 1 {
			return fmt.Errorf("%d SubConns, want 1", n)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	sc := h.CC.SubConns()[0]
	sc.UpdateState(balancer.SubConnState{ConnectivityState: connectivity.Connecting})
	sc.UpdateState(balancer.SubConnState{ConnectivityState: connectivity.TransientFailure, ConnectionError: errors.New("connection refused")})
	if err := h.CC.WaitFor(h.Ctx, func(balancer.State) error {
		if n := len(h.CC.SubConns()); n != 2 {
			return fmt.Errorf("%d SubConns, want 2: a failure must wake another endpoint", n)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := h.CC.WaitForState(h.Ctx, connectivity.Connecting); err != nil {
		t.Fatal(err)
	}
}

// TestHashKeyIdentity checks that an endpoint with a gRFC A76 hash key is
// placed by it, not by its address: two fleets with the same hash keys on
// different addresses map every key to the endpoint with the same hash key.
func TestHashKeyIdentity(t *testing.T) {
	as := testkit.Addrs(10)
	withKeys := func(addrs []string) []resolver.Endpoint {
		eps := testkit.Endpoints(addrs)
		for i := range eps {
			eps[i] = grpcringhash.SetHashKey(eps[i], fmt.Sprintf("node-%d", i))
		}
		return eps
	}
	h1 := start(t, `{}`, withKeys(as[:5]))
	h2 := start(t, `{}`, withKeys(as[5:]))
	for k, a := range placement(t, h1, keyNames(500)) {
		if b := pickKey(t, h2, k); slices.Index(as, b)-5 != slices.Index(as, a) {
			t.Fatalf("key %q: %s in one fleet, %s in the other, want the same hash key", k, a, b)
		}
	}
}
