package ringhash

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/pickwise/pickwise/internal/testkit"
	"google.golang.org/grpc/balancer"
	_ "google.golang.org/grpc/balancer/ringhash" // the peer: ring_hash_experimental
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/resolver"
)

// benchHeader is the request hash header both policies read in the
// benchmarks.
const benchHeader = "x-bench-key"

// lazyReadyPicker builds a lazy ring hash policy (ours or grpc-go's)
// through grpc's balancer registry, as a channel would, and connects all
// n endpoints the only way such a policy allows: by picking keys until
// each endpoint has been asked for, making every new SubConn READY. It
// returns the picker of the fully READY balancer and a function that
// closes the balancer. testkit.ReadyPicker cannot serve: it waits for
// SubConns that a lazy policy never creates unprompted.
func lazyReadyPicker(tb testing.TB, policy, cfg string, n int) (balancer.Picker, func()) {
	tb.Helper()
	builder := balancer.Get(policy)
	if builder == nil {
		tb.Fatalf("no balancer registered as %q", policy)
	}
	parsed, err := builder.(balancer.ConfigParser).ParseConfig(json.RawMessage(cfg))
	if err != nil {
		tb.Fatal(err)
	}
	cc := testkit.NewClientConn()
	bal := builder.Build(cc, balancer.BuildOptions{})
	if err := bal.UpdateClientConnState(balancer.ClientConnState{
		ResolverState:  resolver.State{Endpoints: testkit.Endpoints(testkit.Addrs(n))},
		BalancerConfig: parsed,
	}); err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testkit.Timeout)
	defer cancel()
	readied := map[*testkit.SubConn]bool{}
	key := 0
	err = cc.WaitFor(ctx, func(s balancer.State) error {
		for _, sc := range cc.SubConns() {
			if !readied[sc] {
				readied[sc] = true
				sc.UpdateState(balancer.SubConnState{ConnectivityState: connectivity.Connecting})
				sc.UpdateState(balancer.SubConnState{ConnectivityState: connectivity.Ready})
			}
		}
		if len(readied) == n && cc.State().ConnectivityState == connectivity.Ready {
			return nil
		}
		// Pick new keys until one reaches an endpoint that is not READY:
		// that pick asked it to connect, and the SubConn it creates wakes
		// this wait.
		p := cc.State().Picker
		for range 1 << 20 {
			key++
			res, err := p.Pick(balancer.PickInfo{Ctx: headerCtx(fmt.Sprint("warm-", key))})
			if errors.Is(err, balancer.ErrNoSubConnAvailable) {
				break
			}
			if err == nil && res.Done != nil {
				// A call left in flight would stay in bounded load's
				// counts, and the benchmark would start from a load
				// that differs from run to run.
				res.Done(balancer.DoneInfo{})
			}
		}
		return fmt.Errorf("%d of %d endpoints READY", len(readied), n)
	})
	if err != nil {
		tb.Fatal(err)
	}
	testkit.Settle(cc, n)
	return cc.State().Picker, bal.Close
}

func headerCtx(key string) context.Context {
	return metadata.NewOutgoingContext(context.Background(), metadata.Pairs(benchHeader, key))
}

// BenchmarkPick measures one keyed pick and its Done, from many goroutines
// at once, for grpc-go's ring_hash_experimental (key in the request hash
// header) and for pickwise_ring_hash with each table, with the key from
// WithKey and from the header, in the same run. Names follow
// testkit.BenchmarkPick ("n=<N>/policy=<name>", the peer first), so that
// benchstat -col /policy puts them side by side.
func BenchmarkPick(b *testing.B) {
	const keys = 1024
	withKey := make([]balancer.PickInfo, keys)
	header := make([]balancer.PickInfo, keys)
	for i := range keys {
		k := fmt.Sprintf("user-%d", i)
		withKey[i] = balancer.PickInfo{Ctx: WithKey(context.Background(), k)}
		header[i] = balancer.PickInfo{Ctx: headerCtx(k)}
	}
	type variant struct {
		name, policy, cfg string
		infos             []balancer.PickInfo
	}
	variants := []variant{{"ring_hash_experimental", "ring_hash_experimental", fmt.Sprintf(`{"requestHashHeader": %q}`, benchHeader), header}}
	for _, table := range []string{TableRing, TableMaglev, TableRendezvous} {
		cfg := fmt.Sprintf(`{"table": %q, "requestHashHeader": %q}`, table, benchHeader)
		variants = append(variants,
			variant{fmt.Sprintf("%s-%s-withkey", Name, table), Name, cfg, withKey},
			variant{fmt.Sprintf("%s-%s-header", Name, table), Name, cfg, header})
	}
	// Bounded load's extra cost: a counter per call and the cap check.
	variants = append(variants, variant{fmt.Sprintf("%s-ring-withkey-bounded", Name), Name,
		fmt.Sprintf(`{"balanceFactor": 1.25, "requestHashHeader": %q}`, benchHeader), withKey})
	for _, n := range []int{10, 100, 1000} {
		for _, v := range variants {
			b.Run(fmt.Sprintf("n=%d/policy=%s", n, v.name), func(b *testing.B) {
				p, closeFn := lazyReadyPicker(b, v.policy, v.cfg, n)
				defer closeFn()
				b.ReportAllocs()
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					i := 0
					for pb.Next() {
						res, err := p.Pick(v.infos[i&(keys-1)])
						i++
						if err != nil {
							b.Error(err)
							return
						}
						if res.Done != nil {
							res.Done(testkit.Outcome(nil))
						}
					}
				})
			})
		}
	}
}
