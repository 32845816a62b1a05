package ringhash

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/pickwise/pickwise/internal/engine"
	"github.com/pickwise/pickwise/internal/testkit"
	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/resolver"
)

// benchSink keeps the compiler from discarding benchmarked lookups.
var benchSink int32

// benchKinds is kinds plus rendezvous with unequal weights, whose lookup
// takes a logarithm per endpoint where the equal-weight one compares raw
// hashes.
var benchKinds = append(kinds[:len(kinds):len(kinds)], kind{"rendezvous-weighted", func(eps []endpoint) (table, error) {
	eps = append([]endpoint(nil), eps...)
	eps[0].weight = 2
	return newRendezvous(eps, DefaultMaxWeightRatio)
}})

// BenchmarkLookup measures a key's first candidate, the whole cost of a
// pick that needs no fallback, through the table interface as the picker
// will call it.
func BenchmarkLookup(b *testing.B) { benchWalk(b, 0) }

// BenchmarkWalk measures the first candidate and three fallbacks, what a
// bounded-load pick costs when the key's endpoint and two more are full.
func BenchmarkWalk(b *testing.B) { benchWalk(b, 3) }

// benchWalk measures a key's first candidate and the next steps ones, for
// every table kind at 10 to 10000 endpoints.
func benchWalk(b *testing.B, steps int) {
	keys := testKeys(4096)
	for _, k := range benchKinds {
		for _, n := range []int{10, 100, 1000, 10000} {
			b.Run(fmt.Sprintf("%s/n=%d", k.name, n), func(b *testing.B) {
				tb := mustBuild(b, k, fleet(n))
				b.ReportAllocs()
				var sink int32
				i := 0
				for b.Loop() {
					c := tb.first(keys[i&(len(keys)-1)])
					i++
					for range steps {
						c, _ = tb.next(c)
					}
					sink += c.endpoint
				}
				benchSink = sink
			})
		}
	}
}

// weightSets are the weight distributions the build benchmarks use:
// equal, uniform in 1..100 (fixed seed), and one endpoint at heavy among
// weight 1.
func weightSets(heavy uint32) []struct {
	name   string
	weight func(i int, rnd *rand.Rand) uint32
} {
	return []struct {
		name   string
		weight func(i int, rnd *rand.Rand) uint32
	}{
		{"equal", func(int, *rand.Rand) uint32 { return 1 }},
		{"1..100", func(_ int, rnd *rand.Rand) uint32 { return uint32(1 + rnd.IntN(100)) }},
		{fmt.Sprintf("one=%d", heavy), func(i int, _ *rand.Rand) uint32 {
			if i == 0 {
				return heavy
			}
			return 1
		}},
	}
}

// buildSizes are the fleet sizes the build benchmarks use.
var buildSizes = []int{1000, 10000, 50000}

// BenchmarkBuild measures building each table at its defaults, and Maglev
// at its largest accepted size, over 1000, 10000 and 50000 endpoints with
// equal weights, weights in 1..100, one weight of 2^32-1 among weights of
// 1, and weights anywhere in [1, 2^32-1], and reports its memory: B/op is
// everything the build allocates, B/table what the table keeps, entries
// its ring positions, slots or endpoints. BenchmarkUpdate measures the
// same next to grpc-go's ring_hash_experimental, through whole balancers.
func BenchmarkBuild(b *testing.B) {
	builders := []kind{
		kinds[0], kinds[1],
		{"maglev-max", func(eps []endpoint) (table, error) {
			return newMaglev(eps, maxMaglevTableSize, DefaultMaxWeightRatio)
		}},
		kinds[2],
	}
	// Any weights: uniform over [1, 2^32-1], a set grpc-go's uint32 sum
	// cannot hold, so BenchmarkUpdate leaves it out.
	sets := append(weightSets(math.MaxUint32), struct {
		name   string
		weight func(i int, rnd *rand.Rand) uint32
	}{"1..2^32-1", func(_ int, rnd *rand.Rand) uint32 { return 1 + rnd.Uint32N(math.MaxUint32) }})
	for _, n := range buildSizes {
		for _, ws := range sets {
			rnd := rand.New(rand.NewPCG(1, 2))
			eps := fleet(n)
			for i := range eps {
				eps[i].weight = ws.weight(i, rnd)
			}
			for _, k := range builders {
				b.Run(fmt.Sprintf("table=%s/n=%d/weights=%s", k.name, n, ws.name), func(b *testing.B) {
					b.ReportAllocs()
					var s tableStats
					for b.Loop() {
						s = mustBuild(b, k, eps).stats()
					}
					b.ReportMetric(float64(s.bytes), "B/table")
					b.ReportMetric(float64(s.entries), "entries")
				})
			}
		}
	}
}

