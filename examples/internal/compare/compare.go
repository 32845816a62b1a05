// Package compare runs the examples' side-by-side comparisons: it starts a
// small fleet on loopback, sends the same bounded traffic through one
// channel per policy, and prints each backend's share and each policy's
// error rate and latency. When the backends report ORCA load, it prints
// each backend's reported utilization beside its share. Each example
// supplies only its fleet and its policies, so what it shows stays in its
// own main.go.
package compare

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"math"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pickwise/pickwise/internal/fleet"
	"github.com/pickwise/pickwise/interop/server"
	"github.com/pickwise/pickwise/sim"
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
	// Server, when set, gives this backend the full behavior of
	// github.com/pickwise/pickwise/interop/server (the server every
	// backend runs) instead of fleet's Behavior, for examples that need
	// what only the full behavior sets: a capacity limit and ORCA load
	// reports. Either every backend of a comparison sets it or none does.
	Server *server.Behavior
}

// Policy is one column: a name and the service config that selects it.
type Policy struct {
	Name          string
	ServiceConfig string
}

// Options are the settings of a comparison. A zero field keeps what Run
// does, so Run is RunOptions with RPCs and Concurrency alone.
type Options struct {
	// RPCs is how many calls are measured through each policy, and
	// Concurrency how many goroutines make them. MainOptions uses them as
	// the defaults of -rpcs and -concurrency.
	RPCs, Concurrency int
	// Settle is how long each channel sends calls that are not counted
	// before its measured ones, from Concurrency goroutines. Policies that
	// learn from the backends, such as ORCA weights that are used only
	// after a blackout period, are then measured as a long-running client
	// sees them; and the backends' one-second rate windows, which their
	// ORCA reports are computed from, forget the previous policy's traffic.
	Settle time.Duration
	// Notes are printed under the table, one paragraph each.
	Notes []string
	// Check, when set, judges the outcomes, in policy order, after the
	// table is printed; its error fails the run, so an example run by CI
	// notices when it stops showing what it says it shows.
	Check func([]Outcome) error
	// Progress, when set, gets a line as each step starts and ends, so a
	// person running the example sees it work before the table is ready.
	Progress io.Writer
}

// Outcome is what one policy did with the measured calls, for
// Options.Check.
type Outcome struct {
	// Policy is the column's name, Policy.Name.
	Policy string
	// Share is the fraction of the calls each backend handled, by backend
	// index.
	Share []float64
	// Utilization is each backend's mean ORCA-reported utilization over
	// the calls it handled, by backend index; NaN for a backend that sent
	// no report.
	Utilization []float64
	// Failed counts calls that returned an error.
	Failed int
	// Throughput is calls completed per second of wall time.
	Throughput float64
}

// Main is an example's main: it reads -rpcs and -concurrency (with the
// example's defaults), runs the comparison on stdout, and exits non-zero
// with the error if it fails.
func Main(name string, backends []Backend, policies []Policy, rpcs, concurrency int) {
	MainOptions(name, backends, policies, Options{RPCs: rpcs, Concurrency: concurrency})
}

// MainOptions is Main with the rest of Options; o.RPCs and o.Concurrency
// are the flags' defaults.
func MainOptions(name string, backends []Backend, policies []Policy, o Options) {
	flag.IntVar(&o.RPCs, "rpcs", o.RPCs, "RPCs to send through each policy")
	flag.IntVar(&o.Concurrency, "concurrency", o.Concurrency, "concurrent callers; load-aware policies differ from round robin only when calls overlap")
	flag.Parse()
	o.Progress = os.Stderr
	if err := RunOptions(os.Stdout, backends, policies, o); err != nil {
		log.Fatalf("%s: %v", name, err)
	}
}

// Run starts len(backends) servers, connects one channel per policy to all
// of them, gives the servers their behaviors, sends rpcs calls from
// concurrency goroutines through each channel in turn, and writes the
// table to w.
func Run(w io.Writer, backends []Backend, policies []Policy, rpcs, concurrency int) error {
	return RunOptions(w, backends, policies, Options{RPCs: rpcs, Concurrency: concurrency})
}

