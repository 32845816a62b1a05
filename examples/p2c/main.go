// Command p2c shows what pickwise_p2c does for a gRPC client, side by side
// with grpc-go's round_robin.
//
// It starts six gRPC servers on 127.0.0.1: one that answers ten times slower
// than the others, one that fails every call at once with Unavailable (a
// "black hole"), and four healthy ones. It sends the same bounded traffic
// through two channels that differ only in their service config, then
// prints each backend's share of the calls under each policy, and each
// policy's error rate and latency percentiles.
//
// Round robin deals calls out in turn, so the slow backend and the black hole
// get one call in six each: one call in six fails, and one in six waits for
// the slow server. pickwise_p2c samples two backends per call and picks the
// one with fewer calls in flight, so the slow backend, whose calls linger,
// wins few comparisons; and its failure penalty makes the black hole, which
// looks idle because it fails instantly, look expensive instead, so it gets
// almost nothing.
//
// Using the policy takes two things, both marked in this file: a blank
// import that registers it, and a service config that selects it:
//
//	import _ "github.com/pickwise/pickwise/balancer/p2c"
//
//	conn, err := grpc.NewClient("dns:///my-service:443",
//		grpc.WithDefaultServiceConfig(`{"loadBalancingConfig": [{"pickwise_p2c": {}}]}`),
//		...)
//
// Run it from the module root; it takes a few seconds:
//
//	go run ./examples/p2c
//	go run ./examples/p2c -rpcs 10000 -concurrency 48
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/pickwise/pickwise/internal/fleet"

	// Registers pickwise_p2c with grpc's balancer registry. This blank
	// import is the only code change a client needs; the service config
	// below selects the policy.
	_ "github.com/pickwise/pickwise/balancer/p2c"
)

// p2cServiceConfig selects pickwise_p2c for every call on a channel. Every
// field of the policy's config is optional, so {} means the defaults: two
// choices, failure penalty on, slow start off. See the package
// documentation of balancer/p2c for the fields.
const p2cServiceConfig = `{"loadBalancingConfig": [{"pickwise_p2c": {}}]}`

// roundRobinServiceConfig selects grpc-go's round_robin, for comparison.
const roundRobinServiceConfig = `{"loadBalancingConfig": [{"round_robin": {}}]}`

// policies are compared in this order, which is also the column order.
var policies = []struct{ name, serviceConfig string }{
	{"round_robin", roundRobinServiceConfig},
	{"pickwise_p2c", p2cServiceConfig},
}

// healthyLatency is how long a healthy backend takes per call.
const healthyLatency = 5 * time.Millisecond

// backends describes the fleet: fleet.Start names them backend-0,
// backend-1, ... in this order.
var backends = []struct {
	about    string
	behavior fleet.Behavior
}{
	{"slow: 50ms per call", fleet.Behavior{Latency: 10 * healthyLatency}},
	{"fails fast: Unavailable", fleet.Behavior{ErrorRate: 1, ErrorCode: codes.Unavailable}},
	{"healthy: 5ms per call", fleet.Behavior{Latency: healthyLatency}},
	{"healthy: 5ms per call", fleet.Behavior{Latency: healthyLatency}},
	{"healthy: 5ms per call", fleet.Behavior{Latency: healthyLatency}},
	{"healthy: 5ms per call", fleet.Behavior{Latency: healthyLatency}},
}

func main() {
	rpcs := flag.Int("rpcs", 3000, "RPCs to send through each policy")
	concurrency := flag.Int("concurrency", 24, "concurrent callers; load-aware policies differ from round robin only when calls overlap")
	flag.Parse()
	if *rpcs < 1 || *concurrency < 1 {
		fmt.Fprintln(os.Stderr, "p2c: -rpcs and -concurrency must be at least 1")
		os.Exit(2)
	}
	if err := run(*rpcs, *concurrency); err != nil {
		log.Fatalf("p2c: %v", err)
	}
}

func run(rpcs, concurrency int) error {
	f, err := fleet.Start(len(backends))
	if err != nil {
		return err
	}
	defer f.Close()

	conns := make([]*grpc.ClientConn, len(policies))
	for i, p := range policies {
		conn, err := dial(f.Addrs(), p.serviceConfig)
		if err != nil {
			return fmt.Errorf("%s: %w", p.name, err)
		}
		defer conn.Close()
		// Connect to every backend before measuring, while they all still
		// answer at once, so neither policy is judged on how fast its
		// connections came up.
		if err := warmUp(conn, f); err != nil {
			return fmt.Errorf("%s: %w", p.name, err)
		}
		conns[i] = conn
	}
	for i, b := range f.Backends {
		b.SetBehavior(backends[i].behavior)
	}

	results := make([]result, len(policies))
	for i := range policies {
		results[i] = measure(conns[i], rpcs, concurrency)
	}
	report(f, rpcs, concurrency, results)
	return nil
}

