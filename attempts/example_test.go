package attempts_test

import (
	"fmt"

	"github.com/pickwise/pickwise/attempts"
	_ "github.com/pickwise/pickwise/balancer/ringhash"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// A channel whose retries, under grpc's retryPolicy, are placed away from
// the endpoints that earlier attempts of the same call used: with
// pickwise_ring_hash, on the key's next candidates.
func Example() {
	serviceConfig := `{
	  "loadBalancingConfig": [{"pickwise_ring_hash": {"requestHashHeader": "x-user-id"}}],
	  "methodConfig": [{
	    "name": [{"service": "example.Cache"}],
	    "retryPolicy": {"maxAttempts": 3, "initialBackoff": "0.01s", "maxBackoff": "0.1s",
	                    "backoffMultiplier": 2, "retryableStatusCodes": ["UNAVAILABLE"]}
	  }]
	}`
	conn, err := grpc.NewClient("dns:///cache.example.internal:8443",
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultServiceConfig(serviceConfig),
		grpc.WithChainUnaryInterceptor(attempts.UnaryClientInterceptor()),
		grpc.WithChainStreamInterceptor(attempts.StreamClientInterceptor()))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer conn.Close()
	fmt.Println("channel ready to place retries elsewhere:", conn.Target())
	// Output: channel ready to place retries elsewhere: dns:///cache.example.internal:8443
}
