package p2c_test

import (
	"context"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"
)

// e2eHealthServer is a gRPC server on loopback serving only grpc's health
// service, whose status the test sets.
type e2eHealthServer struct {
	addr   string
	health *health.Server
}

func e2eStartHealthServers(t *testing.T, n int) []e2eHealthServer {
	t.Helper()
	var out []e2eHealthServer
	for range n {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		srv := grpc.NewServer()
		h := health.NewServer()
		healthpb.RegisterHealthServer(srv, h)
		go srv.Serve(lis)
		t.Cleanup(srv.Stop)
		out = append(out, e2eHealthServer{addr: lis.Addr().String(), health: h})
	}
	return out
}

// e2eClosedAddr is a loopback address nothing listens on.
func e2eClosedAddr(t *testing.T) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()
	return addr
}

// The engine's sharding keeps what grpc's endpointsharding gives a
// policy: client-side health checking (a backend reporting NOT_SERVING
// leaves the picker and comes back when SERVING), and multi-address
// endpoints (pickfirst moves to an endpoint's next address when the first
// does not answer).
func TestEndToEndHealthCheckingAndMultiAddressEndpoints(t *testing.T) {
	srvs := e2eStartHealthServers(t, 3)
	r := manual.NewBuilderWithScheme("pickwise-sharding")
	r.InitialState(resolver.State{Endpoints: []resolver.Endpoint{
		{Addresses: []resolver.Address{{Addr: srvs[0].addr}}},
		{Addresses: []resolver.Address{{Addr: srvs[1].addr}}},
		// The first address refuses connections: pickfirst goes on.
		{Addresses: []resolver.Address{{Addr: e2eClosedAddr(t)}, {Addr: srvs[2].addr}}},
	}})
	conn, err := grpc.NewClient("pickwise-sharding:///test",
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithResolvers(r),
		grpc.WithDefaultServiceConfig(`{"loadBalancingConfig":[{"pickwise_p2c":{}}],"healthCheckConfig":{"serviceName":""}}`))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), e2eTimeout)
	defer cancel()
	client := healthpb.NewHealthClient(conn)
	// spread makes calls and counts them by the backend that answered.
	spread := func(calls int) map[string]int {
		got := map[string]int{}
		for range calls {
			var p peer.Peer
			callCtx, callCancel := context.WithTimeout(ctx, e2eCallTimeout)
			_, err := client.Check(callCtx, &healthpb.HealthCheckRequest{}, grpc.Peer(&p), grpc.WaitForReady(true))
			callCancel()
			if err != nil {
				t.Fatalf("call: %v", err)
			}
			got[p.Addr.String()]++
		}
		return got
	}
	waitUntil := func(what string, cond func(map[string]int) bool) {
		t.Helper()
		for {
			got := spread(300)
			if cond(got) {
				return
			}
			select {
			case <-ctx.Done():
				t.Fatalf("%s: last spread %v", what, got)
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
	waitUntil("every endpoint serving, the third through its second address", func(got map[string]int) bool {
		return got[srvs[0].addr] > 0 && got[srvs[1].addr] > 0 && got[srvs[2].addr] > 0
	})
	srvs[0].health.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)
	waitUntil("a NOT_SERVING backend out of the picker", func(got map[string]int) bool {
		return got[srvs[0].addr] == 0 && got[srvs[1].addr] > 0 && got[srvs[2].addr] > 0
	})
	srvs[0].health.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	waitUntil("the backend back once SERVING", func(got map[string]int) bool {
		return got[srvs[0].addr] > 0
	})
}