// benchPolicies are the balancers BenchmarkUpdate and
// BenchmarkConnectivityChange compare: grpc-go's peer first, then ours
// with each table, all at their defaults.
var benchPolicies = []struct{ name, policy, cfg string }{
	{"ring_hash_experimental", "ring_hash_experimental", `{"requestHashHeader": "` + benchHeader + `"}`},
	{Name + "-ring", Name, `{"table": "ring", "requestHashHeader": "` + benchHeader + `"}`},
	{Name + "-maglev", Name, `{"table": "maglev", "requestHashHeader": "` + benchHeader + `"}`},
	{Name + "-rendezvous", Name, `{"table": "rendezvous", "requestHashHeader": "` + benchHeader + `"}`},
}

// benchBalancer builds policy with cfg through grpc's balancer registry,
// as a channel would, over a fake ClientConn, and sends it eps. No
// endpoint connects: both policies are lazy.
func benchBalancer(b *testing.B, policy, cfg string, eps []resolver.Endpoint) (*testkit.ClientConn, balancer.Balancer, func([]resolver.Endpoint)) {
	b.Helper()
	builder := balancer.Get(policy)
	if builder == nil {
		b.Fatalf("no balancer registered as %q", policy)
	}
	parsed, err := builder.(balancer.ConfigParser).ParseConfig(json.RawMessage(cfg))
	if err != nil {
		b.Fatal(err)
	}
	cc := testkit.NewClientConn()
	bal := builder.Build(cc, balancer.BuildOptions{})
	b.Cleanup(bal.Close)
	update := func(eps []resolver.Endpoint) {
		if err := bal.UpdateClientConnState(balancer.ClientConnState{
			ResolverState:  resolver.State{Endpoints: eps},
			BalancerConfig: parsed,
		}); err != nil {
			b.Fatal(err)
		}
	}
	update(eps)
	return cc, bal, update
}

// BenchmarkUpdate measures a resolver update that changes one endpoint's
// weight, which makes both grpc-go's ring_hash_experimental and ours
// rebuild their table, over whole balancers built through the registry
// (endpointsharding's own O(n) pass over the update included). The heavy
// weight is 2^32-1 - (n-1) rather than 2^32-1: grpc-go sums weights in a
// uint32, and a sum past 2^32-1 wraps and makes its ring practically
// unbounded (BenchmarkBuild has ours at 2^32-1 itself).
func BenchmarkUpdate(b *testing.B) {
	for _, n := range buildSizes {
		for _, ws := range weightSets(math.MaxUint32 - uint32(n-1)) {
			rnd := rand.New(rand.NewPCG(1, 2))
			addrs := testkit.Addrs(n)
			weights := make([]uint32, n)
			for i := range weights {
				weights[i] = ws.weight(i, rnd)
			}
			// Two lists that differ in endpoint 0's weight, alternated.
			lists := [2][]resolver.Endpoint{make([]resolver.Endpoint, n), make([]resolver.Endpoint, n)}
			for i, a := range addrs {
				lists[0][i] = testkit.Endpoint(a, weights[i])
				lists[1][i] = lists[0][i]
			}
			w0 := weights[0] + 1
			if weights[0] > 1 {
				w0 = weights[0] - 1
			}
			lists[1][0] = testkit.Endpoint(addrs[0], w0)
			for _, p := range benchPolicies {
				b.Run(fmt.Sprintf("n=%d/weights=%s/policy=%s", n, ws.name, p.name), func(b *testing.B) {
					_, _, update := benchBalancer(b, p.policy, p.cfg, lists[0])
					b.ReportAllocs()
					i := 1
					for b.Loop() {
						update(lists[i&1])
						i++
					}
				})
			}
		}
	}
}

