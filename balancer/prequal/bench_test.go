package prequal_test

import (
	"testing"
	"time"

	"github.com/pickwise/pickwise/balancer/p2c"
	"github.com/pickwise/pickwise/balancer/prequal"
	"github.com/pickwise/pickwise/internal/testkit"
	"google.golang.org/grpc/balancer"
	_ "google.golang.org/grpc/balancer/leastrequest" // a peer we measure against
)

// benchReports are the per-call reports of the benchmarks' endpoints: RIF
// and latency spread over the fleet, as a server running serverload puts
// in every answer. Built before the timer starts, so that finishing a
// call allocates nothing of the benchmark's.
func benchReports(n int) func(balancer.SubConn) balancer.DoneInfo {
	byAddr := map[string]balancer.DoneInfo{}
	for i, a := range testkit.Addrs(n) {
		byAddr[a] = report(load{rif: float64(i % 13), latency: 0.005 + 0.001*float64(i%7)})
	}
	return func(sc balancer.SubConn) balancer.DoneInfo { return byAddr[sc.(*testkit.SubConn).Addr()] }
}

// BenchmarkPick measures one pick and its Done, from every benchmark
// goroutine at once, for pickwise_prequal with its pool full of answers
// that every call's report refreshes, beside grpc-go's
// least_request_experimental and pickwise_p2c in the same run.
func BenchmarkPick(b *testing.B) {
	for _, n := range []int{10, 100, 1000} {
		testkit.BenchmarkPickWarm(b, [][2]string{
			{"least_request_experimental", `{}`},
			{p2c.Name, `{}`},
			{prequal.Name, `{}`},
		}, []int{n}, benchReports(n), time.Millisecond)
	}
}

// BenchmarkPickHeld is BenchmarkPick with each benchmark goroutine keeping
// 8 calls in flight, finishing the oldest as it starts the next: an
// answer is then spent for a while after its pick, as it is for calls that
// take longer than a pick, rather than renewed by the call's report at
// once.
func BenchmarkPickHeld(b *testing.B) {
	for _, n := range []int{10, 100, 1000} {
		testkit.BenchmarkPickWarmHeld(b, [][2]string{
			{"least_request_experimental", `{}`},
			{p2c.Name, `{}`},
			{prequal.Name, `{}`},
		}, []int{n}, benchReports(n), time.Millisecond, 8)
	}
}
