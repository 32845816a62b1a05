package subset

import (
	"fmt"
	"slices"
	"testing"

	"github.com/pickwise/pickwise/internal/testkit"
	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/resolver"
)

// BenchmarkUpdate is a resolver update in balanced mode that replaces one
// of 1,000, 10,000 or 50,000 endpoints (or puts it back), for the last of
// MaxBalancedClientCount clients with subsets of 20: the whole update,
// from collecting the identities to the child's. The rejoin hold is off,
// so that every update computes a subset.
func BenchmarkUpdate(b *testing.B) {
	for _, n := range []int{1000, 10000, 50000} {
		b.Run(fmt.Sprintf("endpoints=%d", n), func(b *testing.B) {
			addrs := make([]string, n)
			for i := range addrs {
				addrs[i] = fmt.Sprintf("10.0.%d.%d:8080", i/250, i%250+1)
			}
			other := slices.Clone(addrs)
			other[n/2] = "10.9.9.9:8080"
			states := []resolver.State{{Endpoints: endpointsOf(addrs)}, {Endpoints: endpointsOf(other)}}
			cfg := parse(b, childConfig(fmt.Sprintf(`"subsetSize": 20, "clientIndex": %d, "clientCount": %d, "rejoinHold": "0s", `,
				MaxBalancedClientCount-1, MaxBalancedClientCount)))
			bal := newBalancer(testkit.NewClientConn(), balancer.BuildOptions{}, 1)
			defer bal.Close()
			update := func(i int) {
				if err := bal.UpdateClientConnState(balancer.ClientConnState{ResolverState: states[i%2], BalancerConfig: cfg}); err != nil {
					b.Fatal(err)
				}
			}
			update(1)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				update(i)
				i++
			}
		})
	}
}
