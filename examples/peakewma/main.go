// Command peakewma shows what pickwise_peak_ewma does for a gRPC client
// when few calls overlap, side by side with round_robin and pickwise_p2c.
//
// It starts six gRPC servers on 127.0.0.1: one degraded host that answers
// in 100 ms instead of 5 ms, one that fails every call at once (a black
// hole), and four healthy ones. A handful of callers send the same bounded
// traffic through three channels that differ only in their service config.
//
// With four callers and six backends, most backends have nothing in flight
// most of the time, so counting calls in flight (pickwise_p2c) tells the
// degraded host from the healthy ones only when a slow call happens to be
// pending. pickwise_peak_ewma remembers each backend's latency instead: one
// slow answer is enough to steer calls away. A fast failure is not priced
// as a fast answer: failures are counted as evidence against the backend,
// and a backend that fails far more often than the rest is ejected and
// only probed, so the black hole gains nothing by failing quickly.
// Neither load-aware policy gets the degraded host to zero: with two random
// choices, one pick in fifteen draws the degraded host and the black hole
// together, and the degraded host is the lesser evil.
//
// Using the policy takes a blank import that registers it and a service
// config that selects it:
//
//	import _ "github.com/pickwise/pickwise/balancer/peakewma"
//
//	grpc.WithDefaultServiceConfig(`{"loadBalancingConfig": [{"pickwise_peak_ewma": {}}]}`)
//
// Run it from the module root; it takes about 10 seconds and prints each
// policy's progress as it goes:
//
//	go run ./examples/peakewma
//	go run ./examples/peakewma -concurrency 32
package main

import (
	"time"

	"google.golang.org/grpc/codes"

	"github.com/pickwise/pickwise/examples/internal/compare"
	"github.com/pickwise/pickwise/internal/fleet"

	// Register the policies this example selects by name.
	_ "github.com/pickwise/pickwise/balancer/p2c"
	_ "github.com/pickwise/pickwise/balancer/peakewma"
)

// Each example lists its policies and backends in full, so that it reads
// as one self-contained program; the examples look alike by design, and
// what they share runs in examples/internal/compare.

// policies are compared in this order, which is also the column order.
// Every field of pickwise_peak_ewma's config is optional: {} is a 10 s
// decay time and the failure penalty on.
var policies = []compare.Policy{
	{Name: "round_robin", ServiceConfig: `{"loadBalancingConfig": [{"round_robin": {}}]}`},
	{Name: "pickwise_p2c", ServiceConfig: `{"loadBalancingConfig": [{"pickwise_p2c": {}}]}`},
	{Name: "pickwise_peak_ewma", ServiceConfig: `{"loadBalancingConfig": [{"pickwise_peak_ewma": {}}]}`},
}

// healthyLatency is how long a healthy backend takes per call.
const healthyLatency = 5 * time.Millisecond

// backends describes the fleet: its servers are named backend-0,
// backend-1, ... in this order.
var backends = []compare.Backend{
	{About: "degraded: 100ms per call", Behavior: fleet.Behavior{Latency: 20 * healthyLatency}},
	{About: "fails fast: Unavailable", Behavior: fleet.Behavior{ErrorRate: 1, ErrorCode: codes.Unavailable}},
	{About: "healthy: 5ms per call", Behavior: fleet.Behavior{Latency: healthyLatency}},
	{About: "healthy: 5ms per call", Behavior: fleet.Behavior{Latency: healthyLatency}},
	{About: "healthy: 5ms per call", Behavior: fleet.Behavior{Latency: healthyLatency}},
	{About: "healthy: 5ms per call", Behavior: fleet.Behavior{Latency: healthyLatency}},
}

func main() {
	compare.Main("peakewma", backends, policies, 1000, 4)
}
