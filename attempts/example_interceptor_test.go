package attempts_test

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/pickwise/pickwise/attempts"
	_ "github.com/pickwise/pickwise/balancer/p2c"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"
	"google.golang.org/grpc/status"
)

// unavailable is a backend that refuses every health check, as an
// overloaded or broken server would.
type unavailable struct {
	healthpb.UnimplementedHealthServer
}

func (unavailable) Check(context.Context, *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	return nil, status.Error(codes.Unavailable, "overloaded")
}

// Two backends, one of which fails every call with UNAVAILABLE. grpc
// retries such a call once (the retryPolicy of the service config, here
// for every method: two attempts in all), and with the interceptor on the
// channel pickwise_p2c places the retry on a backend the call has not
// tried yet, so no call fails. Without the interceptor the picker knows
// nothing of the first attempt, and the retry can land on the failing
// backend again.
func ExampleUnaryClientInterceptor() {
	healthy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Println(err)
		return
	}
	srv := grpc.NewServer()
	healthpb.RegisterHealthServer(srv, health.NewServer())
	go srv.Serve(healthy)
	defer srv.Stop()

	failing, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer failing.Close() // in case bad.Serve never runs
	bad := grpc.NewServer()
	healthpb.RegisterHealthServer(bad, unavailable{})
	defer bad.Stop()

	r := manual.NewBuilderWithScheme("example")
	r.InitialState(resolver.State{Addresses: []resolver.Address{
		{Addr: failing.Addr().String()},
		{Addr: healthy.Addr().String()},
	}})
	serviceConfig := `{
	  "loadBalancingConfig": [{"pickwise_p2c": {}}],
	  "methodConfig": [{
	    "name": [{}],
	    "retryPolicy": {"maxAttempts": 2, "initialBackoff": "0.01s", "maxBackoff": "0.1s",
	                    "backoffMultiplier": 2, "retryableStatusCodes": ["UNAVAILABLE"]}
	  }]
	}`
	conn, err := grpc.NewClient(r.Scheme()+":///backends",
		grpc.WithResolvers(r),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultServiceConfig(serviceConfig),
		grpc.WithChainUnaryInterceptor(attempts.UnaryClientInterceptor()))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer conn.Close()

	// A retry can only go elsewhere if another backend is connected. So
	// that every call has one, wait until the channel is READY while only
	// the healthy backend is serving, then start the failing one.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn.Connect()
	for s := conn.GetState(); s != connectivity.Ready; s = conn.GetState() {
		if !conn.WaitForStateChange(ctx, s) {
			fmt.Println("not connected:", ctx.Err())
			return
		}
	}
	go bad.Serve(failing)

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
