package p2c_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"time"

	"github.com/pickwise/pickwise/balancer/p2c"
	"github.com/pickwise/pickwise/lbconfig"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"
)

// A channel whose calls pickwise_p2c places over three backends. Importing
// the package registers the policy (a program that does not use the
// package's names imports it blank: import _
// "github.com/pickwise/pickwise/balancer/p2c"), and the service config
// selects it.
func Example() {
	// Three backends on loopback, each serving grpc's health service.
	var addrs []resolver.Address
	for range 3 {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			fmt.Println(err)
			return
		}
		srv := grpc.NewServer()
		healthpb.RegisterHealthServer(srv, health.NewServer())
		go srv.Serve(lis)
		defer srv.Stop()
		addrs = append(addrs, resolver.Address{Addr: lis.Addr().String()})
	}
	// In production the target's resolver lists the backends
	// ("dns:///my-service:443"); here a manual resolver does.
	r := manual.NewBuilderWithScheme("example")
	r.InitialState(resolver.State{Addresses: addrs})

	sc := fmt.Sprintf(`{"loadBalancingConfig": [{%q: {"choiceCount": 2}}]}`, p2c.Name)
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
	client := healthpb.NewHealthClient(conn)
	ok := 0
	for range 30 {
		if _, err := client.Check(ctx, &healthpb.HealthCheckRequest{}); err == nil {
			ok++
		}
	}
	fmt.Printf("%d of 30 calls succeeded\n", ok)
	// Output: 30 of 30 calls succeeded
}

// A config built in Go rather than typed as JSON: the defaults, with a
// shorter slow start for backends that join cold, turned into the service
// config a channel takes by lbconfig.ServiceConfig.
func Example_goConfig() {
	cfg := p2c.DefaultConfig()
	cfg.SlowStart.Window = lbconfig.Duration(20 * time.Second)
	sc, err := lbconfig.ServiceConfig(p2c.Name, cfg)
	if err != nil {
		fmt.Println(err)
		return
	}

	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Println(err)
		return
	}
	srv := grpc.NewServer()
	healthpb.RegisterHealthServer(srv, health.NewServer())
	go srv.Serve(lis)
	defer srv.Stop()

	// A config the policy rejects fails lbconfig.ServiceConfig above (the
	// policy is imported) and grpc.NewClient, so a channel that was
	// created runs with this one.
	conn, err := grpc.NewClient(lis.Addr().String(),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultServiceConfig(sc))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer conn.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(resp.GetStatus())
	// Output: SERVING
}

// ParseConfig is what grpc calls on the policy's part of a service config.
// Its errors name the policy and the field, and unknown fields are
// rejected, so a typo cannot silently leave a default in place.
func ExampleParseConfig() {
	for _, js := range []string{
		`{"choiceCount": 1}`,
		`{"slowStart": {"aggression": -1}}`,
		`{"choiceCnt": 3}`,
	} {
		if _, err := p2c.ParseConfig(json.RawMessage(js)); err != nil {
			fmt.Println(err)
		}
	}
	cfg, err := p2c.ParseConfig(json.RawMessage(`{"choiceCount": 3}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("choiceCount:", cfg.(*p2c.Config).ChoiceCount)
	// Output:
	// pickwise_p2c: choiceCount 1: must be >= 2
	// pickwise_p2c: slowStart.aggression -1: must be > 0 and finite
	// pickwise_p2c: unknown field "choiceCnt"
	// choiceCount: 3
}
