// Package compare runs the examples' side-by-side comparisons: it starts a
// small fleet on loopback, sends the same bounded traffic through one
// channel per policy, and prints each backend's share and each policy's
// error rate and latency. Each example supplies only its fleet and its
// policies, so what it shows stays in its own main.go.
package compare

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pickwise/pickwise/internal/fleet"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// Backend is one server of the example's fleet: how it behaves once
// traffic starts, and a few words for the table.
type Backend struct {
	About    string
	Behavior fleet.Behavior
}

// Policy is one column: a name and the service config that selects it.
type Policy struct {
	Name          string
	ServiceConfig string
}

// Main is an example's main: it reads -rpcs and -concurrency (with the
// example's defaults), runs the comparison on stdout, and exits non-zero
// with the error if it fails.
func Main(name string, backends []Backend, policies []Policy, rpcs, concurrency int) {
	flag.IntVar(&rpcs, "rpcs", rpcs, "RPCs to send through each policy")
	flag.IntVar(&concurrency, "concurrency", concurrency, "concurrent callers; load-aware policies differ from round robin only when calls overlap")
	flag.Parse()
	if err := Run(os.Stdout, backends, policies, rpcs, concurrency); err != nil {
		log.Fatalf("%s: %v", name, err)
	}
}

// Run starts len(backends) servers, connects one channel per policy to all
// of them, gives the servers their behaviors, sends rpcs calls from
// concurrency goroutines through each channel in turn, and writes the
// table to w.
func Run(w io.Writer, backends []Backend, policies []Policy, rpcs, concurrency int) error {
	if rpcs < 1 || concurrency < 1 {
		return fmt.Errorf("rpcs and concurrency must be at least 1")
	}
	f, err := fleet.Start(len(backends))
	if err != nil {
		return err
	}
	defer f.Close()

	conns := make([]*grpc.ClientConn, len(policies))
	for i, p := range policies {
		conn, err := dial(f.Addrs(), p.ServiceConfig)
		if err != nil {
			return fmt.Errorf("%s: %w", p.Name, err)
		}
		defer conn.Close()
		// Connect to every backend before measuring, while they all still
		// answer at once, so no policy is judged on how fast its
		// connections came up.
		if err := warmUp(conn, f); err != nil {
			return fmt.Errorf("%s: %w", p.Name, err)
		}
		conns[i] = conn
	}
	for i, b := range f.Backends {
		b.SetBehavior(backends[i].Behavior)
	}

	results := make([]result, len(policies))
	for i := range policies {
		results[i] = measure(conns[i], rpcs, concurrency)
	}
	report(w, f, backends, policies, rpcs, concurrency, results)
	return nil
}

// width is a column's width: its header's, and at least 12.
func width(name string) int { return max(len(name), 12) }

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
func report(w io.Writer, f *fleet.Fleet, backends []Backend, policies []Policy, rpcs, concurrency int, results []result) {
	const row = "%-10s  %-24s"
	fmt.Fprintf(w, "%d backends on 127.0.0.1; %d RPCs through each policy from %d concurrent callers.\n\n", len(f.Backends), rpcs, concurrency)

	fmt.Fprintf(w, row, "backend", "behavior")
	for _, p := range policies {
		fmt.Fprintf(w, "  %*s", width(p.Name), p.Name)
	}
	fmt.Fprintln(w)
	for i, b := range f.Backends {
		fmt.Fprintf(w, row, b.Name(), backends[i].About)
		for j, r := range results {
			fmt.Fprintf(w, "  %*.1f%%", width(policies[j].Name)-1, 100*float64(r.perBackend[b.Name()])/float64(rpcs))
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w)

	line := func(label string, cell func(r result) string) {
		fmt.Fprintf(w, "%-36s", label)
		for j, r := range results {
			fmt.Fprintf(w, "  %*s", width(policies[j].Name), cell(r))
		}
		fmt.Fprintln(w)
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
