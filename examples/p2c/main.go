// Command p2c shows what pickwise_p2c does for a gRPC client, side by side
// with grpc-go's round_robin.
//
// It starts six gRPC servers on 127.0.0.1: one that answers ten times slower
// than the others, one that fails every call at once with Unavailable (a
// "black hole"), and four healthy ones. It sends the same bounded traffic
// through two channels that differ only in their service config, then
// prints each backend's share of the calls under each policy, and each
// policy's error rate and latency percentiles.
//
// Round robin deals calls out in turn, so the slow backend and the black hole
// get one call in six each: one call in six fails, and one in six waits for
// the slow server. pickwise_p2c samples two backends per call and picks the
// one with fewer calls in flight, so the slow backend, whose calls linger,
// wins few comparisons; and its failure penalty makes the black hole, which
// looks idle because it fails instantly, look expensive instead, so it gets
// almost nothing.
//
// Using the policy takes two things, both marked in this file: a blank
// import that registers it, and a service config that selects it:
//
//	import _ "github.com/pickwise/pickwise/balancer/p2c"
//
//	conn, err := grpc.NewClient("dns:///my-service:443",
//		grpc.WithDefaultServiceConfig(`{"loadBalancingConfig": [{"pickwise_p2c": {}}]}`),
//		...)
//
// Run it from the module root; it takes a few seconds:
//
//	go run ./examples/p2c
//	go run ./examples/p2c -rpcs 10000 -concurrency 48
package main

import (
	"time"

	"google.golang.org/grpc/codes"

	"github.com/pickwise/pickwise/examples/internal/compare"
	"github.com/pickwise/pickwise/internal/fleet"

	// Registers pickwise_p2c with grpc's balancer registry. This blank
	// import is the only code change a client needs; the service config
	// below selects the policy.
	_ "github.com/pickwise/pickwise/balancer/p2c"
)

// p2cServiceConfig selects pickwise_p2c for every call on a channel. Every
// field of the policy's config is optional, so {} means the defaults: two
// choices, failure penalty and ejection on, slow start on. See the package
// documentation of balancer/p2c for the fields.
const p2cServiceConfig = `{"loadBalancingConfig": [{"pickwise_p2c": {}}]}`

// roundRobinServiceConfig selects grpc-go's round_robin, for comparison.
const roundRobinServiceConfig = `{"loadBalancingConfig": [{"round_robin": {}}]}`

// Each example lists its policies and backends in full, so that it reads
// as one self-contained program; the examples look alike by design, and
// what they share runs in examples/internal/compare.

// policies are compared in this order, which is also the column order.
var policies = []compare.Policy{
	{Name: "round_robin", ServiceConfig: roundRobinServiceConfig},
	{Name: "pickwise_p2c", ServiceConfig: p2cServiceConfig},
}

// healthyLatency is how long a healthy backend takes per call.
const healthyLatency = 5 * time.Millisecond

// backends describes the fleet: its servers are named backend-0,
// backend-1, ... in this order.
var backends = []compare.Backend{
	{About: "slow: 50ms per call", Behavior: fleet.Behavior{Latency: 10 * healthyLatency}},
	{About: "fails fast: Unavailable", Behavior: fleet.Behavior{ErrorRate: 1, ErrorCode: codes.Unavailable}},
	{About: "healthy: 5ms per call", Behavior: fleet.Behavior{Latency: healthyLatency}},
	{About: "healthy: 5ms per call", Behavior: fleet.Behavior{Latency: healthyLatency}},
	{About: "healthy: 5ms per call", Behavior: fleet.Behavior{Latency: healthyLatency}},
	{About: "healthy: 5ms per call", Behavior: fleet.Behavior{Latency: healthyLatency}},
}

func main() {
	compare.Main("p2c", backends, policies, 3000, 24)
}
