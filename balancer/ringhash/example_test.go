package ringhash_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"time"

	"github.com/pickwise/pickwise/balancer/ringhash"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"
)

// A channel whose calls pickwise_ring_hash places by a request header.
// Importing the package registers the policy (a program that does not use
// the package's names imports it blank: import _
// "github.com/pickwise/pickwise/balancer/ringhash"), and the service config
// selects it, here with a Maglev table and the key taken from the
// x-user-id header of each call (gRFC A76).
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

	sc := fmt.Sprintf(`{"loadBalancingConfig": [{%q: {"table": %q, "requestHashHeader": "x-user-id"}}]}`,
		ringhash.Name, ringhash.TableMaglev)
	conn, err := grpc.NewClient(lis.Addr().String(), // "dns:///my-cache:443" in production
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
	for i := range 10 {
		user := metadata.AppendToOutgoingContext(ctx, "x-user-id", fmt.Sprint("user-", i))
		if _, err := client.Check(user, &healthpb.HealthCheckRequest{}); err == nil {
			ok++
		}
	}
	fmt.Printf("%d of 10 calls succeeded\n", ok)
	// Output: 10 of 10 calls succeeded
}

// WithKey sets a call's key in its context, without a header: every call
// with the same key goes to the same backend while the set of backends is
// unchanged. grpc.Peer tells which backend served each call.
func ExampleWithKey() {
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
	// ("dns:///my-cache:443"); here a manual resolver does.
	r := manual.NewBuilderWithScheme("example")
	r.InitialState(resolver.State{Addresses: addrs})
	conn, err := grpc.NewClient(r.Scheme()+":///cache",
		grpc.WithResolvers(r),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultServiceConfig(fmt.Sprintf(`{"loadBalancingConfig": [{%q: {}}]}`, ringhash.Name)))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer conn.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	client := healthpb.NewHealthClient(conn)
	for _, user := range []string{"alice", "bob", "carol"} {
		keyed := ringhash.WithKey(ctx, user) // once per call, or once for a batch of calls
		served := map[string]int{}
		for range 10 {
			var p peer.Peer
			if _, err := client.Check(keyed, &healthpb.HealthCheckRequest{}, grpc.Peer(&p)); err != nil {
				fmt.Println(err)
				return
			}
			served[p.Addr.String()]++
		}
		fmt.Printf("%s: same backend for every call: %t\n", user, len(served) == 1)
	}
	// Output:
	// alice: same backend for every call: true
	// bob: same backend for every call: true
	// carol: same backend for every call: true
}

// ParseConfig is what grpc calls on the policy's part of a service config.
// Its errors name the policy and the field.
func ExampleParseConfig() {
	for _, js := range []string{
		`{"table": "circle"}`,
		`{"balanceFactor": 0.5}`,
		`{"table": "maglev", "maglevTableSize": 65536}`,
	} {
		if _, err := ringhash.ParseConfig(json.RawMessage(js)); err != nil {
			fmt.Println(err)
		}
	}
	cfg, err := ringhash.ParseConfig(json.RawMessage(`{"requestHashHeader": "X-User-Id", "balanceFactor": 1.25}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	c := cfg.(*ringhash.Config)
	fmt.Println("table:", c.Table, "header:", c.RequestHashHeader, "balanceFactor:", c.BalanceFactor)
	// Output:
	// pickwise_ring_hash: table "circle": must be "ring", "maglev" or "rendezvous"
	// pickwise_ring_hash: balanceFactor 0.5: must be 0 (off) or a finite number >= 1
	// pickwise_ring_hash: maglevTableSize 65536: must be a prime <= 262139
	// table: ring header: x-user-id balanceFactor: 1.25
}
