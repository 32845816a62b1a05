package p2c_test

import (
	"testing"

	"github.com/pickwise/pickwise/balancer/p2c"
	"github.com/pickwise/pickwise/internal/testkit"
	_ "google.golang.org/grpc/balancer/leastrequest" // the peer we measure against
)

// BenchmarkPick measures one pick and its Done, from many goroutines at
// once, for pickwise_p2c and grpc-go's least_request_experimental in the
// same run.
func BenchmarkPick(b *testing.B) {
	testkit.BenchmarkPick(b, [][2]string{
		{"least_request_experimental", `{}`}, // first: the base of benchstat -col /policy
		{p2c.Name, `{}`},
	}, []int{10, 100, 1000})
}
