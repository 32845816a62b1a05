package scale_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"testing"
	"time"

	v3orcapb "github.com/cncf/xds/go/xds/data/orca/v3"
	_ "github.com/pickwise/pickwise/balancer/orcawrr"
	_ "github.com/pickwise/pickwise/balancer/p2c"
	_ "github.com/pickwise/pickwise/balancer/peakewma"
	_ "github.com/pickwise/pickwise/balancer/prequal"
	_ "github.com/pickwise/pickwise/balancer/ringhash"
	"github.com/pickwise/pickwise/internal/engine"
	"github.com/pickwise/pickwise/internal/testkit"
	"google.golang.org/grpc/balancer"
	_ "google.golang.org/grpc/balancer/leastrequest"
	_ "google.golang.org/grpc/balancer/ringhash"
	_ "google.golang.org/grpc/balancer/roundrobin"
	_ "google.golang.org/grpc/balancer/weightedroundrobin"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/serviceconfig"
)

// policy is one balancer under measurement: a registry name and its JSON
// config.
type policy struct{ name, cfg string }

// peerLimit is the largest fleet each of grpc-go's peers is measured at.
// Their bring-up alone (every benchmark's setup) is O(n²): at 10k
// endpoints round_robin takes ~10 s and least_request_experimental ~40 s,
// weighted_round_robin several minutes, and at 50k all of them take tens
// of minutes. Ours run at every size.
var peerLimit = map[string]int{
	"round_robin":                10000,
	"least_request_experimental": 10000,
	"weighted_round_robin":       1000,
	"ring_hash_experimental":     10000,
}

// runs says whether p is measured over n endpoints.
func runs(p policy, n int) bool {
	limit, peer := peerLimit[p.name]
	return !peer || n <= limit
}

// eagerPolicies are ours and grpc-go's peers, each peer right after the
// policy it is measured against.
var eagerPolicies = []policy{
	{"pickwise_p2c", `{}`},
	{"least_request_experimental", `{}`},
	{"round_robin", `{}`},
	{"pickwise_peak_ewma", `{}`},
	{"pickwise_prequal", `{}`},
	{"pickwise_orca_wrr", `{}`},
	{"weighted_round_robin", `{}`},
}

// fleet is one balancer over a fake ClientConn. Ours run on a virtual
// clock, so that the publishes they defer happen when the benchmark says
// time has passed, not on a real timer.
type fleet struct {
	cc    *testkit.ClientConn
	bal   balancer.Balancer
	clock *testkit.FakeClock // nil for grpc-go's policies
	eps   []resolver.Endpoint
	// stalls counts the picks in wake that waited stallAfter for nothing.
	stalls int
}

// stallAfter is how long wake waits for a queued pick's SubConn or
// picker before picking again.
const stallAfter = 20 * time.Millisecond

func newFleet(tb testing.TB, p policy, n int) *fleet {
	tb.Helper()
	return newFleetOn(tb, testkit.NewClientConn(), p, n)
}

// newFleetOn is newFleet over cc.
func newFleetOn(tb testing.TB, cc *testkit.ClientConn, p policy, n int) *fleet {
	tb.Helper()
	f := &fleet{cc: cc, eps: testkit.Endpoints(testkit.Addrs(n))}
	builder := balancer.Get(p.name)
	if builder == nil {
		tb.Fatalf("no balancer registered as %q", p.name)
	}
	var cfg serviceconfig.LoadBalancingConfig
	if parser, ok := builder.(balancer.ConfigParser); ok {
		var err error
		if cfg, err = parser.ParseConfig(json.RawMessage(p.cfg)); err != nil {
			tb.Fatal(err)
		}
	}
	if spec, ours := engine.Lookup(p.name); ours {
		f.clock = testkit.NewFakeClock()
		f.bal = spec.Build(f.cc, balancer.BuildOptions{}, engine.Options{Clock: f.clock, Rand: engine.NewSeededRand(1)})
	} else {
		f.bal = builder.Build(f.cc, balancer.BuildOptions{})
	}
	if n == 0 {
		return f // the caller sends its own updates
	}
	if err := f.bal.UpdateClientConnState(balancer.ClientConnState{
		ResolverState:  resolver.State{Endpoints: f.eps},
		BalancerConfig: cfg,
	}); err != nil {
		tb.Fatal(err)
	}
	return f
}

