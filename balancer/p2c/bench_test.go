package p2c_test

import (
	"testing"

	"github.com/pickwise/pickwise/balancer/p2c"
	"github.com/pickwise/pickwise/internal/testkit"
	_ "google.golang.org/grpc/balancer/leastrequest" // the peer we measure against
)

// benchPolicies are the policies the pick benchmarks put side by side:
// grpc-go's peer first (the base of benchstat -col /policy), the floor
// (testkit.Floor: the least a two-choice pick can cost, a yardstick), and
// ours.
var benchPolicies = [][2]string{
	{"least_request_experimental", `{}`},
	{testkit.Floor, `{}`},
	{p2c.Name, `{}`},
}

// BenchmarkPick measures one pick and its Done, from many goroutines at
// once, for pickwise_p2c, grpc-go's least_request_experimental and the
// floor in the same run.
func BenchmarkPick(b *testing.B) {
	testkit.BenchmarkPick(b, benchPolicies, []int{10, 100, 1000})
}

// BenchmarkPickBusy is BenchmarkPick with two calls per endpoint held in
// flight, as for a client that is most of its backends' load: the picks
// of ours then take their first candidates in turn.
func BenchmarkPickBusy(b *testing.B) {
	testkit.BenchmarkPickBusy(b, benchPolicies, []int{10, 100, 1000})
}

// BenchmarkPickRamping is BenchmarkPick while one more endpoint, joined
// after the others, is in its slow-start ramp (on by default in ours; the
// peer has none). Ours ramps by time alone here: every call ends at once,
// which shows the newcomer as fast as the others, and its ramp would end
// on that evidence within its first answers; a cold newcomer, slower,
// stays in its ramp as this one does.
func BenchmarkPickRamping(b *testing.B) {
	testkit.BenchmarkPickRamping(b, [][2]string{
		{"least_request_experimental", `{}`},
		{testkit.Floor, `{}`},
		{p2c.Name, `{"slowStart": {"timeOnly": true}}`},
	}, []int{10, 100, 1000})
}

// BenchmarkPickSerial is BenchmarkPick from one goroutine, up to 10k
// endpoints, where a pick's cache misses dominate its cost.
func BenchmarkPickSerial(b *testing.B) {
	testkit.BenchmarkPickSerial(b, benchPolicies, []int{10, 100, 1000, 10000})
}
