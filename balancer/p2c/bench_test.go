package p2c_test

import (
	"fmt"
	"testing"

	"github.com/pickwise/pickwise/balancer/p2c"
	"github.com/pickwise/pickwise/internal/testkit"
	"google.golang.org/grpc/balancer"
	_ "google.golang.org/grpc/balancer/leastrequest" // the peer we measure against
)

// BenchmarkPick measures one pick and its Done, from many goroutines at
// once as a busy channel does, for pickwise_p2c and grpc-go's
// least_request_experimental in the same run.
func BenchmarkPick(b *testing.B) {
	policies := []struct{ name, cfg string }{
		{p2c.Name, `{}`},
		{"least_request_experimental", `{}`},
	}
	for _, pol := range policies {
		for _, n := range benchSizes {
			b.Run(fmt.Sprintf("%s/n=%d", pol.name, n), func(b *testing.B) {
				p, closeFn := testkit.ReadyPicker(b, pol.name, pol.cfg, n)
				defer closeFn()
				b.ReportAllocs()
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						res, err := p.Pick(balancer.PickInfo{})
						if err != nil {
							b.Error(err)
							return
						}
						if res.Done != nil {
							res.Done(balancer.DoneInfo{})
						}
					}
				})
			})
		}
	}
}

// benchSizes are the fleet sizes every policy's BenchmarkPick covers.
var benchSizes = []int{10, 100, 1000}
