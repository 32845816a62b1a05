package peakewma_test

import (
	"fmt"
	"testing"

	"github.com/pickwise/pickwise/balancer/peakewma"
	"github.com/pickwise/pickwise/internal/testkit"
	"google.golang.org/grpc/balancer"
	_ "google.golang.org/grpc/balancer/leastrequest" // the peer we measure against
)

// BenchmarkPick measures one pick and its Done, from many goroutines at
// once, for pickwise_peak_ewma and grpc-go's least_request_experimental in
// the same run. Ours reads the clock at the pick and again in Done, and
// updates the latency average there.
func BenchmarkPick(b *testing.B) {
	for _, name := range []string{peakewma.Name, "least_request_experimental"} {
		for _, n := range []int{10, 100, 1000} {
			b.Run(fmt.Sprintf("%s/n=%d", name, n), func(b *testing.B) {
				p, closeFn := testkit.ReadyPicker(b, name, `{}`, n)
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
							res.Done(balancer.DoneInfo{BytesSent: true, BytesReceived: true})
						}
					}
				})
			})
		}
	}
}
