package peakewma_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"time"

	"github.com/pickwise/pickwise/balancer/peakewma"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// A channel whose calls pickwise_peak_ewma places. Importing the package
// registers the policy (a program that does not use the package's names
// imports it blank: import _ "github.com/pickwise/pickwise/balancer/peakewma"),
// and the service config selects it, here with a latency average that
// follows a change within about two seconds instead of ten.
func Example() {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Println(err)
		return
	}
	srv := grpc.NewServer()
	healthpb.RegisterHealthServer(srv, health.NewServer())
	go srv.Serve(lis)
	defer srv.Stop()

	sc := fmt.Sprintf(`{"loadBalancingConfig": [{%q: {"decayTime": "2s"}}]}`, peakewma.Name)
	conn, err := grpc.NewClient(lis.Addr().String(), // "dns:///my-service:443" in production
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultServiceConfig(sc))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer conn.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	client := healthpb.NewHealthClient(conn)
	ok := 0
	for range 10 {
		if _, err := client.Check(ctx, &healthpb.HealthCheckRequest{}); err == nil {
			ok++
		}
	}
	fmt.Printf("%d of 10 calls succeeded\n", ok)
	// Output: 10 of 10 calls succeeded
}

// ParseConfig is what grpc calls on the policy's part of a service config.
// Its errors name the policy and the field; durations are strings.
func ExampleParseConfig() {
	for _, js := range []string{
		`{"decayTime": "1ms"}`,
		`{"decay": "2s"}`,
		`{"choiceCount": 1}`,
	} {
		if _, err := peakewma.ParseConfig(json.RawMessage(js)); err != nil {
			fmt.Println(err)
		}
	}
	cfg, err := peakewma.ParseConfig(json.RawMessage(`{"decayTime": "2s"}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("decayTime:", cfg.(*peakewma.Config).DecayTime)
	// Output:
	// pickwise_peak_ewma: decayTime "1ms": must be in [10ms, 1h0m0s]
	// pickwise_peak_ewma: unknown field "decay"
	// pickwise_peak_ewma: choiceCount 1: must be >= 2
	// decayTime: 2s
}