// RunOptions is Run with the rest of Options.
func RunOptions(w io.Writer, backends []Backend, policies []Policy, o Options) error {
	if o.RPCs < 1 || o.Concurrency < 1 {
		return fmt.Errorf("rpcs and concurrency must be at least 1")
	}
	progress := func(format string, args ...any) {
		if o.Progress != nil {
			fmt.Fprintf(o.Progress, format, args...)
		}
	}
	began := time.Now()
	f, err := start(backends)
	if err != nil {
		return err
	}
	defer f.close()
	progress("started %d backends on 127.0.0.1; connecting %d channels ...\n", len(f.names), len(policies))

	conns := make([]*grpc.ClientConn, len(policies))
	for i, p := range policies {
		conn, err := dial(f.addrs, p.ServiceConfig)
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
	if err := f.apply(); err != nil {
		return err
	}

	results := make([]result, len(policies))
	for i, p := range policies {
		start := time.Now()
		if o.Settle > 0 {
			progress("%-24s %v of unmeasured calls first ...\n", p.Name, o.Settle)
			settle(conns[i], f.method, o.Settle, o.Concurrency)
		}
		progress("%-24s %d RPCs from %d callers ...", p.Name, o.RPCs, o.Concurrency)
		results[i] = measure(conns[i], f.method, o.RPCs, o.Concurrency)
		progress(" done in %v\n", time.Since(start).Round(100*time.Millisecond))
	}
	progress("all policies measured in %v\n\n", time.Since(began).Round(100*time.Millisecond))
	report(w, f.names, backends, policies, o, results)
	if o.Check == nil {
		return nil
	}
	outs := make([]Outcome, len(policies))
	for i, r := range results {
		outs[i] = r.outcome(policies[i].Name, f.names, o.RPCs)
	}
	return o.Check(outs)
}

// backendSet is the running fleet, of either kind of backend, reduced to
// what a comparison needs.
type backendSet struct {
	names, addrs []string
	method       string       // the traffic RPC's full name
	apply        func() error // gives every backend its behavior
	close        func()
}

// start starts one backend per entry of backends, answering at once until
// apply.
func start(backends []Backend) (*backendSet, error) {
	servers := 0
	for _, b := range backends {
		if b.Server != nil {
			servers++
		}
	}
	switch servers {
	case 0:
		return startFleet(backends)
	case len(backends):
		return startServers(backends)
	}
	return nil, errors.New("either every backend or none must set Server")
}

func startFleet(backends []Backend) (*backendSet, error) {
	f, err := fleet.Start(len(backends))
	if err != nil {
		return nil, err
	}
	s := &backendSet{addrs: f.Addrs(), method: fleet.CallMethod, close: f.Close}
	for _, b := range f.Backends {
		s.names = append(s.names, b.Name())
	}
	s.apply = func() error {
		for i, b := range f.Backends {
			b.SetBehavior(backends[i].Behavior)
		}
		return nil
	}
	return s, nil
}

func startServers(backends []Backend) (*backendSet, error) {
	var running []*server.Server
	s := &backendSet{method: server.CallMethod, close: func() {
		for _, srv := range running {
			srv.Stop()
		}
	}}
	for i := range backends {
		// Zero behavior until apply, like a fleet backend: the warm-up
		// then sees no queue and no load reports.
		srv, err := server.New(fmt.Sprintf("backend-%d", i), server.Behavior{})
		if err != nil {
			s.close()
			return nil, err
		}
		addr, err := srv.Start("127.0.0.1:0")
		if err != nil {
			s.close()
			return nil, err
		}
		running = append(running, srv)
		s.names = append(s.names, srv.Name())
		s.addrs = append(s.addrs, addr)
	}
	s.apply = func() error {
		for i, srv := range running {
			if err := srv.SetBehavior(*backends[i].Server); err != nil {
				return err
			}
		}
		return nil
	}
	return s, nil
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

// call makes one RPC to the fleet's test service (method) and reports which
// backend handled it, and the utilization in its ORCA load report (NaN
// without one). Backends name themselves in a trailer because a failed call
// has no reply to carry the name.
func call(ctx context.Context, conn *grpc.ClientConn, method string) (backend string, util float64, err error) {
	var trailer metadata.MD
	err = conn.Invoke(ctx, method, new(wrapperspb.StringValue), new(wrapperspb.StringValue),
		grpc.Trailer(&trailer),
		// Wait for a connection instead of failing while one is set up.
		grpc.WaitForReady(true))
	if v := trailer.Get(fleet.TrailerBackend); len(v) > 0 {
		backend = v[0]
	}
	util = math.NaN()
	if r, perr := server.ParseLoadReport(trailer); perr == nil && r != nil {
		// The utilization a policy following gRFC A58 uses: the
		// application's when it sends one, else the CPU's.
		util = r.GetApplicationUtilization()
		if util == 0 {
			util = r.GetCpuUtilization()
		}
	}
	return backend, util, err
}

// warmUp calls until every backend of f has answered. With every backend
// idle, both policies spread calls over whichever connections are ready, so
// this takes a few dozen calls.
func warmUp(conn *grpc.ClientConn, f *backendSet) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	seen := make(map[string]bool)
	for len(seen) < len(f.names) {
		backend, _, err := call(ctx, conn, f.method)
		if ctx.Err() != nil {
			return fmt.Errorf("warm-up: only %d of %d backends answered: %v", len(seen), len(f.names), err)
		}
		if backend != "" {
			seen[backend] = true
		}
	}
	return nil
}

// settle makes calls on conn from concurrency goroutines for d and forgets
// them. A call that fails here is not an error of the run: the measured
// calls that follow count failures.
func settle(conn *grpc.ClientConn, method string, d time.Duration, concurrency int) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var wg sync.WaitGroup
	for range concurrency {
		wg.Go(func() {
			for ctx.Err() == nil {
				_, _, _ = call(ctx, conn, method)
			}
		})
	}
	wg.Wait()
}