// dial opens a channel to addrs that balances with the policy serviceConfig
// names. Nothing here is specific to pickwise: the policy is chosen entirely
// by the service config. The manual resolver stands in for DNS or xDS,
// which would list a real service's backends.
func dial(addrs []string, serviceConfig string) (*grpc.ClientConn, error) {
	r := manual.NewBuilderWithScheme("fleet")
	eps := make([]resolver.Endpoint, len(addrs))
	for i, a := range addrs {
		eps[i] = resolver.Endpoint{Addresses: []resolver.Address{{Addr: a}}}
	}
	r.InitialState(resolver.State{Endpoints: eps})
	return grpc.NewClient(r.Scheme()+":///backends",
		grpc.WithResolvers(r),
		grpc.WithTransportCredentials(insecure.NewCredentials()), // loopback test servers
		grpc.WithDefaultServiceConfig(serviceConfig),             // selects the policy
	)
}

// call makes one RPC to the fleet's test service and reports which backend
// handled it. Backends name themselves in a trailer because a failed call
// has no reply to carry the name.
func call(ctx context.Context, conn *grpc.ClientConn) (backend string, err error) {
	var trailer metadata.MD
	err = conn.Invoke(ctx, fleet.CallMethod, new(wrapperspb.StringValue), new(wrapperspb.StringValue),
		grpc.Trailer(&trailer),
		// Wait for a connection instead of failing while one is set up.
		grpc.WaitForReady(true))
	if v := trailer.Get(fleet.TrailerBackend); len(v) > 0 {
		backend = v[0]
	}
	return backend, err
}

// warmUp calls until every backend of f has answered. With every backend
// idle, both policies spread calls over whichever connections are ready, so
// this takes a few dozen calls.
func warmUp(conn *grpc.ClientConn, f *fleet.Fleet) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	seen := make(map[string]bool)
	for len(seen) < len(f.Backends) {
		backend, err := call(ctx, conn)
		if ctx.Err() != nil {
			return fmt.Errorf("warm-up: only %d of %d backends answered: %v", len(seen), len(f.Backends), err)
		}
		if backend != "" {
			seen[backend] = true
		}
	}
	return nil
}

// result is what one policy did with the traffic.
type result struct {
	perBackend map[string]int  // calls each backend handled, failures included
	failed     int             // calls that returned an error
	latencies  []time.Duration // of the calls that succeeded, sorted
	wall       time.Duration   // time to make every call
}

// measure makes rpcs calls on conn from concurrency goroutines.
func measure(conn *grpc.ClientConn, rpcs, concurrency int) result {
	res := result{perBackend: make(map[string]int)}
	var (
		mu      sync.Mutex // guards res
		claimed atomic.Int64
		wg      sync.WaitGroup
	)
	start := time.Now()
	for range min(concurrency, rpcs) {
		wg.Go(func() {
			for claimed.Add(1) <= int64(rpcs) {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				t0 := time.Now()
				backend, err := call(ctx, conn)
				took := time.Since(t0)
				cancel()

				mu.Lock()
				res.perBackend[backend]++
				if err != nil {
					res.failed++
				} else {
					res.latencies = append(res.latencies, took)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	res.wall = time.Since(start)
	slices.Sort(res.latencies)
	return res
}

// percentile is the nearest-rank percentile of sorted latencies.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(p/100*float64(len(sorted))+0.5) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// report prints one column per policy.
func report(f *fleet.Fleet, rpcs, concurrency int, results []result) {
	const row = "%-10s  %-24s"
	fmt.Printf("%d backends on 127.0.0.1; %d RPCs through each policy from %d concurrent callers.\n\n", len(f.Backends), rpcs, concurrency)

	fmt.Printf(row, "backend", "behavior")
	for _, p := range policies {
		fmt.Printf("  %12s", p.name)
	}
	fmt.Println()
	for i, b := range f.Backends {
		fmt.Printf(row, b.Name(), backends[i].about)
		for _, r := range results {
			fmt.Printf("  %11.1f%%", 100*float64(r.perBackend[b.Name()])/float64(rpcs))
		}
		fmt.Println()
	}
	fmt.Println()

	line := func(label string, cell func(r result) string) {
		fmt.Printf("%-36s", label)
		for _, r := range results {
			fmt.Printf("  %12s", cell(r))
		}
		fmt.Println()
	}
	line("error rate", func(r result) string { return fmt.Sprintf("%.1f%%", 100*float64(r.failed)/float64(rpcs)) })
	line("p50 latency (successful RPCs)", func(r result) string { return fmtDuration(percentile(r.latencies, 50)) })
	line("p90 latency (successful RPCs)", func(r result) string { return fmtDuration(percentile(r.latencies, 90)) })
	line("p99 latency (successful RPCs)", func(r result) string { return fmtDuration(percentile(r.latencies, 99)) })
	line("wall time", func(r result) string { return fmtDuration(r.wall) })
}

// fmtDuration rounds d to a width that fits the table.
func fmtDuration(d time.Duration) string {
	switch {
	case d >= time.Second:
		return d.Round(10 * time.Millisecond).String()
	case d >= time.Millisecond:
		return d.Round(100 * time.Microsecond).String()
	default:
		return d.Round(time.Microsecond).String()
	}
}
