package peakewma_test

import (
	"testing"

	"github.com/pickwise/pickwise/balancer/peakewma"
	"github.com/pickwise/pickwise/internal/testkit"
	_ "google.golang.org/grpc/balancer/leastrequest" // the peer we measure against
)

// BenchmarkPick measures one pick and its Done, from many goroutines at
// once, for pickwise_peak_ewma and grpc-go's least_request_experimental in
// the same run. Ours reads the clock at the pick and again in Done, and
// updates the latency average there.
func BenchmarkPick(b *testing.B) {
	testkit.BenchmarkPick(b, [][2]string{
		{"least_request_experimental", `{}`}, // first: the base of benchstat -col /policy
		{peakewma.Name, `{}`},
	}, []int{10, 100, 1000})
}