// elapse lets d of virtual time pass, firing what ours deferred.
func (f *fleet) elapse(d time.Duration) {
	if f.clock != nil {
		f.clock.Advance(d)
	}
}

// connectAll drives every SubConn through CONNECTING to READY, one
// connection every gap of virtual time, as connections to a large fleet
// complete one after another.
func (f *fleet) connectAll(tb testing.TB, gap time.Duration) {
	tb.Helper()
	scs := f.cc.SubConns()
	if len(scs) != len(f.eps) {
		tb.Fatalf("%d SubConns for %d endpoints", len(scs), len(f.eps))
	}
	for _, sc := range scs {
		sc.UpdateState(balancer.SubConnState{ConnectivityState: connectivity.Connecting})
		sc.UpdateState(balancer.SubConnState{ConnectivityState: connectivity.Ready})
		f.elapse(gap)
	}
	f.elapse(time.Second) // whatever was deferred is published
	if s := f.cc.State(); s.ConnectivityState != connectivity.Ready {
		tb.Fatalf("state %v after bring-up, want READY", s.ConnectivityState)
	}
}

// connectGap is the virtual time between two connections completing
// during bring-up: 100k connections a second, faster than any real fleet
// comes up, so that coalescing gets the least help from time passing.
const connectGap = 10 * time.Microsecond

// BenchmarkBringUp is the CPU a channel's balancer spends bringing up n
// endpoints: the resolver update, then every endpoint CONNECTING and
// READY, one connection every connectGap. grpc-go's peers rebuild their
// picker over every endpoint on every change, O(n²) in total, so they run
// only up to their peerLimit.
func BenchmarkBringUp(b *testing.B) {
	for _, n := range []int{1000, 10000, 50000} {
		for _, p := range eagerPolicies {
			if !runs(p, n) {
				continue
			}
			b.Run(fmt.Sprintf("n=%d/policy=%s", n, p.name), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					f := newFleet(b, p, n)
					f.connectAll(b, connectGap)
					b.StopTimer()
					f.bal.Close()
					b.StartTimer()
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/endpoint")
			})
		}
	}
}

// BenchmarkFlap is one endpoint of n READY ones losing its connection and
// getting it back (READY, IDLE, CONNECTING, READY), with a millisecond
// between flaps: the steady-state cost of churn in a large fleet.
func BenchmarkFlap(b *testing.B) {
	benchmarkFlaps(b, eagerPolicies, func(int) time.Duration { return time.Millisecond }, nil)
}

// BenchmarkChange is BenchmarkFlap with each flap published on its own:
// after it, virtual time passes beyond the window in which ours coalesce
// changes, so every operation builds its pickers over all n endpoints
// (pickers/op: two for ours, whose first change in a window is published
// at once; three for grpc-go's). It is the cost of one endpoint changing
// in a fleet that changes rarely; BenchmarkFlap is the cost of churn.
func BenchmarkChange(b *testing.B) {
	benchmarkFlaps(b, eagerPolicies, loneGap, nil)
}

// BenchmarkWeightedChange is BenchmarkChange for the weighted round-robin
// policies once every endpoint reports its own ORCA weight (qps 1 to 100
// at the same utilization): the schedule each change rebuilds then
// follows weights that are not a short integer cycle, as in a fleet that
// reports load. The channel's recorder discards what it is given, for
// both policies: both record every endpoint's weight at each weight
// update (one a second, about every 50 changes at 10k endpoints), and the
// fake's recorder, which keeps every value in maps, would be a tenth of
// what is measured (see BenchmarkWeightUpdate).
func BenchmarkWeightedChange(b *testing.B) {
	ps := []policy{{"pickwise_orca_wrr", `{"blackoutPeriod": "0s"}`}, {"weighted_round_robin", `{"blackoutPeriod": "0s"}`}}
	benchmarkFlapsOn(b, ps, loneGap, reportWeights, func() *testkit.ClientConn {
		cc := testkit.NewClientConn()
		cc.Metrics.Discard = true
		return cc
	})
}

