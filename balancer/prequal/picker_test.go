package prequal_test

import (
	"math"
	"slices"
	"testing"
	"time"

	v3orcapb "github.com/cncf/xds/go/xds/data/orca/v3"
	"github.com/pickwise/pickwise/balancer/prequal"
	"github.com/pickwise/pickwise/internal/engine"
	"github.com/pickwise/pickwise/internal/testkit"
	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// load is an answer as serverload's per-call report carries it.
type load struct {
	rif     float64
	latency float64 // seconds
}

func report(l load) balancer.DoneInfo {
	return balancer.DoneInfo{BytesSent: true, BytesReceived: true, ServerLoad: &v3orcapb.OrcaLoadReport{
		NamedMetrics: map[string]float64{"pickwise.rif": l.rif, "pickwise.latency": l.latency},
	}}
}

// serveWithReports picks n times, a millisecond apart, and ends each call
// at once with the report of the endpoint it went to, counting the picks.
func serveWithReports(h *testkit.Harness, n int, loads map[string]load) map[string]int {
	got := map[string]int{}
	for range n {
		a, done := h.Pick()
		got[a]++
		done(report(loads[a]))
		h.Clock.Advance(time.Millisecond)
	}
	return got
}

// start is a harness over n endpoints whose servers answer probes with
// loads.
func start(t *testing.T, cfg string, loads []load) (*testkit.Harness, []string, map[string]load, *testkit.Prober) {
	prober := testkit.NewProber()
	h := testkit.NewProbingHarness(t, prequal.Name, cfg, prober)
	as := testkit.Addrs(len(loads))
	byAddr := map[string]load{}
	for i, a := range as {
		byAddr[a] = loads[i]
		prober.Set(a, engine.LoadAnswer{RIF: uint32(loads[i].rif), Latency: loads[i].latency})
	}
	h.Start(as...)
	return h, as, byAddr, prober
}

// TestColdLowestLatencyWins: once every endpoint's report is in the pool,
// calls go to the cold endpoint with the lowest latency, not to the one
// with the fewest calls in flight.
func TestColdLowestLatencyWins(t *testing.T) {
	h, as, loads, _ := start(t, `{"slowStart": {"enabled": false}}`, []load{
		{rif: 2, latency: 0.020},
		{rif: 3, latency: 0.005}, // busier, but faster
		{rif: 1, latency: 0.030},
		{rif: 3, latency: 0.012},
	})
	serveWithReports(h, 200, loads)
	got := serveWithReports(h, 1000, loads)
	if got[as[1]] != 1000 {
		t.Errorf("picks %v: want all on %s, the cold endpoint with the lowest latency", got, as[1])
	}
}

// TestHotAvoided: an endpoint whose requests in flight are above the
// pool's hot line loses to every cold one, whatever its latency.
func TestHotAvoided(t *testing.T) {
	h, as, loads, _ := start(t, `{"slowStart": {"enabled": false}, "hotQuantile": 0.75}`, []load{
		{rif: 2, latency: 0.020},
		{rif: 40, latency: 0.001}, // fastest, but hot
		{rif: 1, latency: 0.030},
		{rif: 3, latency: 0.012},
	})
	serveWithReports(h, 200, loads)
	got := serveWithReports(h, 1000, loads)
	if got[as[3]] != 1000 {
		t.Errorf("picks %v: want all on %s, the fastest cold endpoint", got, as[3])
	}
}

// TestOwnCallsHeat: calls this client places count against an answer at
// once, so held calls spread over the pool instead of all following the
// fastest answer.
func TestOwnCallsHeat(t *testing.T) {
	h, as, loads, _ := start(t, `{"slowStart": {"enabled": false}, "reuseBudget": 1000}`, []load{
		{rif: 0, latency: 0.001},
		{rif: 0, latency: 0.010},
		{rif: 0, latency: 0.010},
		{rif: 0, latency: 0.010},
	})
	serveWithReports(h, 200, loads)
	got, held := h.Count(400, true)
	defer testkit.Finish(held, nil)
	for _, a := range as {
		if got[a] < 40 {
			t.Errorf("held picks %v: %s got %d, want its share once the fastest turned hot", got, a, got[a])
		}
	}
}

// TestNoProbeServiceIsP2C: servers that serve no probes and report
// nothing leave the pool empty, and the policy compares in-flight counts
// as pickwise_p2c does. Each is asked once per connection.
func TestNoProbeServiceIsP2C(t *testing.T) {
	prober := testkit.NewProber()
	h := testkit.NewProbingHarness(t, prequal.Name, `{"slowStart": {"enabled": false}}`, prober)
	as := testkit.Addrs(4)
	for _, a := range as {
		prober.Set(a, engine.LoadAnswer{Err: status.Error(codes.Unimplemented, "unknown service")})
	}
	h.Start(as...)
	got := map[string]int{}
	var held []func(balancer.DoneInfo)
	for range 400 {
		a, done := h.Pick()
		got[a]++
		held = append(held, done)
		h.Clock.Advance(5 * time.Millisecond)
	}
	defer testkit.Finish(held, nil)
	for _, a := range as {
		if got[a] != 100 {
			t.Errorf("held picks %v: want 100 each, as least-request places them", got)
			break
		}
		if n := prober.Sent(a); n != 1 {
			t.Errorf("%s was probed %d times, want once", a, n)
		}
	}
}

// TestProbesPerCall: probes never outnumber calls, and while calls'
// reports keep the pool fresh they are a small share of them.
func TestProbesPerCall(t *testing.T) {
	h, as, loads, prober := start(t, `{"slowStart": {"enabled": false}}`, []load{
		{rif: 2, latency: 0.020}, {rif: 6, latency: 0.005}, {rif: 1, latency: 0.030}, {rif: 3, latency: 0.012},
		{rif: 2, latency: 0.020}, {rif: 6, latency: 0.005}, {rif: 1, latency: 0.030}, {rif: 3, latency: 0.012},
	})
	const calls = 5000
	serveWithReports(h, calls, loads)
	sent := 0
	for _, a := range as {
		sent += prober.Sent(a)
	}
	if sent > calls/4 {
		t.Errorf("%d probes for %d calls, want at most a quarter", sent, calls)
	}
}

// TestEndpointCost: the endpoint_cost samples are the costs the final
// pair compares: a cold answer's latency, and 1e9 plus its RIF for a hot
// one; with no answer in the pool, in-flight calls plus one.
func TestEndpointCost(t *testing.T) {
	h, _, loads, _ := start(t, `{"slowStart": {"enabled": false}, "hotQuantile": 0.75}`, []load{
		{rif: 2, latency: 0.020},
		{rif: 40, latency: 0.001},
		{rif: 1, latency: 0.030},
		{rif: 3, latency: 0.012},
	})
	costs := func() []float64 {
		if err := h.Metrics.Collect(); err != nil {
			t.Fatal(err)
		}
		vs := h.Metrics.Values("pickwise.prequal.endpoint_cost")
		vs = vs[max(0, len(vs)-4):]
		slices.Sort(vs)
		return vs
	}
	if got, want := costs(), []float64{1, 1, 1, 1}; !slices.Equal(got, want) {
		t.Errorf("costs before any answer %v, want %v", got, want)
	}
	serveWithReports(h, 200, loads)
	got, want := costs(), []float64{0.012, 0.020, 0.030, 1e9 + 40}
	for i := range want {
		if len(got) != len(want) || math.Abs(got[i]-want[i]) > 1e-6*want[i] {
			t.Fatalf("costs %v, want %v", got, want)
		}
	}
}

// TestMixedFleet: while only some servers run serverload, those that do
// not still take calls: this client answers for them from what it sees
// of its own calls and what the others report.
func TestMixedFleet(t *testing.T) {
	prober := testkit.NewProber()
	h := testkit.NewProbingHarness(t, prequal.Name, `{"slowStart": {"enabled": false}}`, prober)
	as := testkit.Addrs(8)
	others := map[string]int{} // other clients' calls on each serverload server
	for i, a := range as {
		if i%2 == 0 {
			prober.Set(a, engine.LoadAnswer{Err: status.Error(codes.Unimplemented, "unknown service")})
			continue
		}
		others[a] = 1 + i%3
		prober.Set(a, engine.LoadAnswer{RIF: uint32(others[a]), Latency: 0.010})
	}
	h.Start(as...)
	inflight := map[string]int{}
	serve := func(n int) map[string]int {
		got := map[string]int{}
		var held []func()
		for range n {
			a, done := h.Pick()
			got[a]++
			inflight[a]++
			held = append(held, func() {
				inflight[a]--
				info := testkit.Outcome(nil)
				if o, ok := others[a]; ok {
					// A server's RIF counts this client's calls too.
					info = report(load{rif: float64(o + inflight[a]), latency: 0.010})
				}
				done(info)
			})
			if len(held) > 8 { // a few calls stay in flight
				held[0]()
				held = held[1:]
			}
			h.Clock.Advance(time.Millisecond)
		}
		for _, f := range held {
			f()
		}
		return got
	}
	serve(1000)
	got := serve(4000)
	t.Logf("picks %v", got)
	for i, a := range as {
		if i%2 == 0 && got[a] < 4000/8/4 {
			t.Errorf("picks %v: %s, which serves no probes, took %d, want at least a quarter of its even share", got, a, got[a])
		}
	}
}

// TestEndpointsMovedSinceTheAnswers: answers in the pool carry their
// endpoint's index in the newest picker; after a resolver update that
// moves the endpoints left and removes the fastest, whose last call ends
// after it with a report, picks follow the answers of the endpoints left,
// by the rule, and none goes to the one removed.
func TestEndpointsMovedSinceTheAnswers(t *testing.T) {
	h, as, loads, prober := start(t, `{"slowStart": {"enabled": false}, "reuseBudget": 1000}`, []load{
		{rif: 1, latency: 0.001}, // the fastest, removed below
		{rif: 1, latency: 0.020},
		{rif: 1, latency: 0.005},
		{rif: 1, latency: 0.030},
	})
	serveWithReports(h, 200, loads)
	if got := serveWithReports(h, 100, loads); got[as[0]] != 100 {
		t.Fatalf("picks %v: want all on %s, the fastest", got, as[0])
	}
	last, done := h.Pick()
	if last != as[0] {
		t.Fatalf("pick went to %s, want %s", last, as[0])
	}
	extra := testkit.Addrs(5)[4]
	loads[extra] = load{rif: 1, latency: 0.040}
	prober.Set(extra, engine.LoadAnswer{RIF: 1, Latency: 0.040})
	// Every endpoint left moves: as[2] from 2 to 1, as[3] to 2, as[1] to 3.
	if err := h.Update(testkit.Endpoints([]string{extra, as[2], as[3], as[1]})...); err != nil {
		t.Fatal(err)
	}
	h.Ready(extra)
	done(report(loads[as[0]]))
	got := serveWithReports(h, 300, loads)
	if got[as[0]] != 0 {
		t.Errorf("picks %v: %d on the removed %s", got, got[as[0]], as[0])
	}
	if got[as[2]] < 290 {
		t.Errorf("picks %v: want nearly all on %s, the fastest left", got, as[2])
	}
}
