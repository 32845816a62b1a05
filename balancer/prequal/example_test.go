package prequal_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"time"

	"github.com/pickwise/pickwise/balancer/prequal"
	"github.com/pickwise/pickwise/lbconfig"
	"github.com/pickwise/pickwise/serverload"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"
)

// testService answers EmptyCall, as an application's service would.
type testService struct {
	testgrpc.UnimplementedTestServiceServer
}

func (testService) EmptyCall(context.Context, *testgrpc.Empty) (*testgrpc.Empty, error) {
	return &testgrpc.Empty{}, nil
}

// A channel whose calls pickwise_prequal places over three backends that
// run serverload: its interceptors put each server's load in every
// response's trailer, and its probe service answers the policy's load
// probes. Importing the package registers the policy (a program that does
// not use the package's names imports it blank: import _
// "github.com/pickwise/pickwise/balancer/prequal"), and the service config
// selects it.
func Example() {
	var addrs []resolver.Address
	for range 3 {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			fmt.Println(err)
			return
		}
		load := serverload.New()
		srv := grpc.NewServer(
			grpc.ChainUnaryInterceptor(load.UnaryInterceptor()),
			grpc.ChainStreamInterceptor(load.StreamInterceptor()),
		)
		load.Register(srv)
		testgrpc.RegisterTestServiceServer(srv, testService{})
		go srv.Serve(lis)
		defer srv.Stop()
		addrs = append(addrs, resolver.Address{Addr: lis.Addr().String()})
	}
	// In production the target's resolver lists the backends
	// ("dns:///my-service:443"); here a manual resolver does.
	r := manual.NewBuilderWithScheme("example")
	r.InitialState(resolver.State{Addresses: addrs})

	sc := fmt.Sprintf(`{"loadBalancingConfig": [{%q: {"poolSize": 16, "maxAge": "1s"}}]}`, prequal.Name)
	conn, err := grpc.NewClient(r.Scheme()+":///backends",
		grpc.WithResolvers(r),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultServiceConfig(sc))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer conn.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	client := testgrpc.NewTestServiceClient(conn)
	ok := 0
	for range 30 {
		if _, err := client.EmptyCall(ctx, &testgrpc.Empty{}); err == nil {
			ok++
		}
	}
	fmt.Printf("%d of 30 calls succeeded\n", ok)
	// Output: 30 of 30 calls succeeded
}

// A config built in Go rather than typed as JSON starts from
// DefaultConfig: a field a struct literal leaves at zero is a setting,
// here one the policy rejects, so lbconfig.ServiceConfig (with the policy
// imported) returns the error a channel would fail with.
func Example_goConfig() {
	cfg := prequal.DefaultConfig()
	cfg.MaxAge = lbconfig.Duration(500 * time.Millisecond)
	if _, err := lbconfig.ServiceConfig(prequal.Name, cfg); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("from DefaultConfig: accepted")

	_, err := lbconfig.ServiceConfig(prequal.Name, &prequal.Config{PoolSize: 16, MaxAge: cfg.MaxAge})
	fmt.Println("from a struct literal:", err)
	// Output:
	// from DefaultConfig: accepted
	// from a struct literal: pickwise_prequal: reuseBudget 0: must be in [1, 1000]
}

// ParseConfig is what grpc calls on the policy's part of a service config.
// Its errors name the policy and the field; durations are strings, and
// unknown fields are rejected.
func ExampleParseConfig() {
	for _, js := range []string{
		`{"poolSize": 64}`,
		`{"maxAge": "5ms"}`,
		`{"hotQuantile": 0}`,
		`{"minProbeRate": 2}`,
		`{"probeRate": 0.5}`,
	} {
		if _, err := prequal.ParseConfig(json.RawMessage(js)); err != nil {
			fmt.Println(err)
		}
	}
	cfg, err := prequal.ParseConfig(json.RawMessage(`{"maxAge": "500ms", "reuseBudget": 2}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	c := cfg.(*prequal.Config)
	fmt.Println("poolSize:", c.PoolSize, "maxAge:", c.MaxAge, "reuseBudget:", c.ReuseBudget, "hotQuantile:", c.HotQuantile)
	// Output:
	// pickwise_prequal: poolSize 64: must be in [2, 32]
	// pickwise_prequal: maxAge "5ms": must be in [10ms, 1m0s]
	// pickwise_prequal: hotQuantile 0: must be in (0, 1]
	// pickwise_prequal: minProbeRate 2: must be in [0, 1]
	// pickwise_prequal: unknown field "probeRate"
	// poolSize: 16 maxAge: 500ms reuseBudget: 2 hotQuantile: 0.7
}