// BenchmarkWeightUpdate is one weight update of pickwise_orca_wrr over n
// READY endpoints that each reported their own weight (reportWeights):
// every tracker folded, the weights collected and a picker published, on
// the channel's queue once per weightUpdatePeriod. grpc-go's
// weighted_round_robin runs its updates on a real timer, out of the
// benchmark's reach, so it has no row here. The channel records no
// metrics: with them, an update also records every endpoint's weight in
// the endpoint_weights histogram, as grpc-go's does, at whatever cost the
// metrics plugin has (the fake's own recorder, which keeps every value in
// maps, would be most of what is measured).
func BenchmarkWeightUpdate(b *testing.B) {
	p := policy{"pickwise_orca_wrr", `{"blackoutPeriod": "0s", "weightUpdatePeriod": "1s"}`}
	for _, n := range []int{1000, 10000, 50000} {
		b.Run(fmt.Sprintf("n=%d/policy=%s", n, p.name), func(b *testing.B) {
			cc := testkit.NewClientConn()
			cc.Metrics = nil
			f := newFleetOn(b, cc, p, n)
			defer f.bal.Close()
			f.connectAll(b, 0)
			reportWeights(b, f)
			published := f.cc.Updates()
			b.ReportAllocs()
			for b.Loop() {
				f.elapse(time.Second)
			}
			b.ReportMetric(float64(f.cc.Updates()-published)/float64(b.N), "pickers/op")
		})
	}
}

// TestWeightUpdateAllocations: a weight update allocates about as much
// over 2,000 endpoints as over 100 (the picker's arrays and a few more),
// not a value per endpoint, as it did when each endpoint's weight recorded
// in the histogram built its label list. The channel records no metrics:
// the fake's recorder allocates to keep each value it is given.
func TestWeightUpdateAllocations(t *testing.T) {
	p := policy{"pickwise_orca_wrr", `{"blackoutPeriod": "0s", "weightUpdatePeriod": "1s"}`}
	allocs := map[int]float64{}
	for _, n := range []int{100, 2000} {
		cc := testkit.NewClientConn()
		cc.Metrics = nil
		f := newFleetOn(t, cc, p, n)
		f.connectAll(t, 0)
		reportWeights(t, f)
		allocs[n] = testing.AllocsPerRun(5, func() { f.elapse(time.Second) })
		f.bal.Close()
	}
	if allocs[2000] > allocs[100]+8 {
		t.Errorf("a weight update allocates %v times over 100 endpoints, %v over 2,000", allocs[100], allocs[2000])
	}
}

// reportWeights answers picks with per-call ORCA reports until every
// endpoint has reported, each its own weight, and lets a weight update
// fold them in: in virtual time for ours, in real time for grpc-go's,
// whose update runs on a real timer each second.
func reportWeights(tb testing.TB, f *fleet) {
	tb.Helper()
	qps := map[balancer.SubConn]float64{}
	p := f.cc.State().Picker
	for k := 0; len(qps) < len(f.eps); k++ {
		if k > 100*len(f.eps) {
			tb.Fatalf("%d of %d endpoints picked after %d picks", len(qps), len(f.eps), k)
		}
		res, err := p.Pick(balancer.PickInfo{Ctx: context.Background()})
		if err != nil {
			tb.Fatal(err)
		}
		q, ok := qps[res.SubConn]
		if !ok {
			q = float64(1 + len(qps)*37%100)
			qps[res.SubConn] = q
		}
		if res.Done != nil {
			res.Done(balancer.DoneInfo{ServerLoad: &v3orcapb.OrcaLoadReport{RpsFractional: q, CpuUtilization: 0.5}})
		}
	}
	if f.clock != nil {
		f.elapse(2 * time.Second)
	} else {
		time.Sleep(1500 * time.Millisecond)
	}
}

// loneGap is virtual time past the coalescing window over n endpoints.
func loneGap(n int) time.Duration { return time.Duration(2*n)*time.Microsecond + time.Millisecond }

// benchmarkFlaps flaps one endpoint after another of n READY ones under
// each of ps, with gap(n) of virtual time after each flap, and reports
// the pickers each flap published. prepare, if not nil, runs once the
// fleet is READY.
func benchmarkFlaps(b *testing.B, ps []policy, gap func(n int) time.Duration, prepare func(testing.TB, *fleet)) {
	benchmarkFlapsOn(b, ps, gap, prepare, testkit.NewClientConn)
}

