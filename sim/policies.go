package sim

import (
	_ "github.com/pickwise/pickwise/balancer/p2c"      // registers pickwise_p2c
	_ "github.com/pickwise/pickwise/balancer/peakewma" // registers pickwise_peak_ewma
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
		GRPC("pickwise_peak_ewma", "pickwise_peak_ewma", `{}`),
	}
}

// The columns shared by the hash scenarios (hot key, remap storm): plain
// modulo hashing and grpc-go's ring hash, keyed by the request's HashHeader.
// Later hash policies add themselves here, one entry each.
func hashPolicies() []Policy {
	ring := GRPC("ring_hash", "ring_hash_experimental", `{"requestHashHeader":"`+HashHeader+`","minRingSize":1024}`)
	// Every request carries a key, so ring_hash draws no random numbers and
	// its ring depends only on the addresses: the column is reproducible.
	ring.Note = ""
	return []Policy{Modulo(), ring}
}