// BenchmarkConnectivityChange measures what one endpoint's connectivity
// change costs each policy (grpc-go's ring_hash_experimental and ours with
// each table) over n endpoints: the endpoint goes IDLE, CONNECTING and
// READY, three changes and three pickers per op, with the membership and
// weights unchanged, so no table is rebuilt. ns/change is ns/op / 3.
func BenchmarkConnectivityChange(b *testing.B) {
	for _, n := range buildSizes {
		eps := testkit.Endpoints(testkit.Addrs(n))
		for _, p := range benchPolicies {
			b.Run(fmt.Sprintf("n=%d/policy=%s", n, p.name), func(b *testing.B) {
				cc, _, _ := benchBalancer(b, p.policy, p.cfg, eps)
				// A keyed pick wakes one endpoint, which creates its
				// SubConn; make it READY.
				ctx, cancel := context.WithTimeout(context.Background(), testkit.Timeout)
				defer cancel()
				_, _ = cc.State().Picker.Pick(balancer.PickInfo{Ctx: headerCtx("wake")})
				if err := cc.WaitFor(ctx, func(balancer.State) error {
					if len(cc.SubConns()) == 0 {
						return fmt.Errorf("no SubConn yet")
					}
					return nil
				}); err != nil {
					b.Fatal(err)
				}
				sc := cc.SubConns()[0]
				sc.UpdateState(balancer.SubConnState{ConnectivityState: connectivity.Connecting})
				sc.UpdateState(balancer.SubConnState{ConnectivityState: connectivity.Ready})
				b.ReportAllocs()
				for b.Loop() {
					sc.UpdateState(balancer.SubConnState{ConnectivityState: connectivity.Idle})
					sc.UpdateState(balancer.SubConnState{ConnectivityState: connectivity.Connecting})
					sc.UpdateState(balancer.SubConnState{ConnectivityState: connectivity.Ready})
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(3*b.N), "ns/change")
			})
		}
	}
}

// BenchmarkNewPicker measures our policy's own part of a picker rebuild
// over n endpoints, outside any balancer: with the membership unchanged
// (what a connectivity change costs it) and with one weight changed (a
// table rebuild).
func BenchmarkNewPicker(b *testing.B) {
	for _, n := range buildSizes {
		members := make([]engine.Member, n)
		for i, a := range testkit.Addrs(n) {
			// With a weight attribute, as xDS sets one: the identity lookup
			// then reads a non-empty attribute map.
			members[i] = engine.Member{Endpoint: testkit.Endpoint(a, 1), Weight: 1}
		}
		idle := make([]engine.MemberState, n) // the zero state is IDLE
		changed := append([]engine.Member(nil), members...)
		changed[0].Weight = 2
		for _, tc := range tableConfigs {
			cfg, err := ParseConfig(json.RawMessage(tc.cfg))
			if err != nil {
				b.Fatal(err)
			}
			p := &policy{cfg: cfg.(*Config)}
			snaps := [2]*engine.Snapshot{{Members: members, States: idle}, {Members: changed, States: idle}}
			b.Run(fmt.Sprintf("n=%d/table=%s/change=none", n, tc.name), func(b *testing.B) {
				p.NewPicker(snaps[0])
				b.ReportAllocs()
				for b.Loop() {
					p.NewPicker(snaps[0])
				}
			})
			b.Run(fmt.Sprintf("n=%d/table=%s/change=weight", n, tc.name), func(b *testing.B) {
				b.ReportAllocs()
				i := 0
				for b.Loop() {
					p.NewPicker(snaps[i&1])
					i++
				}
			})
		}
	}
}

// BenchmarkRebuild measures one step of a rolling deploy on the ring alone:
// 1% of n endpoints (weights 1..100) swapped for new ones, alternating
// between two lists, the ring derived from the last one (rebuild=merge) or
// built afresh (rebuild=fresh), which is what the merge must beat.
func BenchmarkRebuild(b *testing.B) {
	for _, n := range buildSizes {
		rnd := rand.New(rand.NewPCG(1, 2))
		all := fleet(n + n/100)
		for i := range all {
			all[i].weight = uint32(1 + rnd.IntN(100))
		}
		base := all[:n:n]
		next := slices.Clone(base)
		for i, ep := range all[n:] {
			next[i*100] = ep
		}
		lists := [2][]endpoint{base, next}
		for _, mode := range []string{"merge", "fresh"} {
			b.Run(fmt.Sprintf("n=%d/rebuild=%s", n, mode), func(b *testing.B) {
				prev, err := newRing(lists[0], DefaultMinRingSize, DefaultMaxRingSize, DefaultMaxWeightRatio)
				if err != nil {
					b.Fatal(err)
				}
				b.ReportAllocs()
				i := 1
				merged := 0
				for b.Loop() {
					from, to := lists[(i-1)&1], lists[i&1]
					var r *ring
					if mode == "merge" {
						r, err = updateRing(prev, from, to, DefaultMinRingSize, DefaultMaxRingSize, DefaultMaxWeightRatio)
					} else {
						r, err = newRing(to, DefaultMinRingSize, DefaultMaxRingSize, DefaultMaxWeightRatio)
					}
					if err != nil {
						b.Fatal(err)
					}
					if r.merged {
						merged++
					}
					prev = r
					i++
				}
				b.ReportMetric(float64(merged)/float64(b.N), "merged/op")
				b.ReportMetric(float64(len(prev.hashes)), "entries")
			})
		}
	}
}