// benchmarkFlapsOn is benchmarkFlaps over ClientConns from newCC.
func benchmarkFlapsOn(b *testing.B, ps []policy, gap func(n int) time.Duration, prepare func(testing.TB, *fleet), newCC func() *testkit.ClientConn) {
	for _, n := range []int{1000, 10000, 50000} {
		for _, p := range ps {
			if !runs(p, n) {
				continue
			}
			b.Run(fmt.Sprintf("n=%d/policy=%s", n, p.name), func(b *testing.B) {
				f := newFleetOn(b, newCC(), p, n)
				defer f.bal.Close()
				f.connectAll(b, 0)
				if prepare != nil {
					prepare(b, f)
				}
				scs := f.cc.SubConns()
				published := f.cc.Updates()
				b.ReportAllocs()
				i := 0
				for b.Loop() {
					sc := scs[i%len(scs)]
					i++
					sc.UpdateState(balancer.SubConnState{ConnectivityState: connectivity.Idle})
					sc.UpdateState(balancer.SubConnState{ConnectivityState: connectivity.Connecting})
					sc.UpdateState(balancer.SubConnState{ConnectivityState: connectivity.Ready})
					f.elapse(gap(n))
				}
				b.ReportMetric(float64(f.cc.Updates()-published)/float64(b.N), "pickers/op")
			})
		}
	}
}

// BenchmarkResolverUpdate is one step of a rolling deploy over n READY
// endpoints: a resolver update that swaps 1% of them for new ones (which
// start connecting), alternating between two such lists.
func BenchmarkResolverUpdate(b *testing.B) {
	for _, n := range []int{1000, 10000, 50000} {
		for _, p := range eagerPolicies {
			if !runs(p, n) {
				continue
			}
			b.Run(fmt.Sprintf("n=%d/policy=%s", n, p.name), func(b *testing.B) {
				f := newFleet(b, p, n)
				defer f.bal.Close()
				f.connectAll(b, 0)
				next := append([]resolver.Endpoint(nil), f.eps...)
				for i, ep := range testkit.Endpoints(testkit.Addrs(n + n/100)[n:]) {
					next[i*100] = ep
				}
				f.alternate(b, parsed(b, p), next, f.eps)
			})
		}
	}
}

// alternate measures resolver updates that alternate between two
// endpoint lists, a millisecond of virtual time apart.
func (f *fleet) alternate(b *testing.B, cfg serviceconfig.LoadBalancingConfig, lists ...[]resolver.Endpoint) {
	update := func(eps []resolver.Endpoint) {
		if err := f.bal.UpdateClientConnState(balancer.ClientConnState{
			ResolverState:  resolver.State{Endpoints: eps},
			BalancerConfig: cfg,
		}); err != nil {
			b.Fatal(err)
		}
		f.elapse(time.Millisecond)
	}
	// Every list once before the clock starts: the first update of an
	// empty balancer builds everything, which is bring-up, not a step.
	for _, eps := range lists {
		update(eps)
	}
	b.ReportAllocs()
	var took []time.Duration
	i := 0
	for b.Loop() {
		start := time.Now()
		update(lists[i%len(lists)])
		took = append(took, time.Since(start))
		i++
	}
	// The tail, not only the mean: an update holds the channel's queue for
	// as long as it takes. Run with -benchtime 100x or more for a p99 that
	// is not the maximum of a few (nearest rank: ceil(0.99 n)).
	slices.Sort(took)
	b.ReportMetric(float64(took[(len(took)*99+99)/100-1].Nanoseconds()), "p99-ns")
}

// parsed is p's config as its parser returns it.
func parsed(tb testing.TB, p policy) serviceconfig.LoadBalancingConfig {
	parser, ok := balancer.Get(p.name).(balancer.ConfigParser)
	if !ok {
		return nil
	}
	cfg, err := parser.ParseConfig(json.RawMessage(p.cfg))
	if err != nil {
		tb.Fatal(err)
	}
	return cfg
}

// hashPolicies are the ring hash policies, ours then grpc-go's, reading
// the key from the same header.
var hashPolicies = []policy{
	{"pickwise_ring_hash", `{"requestHashHeader": "x-key"}`},
	{"ring_hash_experimental", `{"requestHashHeader": "x-key"}`},
}

