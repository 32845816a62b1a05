package serverload_test

import (
	"context"
	"fmt"
	"net"

	v3orcapb "github.com/cncf/xds/go/xds/data/orca/v3"
	"github.com/pickwise/pickwise/serverload"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/orca"
	"google.golang.org/protobuf/proto"
)

// testService answers EmptyCall, as an application's service would.
type testService struct {
	testgrpc.UnimplementedTestServiceServer
}

func (testService) EmptyCall(context.Context, *testgrpc.Empty) (*testgrpc.Empty, error) {
	return &testgrpc.Empty{}, nil
}

// A server with serverload's interceptors and probe service. Every
// response carries the server's load in its ORCA trailer, which
// pickwise_prequal reads; here a client decodes it by hand.
func Example() {
	load := serverload.New()
	srv := grpc.NewServer(
		grpc.ChainUnaryInterceptor(load.UnaryInterceptor()),
		grpc.ChainStreamInterceptor(load.StreamInterceptor()),
	)
	load.Register(srv)
	testgrpc.RegisterTestServiceServer(srv, testService{})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Println(err)
		return
	}
	go srv.Serve(lis)
	defer srv.Stop()

	cc, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cc.Close()
	var trailer metadata.MD
	if _, err := testgrpc.NewTestServiceClient(cc).EmptyCall(context.Background(), &testgrpc.Empty{}, grpc.Trailer(&trailer)); err != nil {
		fmt.Println(err)
		return
	}
	report := new(v3orcapb.OrcaLoadReport)
	if err := proto.Unmarshal([]byte(trailer.Get("endpoint-load-metrics-bin")[0]), report); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("requests in flight:", report.NamedMetrics[serverload.RIFMetric])
	fmt.Println("latency known:", report.NamedMetrics[serverload.LatencyMetric] > 0)
	// Output:
	// requests in flight: 0
	// latency known: true
}

// grpc's ORCA service sends the figures out of band, beside the metrics
// the application records.
func ExampleServer_MetricsProvider() {
	load := serverload.New()
	srv := grpc.NewServer(
		grpc.ChainUnaryInterceptor(load.UnaryInterceptor()),
		grpc.ChainStreamInterceptor(load.StreamInterceptor()),
	)
	defer srv.Stop()
	rec := orca.NewServerMetricsRecorder()
	rec.SetCPUUtilization(0.5)
	provider := load.MetricsProvider(rec)
	if err := orca.Register(srv, orca.ServiceOptions{ServerMetricsProvider: provider}); err != nil {
		fmt.Println(err)
		return
	}

	// What the next out-of-band report carries, with no call served yet:
	m := provider.ServerMetrics()
	fmt.Println("CPU:", m.CPUUtilization)
	fmt.Println("requests in flight:", m.NamedMetrics[serverload.RIFMetric])
	fmt.Println("latency (0: unknown):", m.NamedMetrics[serverload.LatencyMetric])
	// Output:
	// CPU: 0.5
	// requests in flight: 0
	// latency (0: unknown): 0
}
