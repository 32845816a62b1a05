package metrics_test

import (
	"context"
	"fmt"
	"log"
	"net"
	"slices"
	"strings"
	"sync"

	_ "github.com/pickwise/pickwise/balancer/p2c"
	"github.com/pickwise/pickwise/metrics"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"
)

// A Recorder feeding a sink of one's own, here one that prints what a
// Prometheus scrape would show: counters summed, the gauges of the last
// collection, and each histogram's count and sum. The channel is a real
// one, pickwise_p2c over one backend on 127.0.0.1, so its three calls are
// picked as the only READY endpoint ("only_ready").
func ExampleRecorder() {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	srv := grpc.NewServer()
	healthpb.RegisterHealthServer(srv, health.NewServer())
	go srv.Serve(lis)
	defer srv.Stop()

	// The sink: one value per series, a series being a metric and its
	// label values. record runs on grpc's goroutines, one call at a time.
	var mu sync.Mutex
	series := map[string]float64{}
	rec := metrics.NewRecorder(func(s metrics.Sample) {
		mu.Lock()
		defer mu.Unlock()
		name := strings.ReplaceAll(s.Name, ".", "_")
		var labels []string
		for i, l := range s.LabelNames {
			labels = append(labels, fmt.Sprintf("%s=%q", strings.ReplaceAll(l, ".", "_"), s.LabelValues[i]))
		}
		slices.Sort(labels)
		at := "{" + strings.Join(labels, ",") + "}"
		switch s.Kind {
		case metrics.Counter:
			series[name+"_total"+at] += s.Value
		case metrics.Gauge:
			series[name+at] = s.Value
		case metrics.Histogram:
			series[name+"_count"+at]++
			series[name+"_sum"+at] += s.Value
		}
	})

	// A static resolver, so that the grpc.target label is the same in
	// every run.
	r := manual.NewBuilderWithScheme("example")
	r.InitialState(resolver.State{Endpoints: []resolver.Endpoint{{Addresses: []resolver.Address{{Addr: lis.Addr().String()}}}}})
	conn, err := grpc.NewClient("example:///backends",
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithResolvers(r),
		grpc.WithDefaultServiceConfig(`{"loadBalancingConfig": [{"pickwise_p2c": {}}]}`),
		rec.DialOption())
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	client := healthpb.NewHealthClient(conn)
	for range 3 {
		if _, err := client.Check(context.Background(), &healthpb.HealthCheckRequest{}); err != nil {
			log.Fatal(err)
		}
	}

	// Before each scrape: the gauges, and the picks not yet recorded.
	rec.Collect()
	mu.Lock()
	defer mu.Unlock()
	lines := make([]string, 0, len(series))
	for s, v := range series {
		if strings.HasPrefix(s, "pickwise_p2c_membership{") {
			continue // labelled with a fingerprint of the listener's random port
		}
		lines = append(lines, fmt.Sprint(s, " ", v))
	}
	slices.Sort(lines)
	fmt.Println(strings.Join(lines, "\n"))
	// Output:
	// pickwise_p2c_endpoint_cost_count{grpc_lb_locality="",grpc_target="example:///backends"} 1
	// pickwise_p2c_endpoint_cost_sum{grpc_lb_locality="",grpc_target="example:///backends"} 1
	// pickwise_p2c_endpoints_ejected{grpc_lb_locality="",grpc_target="example:///backends"} 0
	// pickwise_p2c_endpoints_in_slow_start{grpc_lb_locality="",grpc_target="example:///backends"} 0
	// pickwise_p2c_endpoints_ready{grpc_lb_locality="",grpc_target="example:///backends"} 1
	// pickwise_p2c_picks_total{grpc_lb_locality="",grpc_target="example:///backends",pickwise_reason="only_ready"} 3
}