// result is what one policy did with the traffic.
type result struct {
	perBackend map[string]int     // calls each backend handled, failures included
	utilSum    map[string]float64 // sum of the utilizations each backend reported
	utilN      map[string]int     // how many reports utilSum adds up
	failed     int                // calls that returned an error
	latencies  []time.Duration    // of the calls that succeeded, sorted
	wall       time.Duration      // time to make every call
}

// utilization is backend's mean reported utilization, NaN without reports.
func (r result) utilization(backend string) float64 {
	if r.utilN[backend] == 0 {
		return math.NaN()
	}
	return r.utilSum[backend] / float64(r.utilN[backend])
}

// outcome exports r for Options.Check.
func (r result) outcome(policy string, names []string, rpcs int) Outcome {
	o := Outcome{Policy: policy, Failed: r.failed, Throughput: float64(rpcs) / r.wall.Seconds()}
	for _, n := range names {
		o.Share = append(o.Share, float64(r.perBackend[n])/float64(rpcs))
		o.Utilization = append(o.Utilization, r.utilization(n))
	}
	return o
}

// measure makes rpcs calls on conn from concurrency goroutines.
func measure(conn *grpc.ClientConn, method string, rpcs, concurrency int) result {
	res := result{perBackend: make(map[string]int), utilSum: make(map[string]float64), utilN: make(map[string]int)}
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
				backend, util, err := call(ctx, conn, method)
				took := time.Since(t0)
				cancel()

				mu.Lock()
				res.perBackend[backend]++
				if !math.IsNaN(util) {
					res.utilSum[backend] += util
					res.utilN[backend]++
				}
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

// report prints one column per policy: each backend's share of the calls,
// and beside it the utilization the backend reported when any backend
// sent ORCA reports.
func report(w io.Writer, names []string, backends []Backend, policies []Policy, o Options, results []result) {
	const row = "%-10s  %-24s"
	fmt.Fprintf(w, "%d backends on 127.0.0.1; %d RPCs through each policy from %d concurrent callers.\n", len(names), o.RPCs, o.Concurrency)
	if o.Settle > 0 {
		fmt.Fprintf(w, "Before its measured RPCs, each channel made calls for %v that are not counted.\n", o.Settle)
	}
	fmt.Fprintln(w)

	withUtil := slices.ContainsFunc(results, func(r result) bool { return len(r.utilN) > 0 })
	// width is a column's width: its header's, and at least what its cells
	// need.
	width := func(name string) int { return max(len(name), 12) }
	if withUtil {
		width = func(name string) int { return max(len(name), 14) }
		fmt.Fprintf(w, row, "", "")
		for _, p := range policies {
			fmt.Fprintf(w, "  %*s", width(p.Name), p.Name)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, row, "backend", "behavior")
	for _, p := range policies {
		if withUtil {
			fmt.Fprintf(w, "  %*s", width(p.Name), "share    util")
		} else {
			fmt.Fprintf(w, "  %*s", width(p.Name), p.Name)
		}
	}
	fmt.Fprintln(w)
	for i, name := range names {
		fmt.Fprintf(w, row, name, backends[i].About)
		for j, r := range results {
			share := 100 * float64(r.perBackend[name]) / float64(o.RPCs)
			if !withUtil {
				fmt.Fprintf(w, "  %*.1f%%", width(policies[j].Name)-1, share)
				continue
			}
			util := "-"
			if u := r.utilization(name); !math.IsNaN(u) {
				util = fmt.Sprintf("%.0f%%", 100*u)
			}
			fmt.Fprintf(w, "  %*s", width(policies[j].Name), fmt.Sprintf("%.1f%%  %6s", share, util))
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
	line("error rate", func(r result) string { return fmt.Sprintf("%.1f%%", 100*float64(r.failed)/float64(o.RPCs)) })
	line("p50 latency (successful RPCs)", func(r result) string { return fmtDuration(sim.Quantile(r.latencies, 0.50)) })
	line("p90 latency (successful RPCs)", func(r result) string { return fmtDuration(sim.Quantile(r.latencies, 0.90)) })
	line("p99 latency (successful RPCs)", func(r result) string { return fmtDuration(sim.Quantile(r.latencies, 0.99)) })
	line("wall time", func(r result) string { return fmtDuration(r.wall) })
	line("throughput (calls per second)", func(r result) string { return fmt.Sprintf("%.0f", float64(o.RPCs)/r.wall.Seconds()) })

	for _, n := range o.Notes {
		fmt.Fprintln(w)
		fmt.Fprint(w, Wrap(n, 78))
	}
}

// Wrap breaks text into lines of at most width columns, at spaces.
func Wrap(text string, width int) string {
	var b strings.Builder
	n := 0
	for _, word := range strings.Fields(text) {
		if n > 0 && n+1+len(word) > width {
			b.WriteString("\n")
			n = 0
		}
		if n > 0 {
			b.WriteString(" ")
			n++
		}
		b.WriteString(word)
		n += len(word)
	}
	b.WriteString("\n")
	return b.String()
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
