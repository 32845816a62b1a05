package orcawrr_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"time"

	"github.com/pickwise/pickwise/balancer/orcawrr"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/orca"
)

// A channel whose calls pickwise_orca_wrr places by the load its backends
// report. Importing the package registers the policy (a program that does
// not use the package's names imports it blank: import _
// "github.com/pickwise/pickwise/balancer/orcawrr"), and the service config
// selects it. The backend attaches an ORCA report to every response, which
// grpc-go's orca package does with one server option; the policy reads it
// from the response's trailer.
func Example() {
	// The backend's load as its own measurements would set it, e.g. from a
	// loop that runs once a second.
	smr := orca.NewServerMetricsRecorder()
	smr.SetApplicationUtilization(0.4)
	smr.SetQPS(250)

	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Println(err)
		return
	}
	srv := grpc.NewServer(orca.CallMetricsServerOption(smr))
	healthpb.RegisterHealthServer(srv, health.NewServer())
	go srv.Serve(lis)
	defer srv.Stop()

	// A58's field names and defaults; a shorter blackout than the default
	// 10s lets weights take effect sooner after a backend starts.
	sc := fmt.Sprintf(`{"loadBalancingConfig": [{%q: {"blackoutPeriod": "5s", "weightHalfLife": "5s"}}]}`, orcawrr.Name)
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
// Its errors name the policy and the field; a config written for grpc's
// weighted_round_robin parses unchanged.
func ExampleParseConfig() {
	for _, js := range []string{
		`{"blackoutPeriod": "-1s"}`,
		`{"errorUtilizationPenalty": -1}`,
		`{"weightHalfLife": "2h"}`,
	} {
		if _, err := orcawrr.ParseConfig(json.RawMessage(js)); err != nil {
			fmt.Println(err)
		}
	}
	cfg, err := orcawrr.ParseConfig(json.RawMessage(`{"enableOobLoadReport": true, "oobReportingPeriod": "30s"}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	c := cfg.(*orcawrr.Config)
	fmt.Println("out-of-band reports every", c.OOBReportingPeriod, "blackout", c.BlackoutPeriod)
	// Output:
	// pickwise_orca_wrr: blackoutPeriod "-1s": must be >= 0
	// pickwise_orca_wrr: errorUtilizationPenalty -1: must be a finite number >= 0
	// pickwise_orca_wrr: weightHalfLife "2h0m0s": must be in [0s, 1h0m0s]
	// out-of-band reports every 30s blackout 10s
}
