package sim

import (
	_ "github.com/pickwise/pickwise/balancer/p2c" // registers pickwise_p2c
	_ "google.golang.org/grpc/balancer/leastrequest"
	_ "google.golang.org/grpc/balancer/ringhash"
	_ "google.golang.org/grpc/balancer/roundrobin"
)

// The columns shared by the load-aware scenarios. Later policies add
// themselves here, one entry each.
func loadAwarePolicies() []Policy {
	return []Policy{
		Random(),
		GRPC("round_robin", "round_robin", `{}`),
		GRPC("least_request", "least_request_experimental", `{}`),
		LeastConnections(),
		GRPC("pickwise_p2c", "pickwise_p2c", `{}`),
	}
}