// BenchmarkWake is a lazy policy over n endpoints waking the endpoints of
// 2000 keys: each key's first call finds its endpoint IDLE, which creates
// its SubConn; the benchmark brings it READY before the next key. It
// reports the time Close takes afterwards as close-ns, and as stalls/op
// the picks that queued with no SubConn or picker following within
// stallAfter (the wait is in the time measured; see wake).
func BenchmarkWake(b *testing.B) {
	const keys = 2000
	for _, n := range []int{1000, 10000, 50000} {
		for _, p := range hashPolicies {
			if !runs(p, n) {
				continue
			}
			b.Run(fmt.Sprintf("n=%d/policy=%s", n, p.name), func(b *testing.B) {
				b.ReportAllocs()
				var closing time.Duration
				stalls, pickers := 0, 0
				for b.Loop() {
					b.StopTimer()
					f := newFleet(b, p, n)
					published := f.cc.Updates()
					b.StartTimer()
					f.wake(b, keys)
					b.StopTimer()
					pickers += f.cc.Updates() - published
					// Waking leaves garbage (grpc-go's ring hash, a GB
					// at 1k endpoints): a collection running through
					// Close would be most of what close-ns measures.
					runtime.GC()
					start := time.Now()
					f.bal.Close()
					closing += time.Since(start)
					stalls += f.stalls
					b.StartTimer()
				}
				b.ReportMetric(float64(closing.Nanoseconds())/float64(b.N), "close-ns")
				b.ReportMetric(float64(stalls)/float64(b.N), "stalls/op")
				b.ReportMetric(float64(pickers)/float64(b.N), "pickers/op")
			})
		}
	}
}

// wake picks keys one at a time until each key's call goes out: a pick
// that queues has asked an endpoint to connect, and every SubConn created
// since is brought READY before the key is picked again.
func (f *fleet) wake(tb testing.TB, keys int) {
	// grpc-go's ring hash takes about a minute over 10k endpoints.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	seen := 0
	for k := range keys {
		info := balancer.PickInfo{Ctx: metadata.NewOutgoingContext(ctx, metadata.Pairs("x-key", fmt.Sprint("key-", k)))}
		for {
			updates := f.cc.Updates()
			res, err := f.cc.State().Picker.Pick(info)
			if err == nil {
				if res.Done != nil {
					res.Done(balancer.DoneInfo{})
				}
				break
			}
			if !errors.Is(err, balancer.ErrNoSubConnAvailable) {
				tb.Fatalf("key %d: %v", k, err)
			}
			// Wait for the SubConn or picker the pick asked for. grpc-go's
			// ring hash sometimes queues a pick without either following
			// (in this harness, above 1k endpoints); after a stall the
			// key is simply picked again.
			wait, cancelWait := context.WithTimeout(ctx, stallAfter)
			err = f.cc.WaitFor(wait, func(balancer.State) error {
				if f.cc.NumSubConns() == seen && f.cc.Updates() == updates {
					return errors.New("no new SubConn or picker")
				}
				return nil
			})
			cancelWait()
			if err != nil {
				if ctx.Err() != nil {
					tb.Fatalf("key %d: %v", k, err)
				}
				f.stalls++
			}
			fresh := f.cc.SubConnsFrom(seen)
			for _, sc := range fresh {
				sc.UpdateState(balancer.SubConnState{ConnectivityState: connectivity.Connecting})
				sc.UpdateState(balancer.SubConnState{ConnectivityState: connectivity.Ready})
			}
			seen += len(fresh)
		}
		f.elapse(100 * time.Microsecond)
	}
}

// BenchmarkHashUpdate is one step of a rolling deploy under a ring hash
// policy over n endpoints with skewed weights (1 to 100): a resolver
// update that swaps 1% of the endpoints, alternating between two lists.
// Endpoints of a lazy policy connect only when keys ask for them, so
// nothing connects here: the cost is the table's.
func BenchmarkHashUpdate(b *testing.B) {
	for _, n := range []int{1000, 10000, 50000} {
		for _, p := range hashPolicies {
			b.Run(fmt.Sprintf("n=%d/policy=%s", n, p.name), func(b *testing.B) {
				weighted := func(as []string) []resolver.Endpoint {
					eps := make([]resolver.Endpoint, len(as))
					for i, a := range as {
						eps[i] = testkit.Endpoint(a, uint32(1+i%100))
					}
					return eps
				}
				as := testkit.Addrs(n + n/100)
				base := weighted(as[:n])
				next := append([]resolver.Endpoint(nil), base...)
				for i, ep := range weighted(as[n:]) {
					next[i*100] = ep
				}
				f := newFleet(b, p, 0)
				defer f.bal.Close()
				f.alternate(b, parsed(b, p), base, next)
			})
		}
	}
}
