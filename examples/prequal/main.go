// Command prequal shows what pickwise_prequal does for a fleet of gRPC
// clients that share backends with noisy neighbours, side by side with
// round_robin, pickwise_p2c and pickwise_peak_ewma.
//
// It starts eight gRPC servers on 127.0.0.1, each with four workers that
// take 20 ms a call, and each running the serverload package's
// interceptors and probe service, which report the server's requests in
// flight and expected latency. Sixteen clients, each a channel of its own
// as sixteen replicas of a calling service would be, send calls at random
// times, 65% of what the healthy fleet serves, with a 1 s deadline. While
// they do, a neighbour takes three servers' machines in turn: each is 3-4x
// slower for a while, then recovers. Every policy meets the same arrivals
// and the same slowdowns, on a fleet of its own.
//
// Each client sees a sixteenth of the traffic: its own calls in flight to
// a slowed server are zero or one most of the time (pickwise_p2c), and its
// latency samples of it are few (pickwise_peak_ewma), so both see a
// slowdown late and a recovery later. The servers know their own queues:
// pickwise_prequal asks a few of them now and then (load probes, on the
// connections the calls use) and reads the same figures in every
// response's trailer, so each client places its calls by the whole
// fleet's load, and the table counts the probes it cost the servers.
//
// Using the policy takes a blank import and a service config on the
// client, and serverload on every server:
//
//	import _ "github.com/pickwise/pickwise/balancer/prequal"
//
//	grpc.WithDefaultServiceConfig(`{"loadBalancingConfig": [{"pickwise_prequal": {}}]}`)
//
//	load := serverload.New()
//	srv := grpc.NewServer(
//		grpc.ChainUnaryInterceptor(load.UnaryInterceptor()),
//		grpc.ChainStreamInterceptor(load.StreamInterceptor()))
//	load.Register(srv)
//
// Run it from the module root; it takes about 15 seconds and prints each
// policy's progress as it goes:
//
//	go run ./examples/prequal
//	go run ./examples/prequal -clients 32 -duration 5s
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"math"
	"math/rand/v2"
	"net"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/pickwise/pickwise/examples/internal/compare"
	"github.com/pickwise/pickwise/serverload"

	// Register the policies this example selects by name.
	_ "github.com/pickwise/pickwise/balancer/p2c"
	_ "github.com/pickwise/pickwise/balancer/peakewma"
	_ "github.com/pickwise/pickwise/balancer/prequal"
)

// policies are compared in this order, which is also the column order.
// Every field of pickwise_prequal's config is optional: {} is a pool of
// 16 answers, each used for one call and for at most 1 s.
var policies = []struct{ name, serviceConfig string }{
	{"round_robin", `{"loadBalancingConfig": [{"round_robin": {}}]}`},
	{"pickwise_p2c", `{"loadBalancingConfig": [{"pickwise_p2c": {}}]}`},
	{"pickwise_peak_ewma", `{"loadBalancingConfig": [{"pickwise_peak_ewma": {}}]}`},
	{"pickwise_prequal", `{"loadBalancingConfig": [{"pickwise_prequal": {}}]}`},
}

// The fleet: backends servers of workers workers, each call holding one
// for service (times the slowdown in force); later calls wait in line, as
// in a server with a fixed pool of threads.
const (
	backends = 8
	workers  = 4
	service  = 20 * time.Millisecond
	// load is the offered rate over what the healthy fleet serves: 1,040
	// calls a second. With two servers slowed 3-4x, 79%.
	load     = 0.65
	deadline = time.Second
	// warmUp is sent before each measured run, with every server healthy,
	// so that connections are up and the servers have latency figures.
	warmUp = 500 * time.Millisecond
)

// slowdown is a noisy neighbour: backend's calls take factor times longer
// from from to to, fractions of the measured run.
type slowdown struct {
	backend  int
	from, to float64
	factor   float64
}

// slowdowns overlap two at a time at most, so that the fleet can always
// serve the load if placement follows the speeds.
var slowdowns = []slowdown{
	{backend: 1, from: 0.07, to: 0.53, factor: 4},
	{backend: 4, from: 0.30, to: 0.80, factor: 3},
	{backend: 6, from: 0.60, to: 1.00, factor: 4},
}

// probeMethod is serverload's probe RPC; the servers count its calls.
const probeMethod = "/pickwise.serverload.v1.LoadProbe/Probe"

func main() {
	clients := flag.Int("clients", 16, "client channels, each its own balancer, sharing the traffic")
	duration := flag.Duration("duration", 3*time.Second, "measured traffic per policy")
	flag.Parse()
	if *clients < 1 || *duration < 100*time.Millisecond {
		log.Fatal("prequal: -clients must be at least 1 and -duration at least 100ms")
	}
	if err := run(*clients, *duration); err != nil {
		log.Fatalf("prequal: %v", err)
	}
}

// outcome is what one policy did with the measured calls.
type outcome struct {
	latencies []time.Duration // of the calls that succeeded, sorted
	sent      int             // calls sent in the measured run
	failed    int
	arrived   int64 // calls that reached a server in the measured run
	onSlowed  int64 // those that reached a server while it was slowed
	probes    int64 // load probes the servers answered meanwhile
}

func run(clients int, duration time.Duration) error {
	rate := load * backends * workers / service.Seconds()
	fmt.Fprintf(os.Stderr, "%d backends on 127.0.0.1 (serverload), %d clients, %.0f calls a second; %v of warm-up and %v measured per policy ...\n",
		backends, clients, rate, warmUp, duration)
	var outs []outcome
	for _, p := range policies {
		began := time.Now()
		fmt.Fprintf(os.Stderr, "%-20s", p.name)
		o, err := measure(p.serviceConfig, clients, rate, duration)
		if err != nil {
			return fmt.Errorf("%s: %v", p.name, err)
		}
		fmt.Fprintf(os.Stderr, " %d calls, done in %v\n", o.sent, time.Since(began).Round(100*time.Millisecond))
		outs = append(outs, o)
	}
	fmt.Fprintln(os.Stderr)

	var slowedTime float64
	for _, s := range slowdowns {
		slowedTime += s.to - s.from
	}
	fmt.Print(compare.Wrap(fmt.Sprintf("%d backends on 127.0.0.1, %d workers each at %v a call; %d clients, each its own balancer, sending %.0f calls a second in all (%.0f%% of the healthy fleet's capacity) for %v per policy, with a %v deadline.",
		backends, workers, service, clients, rate, 100*load, duration, deadline), 78))
	fmt.Println()
	// Labels to the left, figures to the right under their policy.
	fmt.Printf("%-40s", "")
	for _, p := range policies {
		fmt.Printf("  %s", p.name)
	}
	fmt.Println()
	row := func(label string, cell func(outcome) string) {
		fmt.Printf("%-40s", label)
		for i, o := range outs {
			fmt.Printf("  %*s", len(policies[i].name), cell(o))
		}
		fmt.Println()
	}
	row("p50 latency (successful calls)", func(o outcome) string { return ms(quantile(o.latencies, 0.50)) })
	row("p99 latency (successful calls)", func(o outcome) string { return ms(quantile(o.latencies, 0.99)) })
	row(fmt.Sprintf("failed (%v deadline)", deadline), func(o outcome) string { return pct(float64(o.failed) / float64(o.sent)) })
	row(fmt.Sprintf("calls on a slowed server (even: %.1f%%)", 100*slowedTime/backends), func(o outcome) string {
		return pct(float64(o.onSlowed) / float64(o.arrived))
	})
	row("load probes per call, at the servers", func(o outcome) string { return fmt.Sprintf("%.2f", float64(o.probes)/float64(o.arrived)) })
	fmt.Println()
	fmt.Print(compare.Wrap("Slowed: backend-1 4x, backend-4 3x, backend-6 4x, each for 40-50% of the run, at most two at once; \"even\" is the share a placement blind to speed sends them. Probes are pickwise_prequal's questions to the servers, counted by the servers. Figures move from run to run.", 78))
	return check(outs)
}

// check fails the run unless pickwise_prequal read the servers' load: it
// probed them and sent fewer calls than round_robin to slowed servers.
// The bounds are loose, because CI may run this on a busy machine.
func check(outs []outcome) error {
	rr, pq := outs[0], outs[len(outs)-1]
	if pq.probes == 0 {
		return fmt.Errorf("pickwise_prequal sent no load probe")
	}
	if share := func(o outcome) float64 { return float64(o.onSlowed) / float64(o.arrived) }; share(pq) >= share(rr) {
		return fmt.Errorf("pickwise_prequal put %.1f%% of its calls on slowed servers, round_robin %.1f%%", 100*share(pq), 100*share(rr))
	}
	return nil
}

// measure starts a fleet, connects clients channels under serviceConfig,
// warms them up, then sends the measured calls while the neighbours come
// and go.
func measure(serviceConfig string, clients int, rate float64, duration time.Duration) (outcome, error) {
	f, err := startFleet()
	if err != nil {
		return outcome{}, err
	}
	defer f.stop()
	conns := make([]*grpc.ClientConn, clients)
	for i := range conns {
		if conns[i], err = dial(f.addrs, serviceConfig); err != nil {
			return outcome{}, err
		}
		defer conns[i].Close()
		conns[i].Connect()
	}

	send(conns, rate, warmUp, 0, nil)
	f.counting.Store(true)
	stopNeighbours := f.neighbours(duration)
	var o outcome
	var mu sync.Mutex
	send(conns, rate, duration, 1, func(took time.Duration, err error) {
		mu.Lock()
		defer mu.Unlock()
		o.sent++
		if err != nil {
			o.failed++
			return
		}
		o.latencies = append(o.latencies, took)
	})
	f.counting.Store(false)
	stopNeighbours()
	slices.Sort(o.latencies)
	for _, b := range f.backends {
		o.arrived += b.arrived.Load()
		o.onSlowed += b.onSlowed.Load()
		o.probes += b.probes.Load()
	}
	return o, nil
}

// send makes calls through conns at random (Poisson) times, rate a second
// in all, for d, and waits for them; done, if set, gets each one's
// outcome. The arrivals depend on phase and the client alone, so every
// policy meets the same ones.
func send(conns []*grpc.ClientConn, rate float64, d time.Duration, phase uint64, done func(time.Duration, error)) {
	var wg sync.WaitGroup
	start := time.Now()
	for i, conn := range conns {
		r := rand.New(rand.NewPCG(phase, uint64(i)))
		gap := float64(time.Second) * float64(len(conns)) / rate
		wg.Go(func() {
			// The next arrival is a time since start, not a sleep after the
			// last one, so that timer delays do not lower the rate.
			for at := time.Duration(r.ExpFloat64() * gap); at < d; at += time.Duration(r.ExpFloat64() * gap) {
				time.Sleep(time.Until(start.Add(at)))
				wg.Go(func() {
					ctx, cancel := context.WithTimeout(context.Background(), deadline)
					defer cancel()
					t0 := time.Now()
					err := conn.Invoke(ctx, workMethod, &emptypb.Empty{}, new(emptypb.Empty))
					if done != nil {
						done(time.Since(t0), err)
					}
				})
			}
		})
	}
	wg.Wait()
}

// dial opens a channel to addrs under serviceConfig. The manual resolver
// stands in for DNS or xDS, which would list a real service's backends.
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

// fleet is the running servers.
type fleet struct {
	backends []*backend
	addrs    []string
	// counting is set during the measured run: the servers count arrivals
	// and probes only then.
	counting atomic.Bool
}

// backend is one server: its workers, the slowdown in force, and what it
// counted.
type backend struct {
	fleet   *fleet
	srv     *grpc.Server
	workers chan struct{}
	slow    atomic.Uint64 // math.Float64bits of the slowdown factor; 0 when healthy

	arrived, onSlowed, probes atomic.Int64
}

func startFleet() (*fleet, error) {
	f := &fleet{}
	for range backends {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			f.stop()
			return nil, err
		}
		b := &backend{fleet: f, workers: make(chan struct{}, workers)}
		// What a server of pickwise_prequal's clients runs: serverload's
		// interceptors and its probe service. The counting interceptor
		// goes first, so that it sees the probes, which serverload does
		// not count as work.
		load := serverload.New()
		b.srv = grpc.NewServer(
			grpc.ChainUnaryInterceptor(b.count, load.UnaryInterceptor()),
			grpc.ChainStreamInterceptor(load.StreamInterceptor()),
		)
		load.Register(b.srv)
		b.srv.RegisterService(&workService, b)
		go b.srv.Serve(lis)
		f.backends = append(f.backends, b)
		f.addrs = append(f.addrs, lis.Addr().String())
	}
	return f, nil
}

func (f *fleet) stop() {
	for _, b := range f.backends {
		b.srv.Stop()
	}
}

// neighbours slows the backends as slowdowns says over a run of d from
// now, and returns a function that ends them all.
func (f *fleet) neighbours(d time.Duration) (stop func()) {
	var timers []*time.Timer
	at := func(frac float64, fn func()) {
		timers = append(timers, time.AfterFunc(time.Duration(frac*float64(d)), fn))
	}
	for _, s := range slowdowns {
		b := f.backends[s.backend]
		at(s.from, func() { b.slow.Store(math.Float64bits(s.factor)) })
		at(s.to, func() { b.slow.Store(0) })
	}
	return func() {
		for _, t := range timers {
			t.Stop()
		}
		for _, b := range f.backends {
			b.slow.Store(0)
		}
	}
}

// count is the servers' own bookkeeping for the table, not part of what
// a server needs.
func (b *backend) count(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if b.fleet.counting.Load() {
		switch info.FullMethod {
		case probeMethod:
			b.probes.Add(1)
		case workMethod:
			b.arrived.Add(1)
			if b.slow.Load() != 0 {
				b.onSlowed.Add(1)
			}
		}
	}
	return handler(ctx, req)
}

// work waits for a free worker, then holds it for the service time, times
// the slowdown in force when it starts.
func (b *backend) work(ctx context.Context) error {
	select {
	case b.workers <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-b.workers }()
	d := service
	if f := math.Float64frombits(b.slow.Load()); f > 1 {
		d = time.Duration(f * float64(service))
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// The servers' service, written out by hand so that the example needs no
// generated code: one unary method taking and returning Empty.
const workMethod = "/example.Work/Do"

var workService = grpc.ServiceDesc{
	ServiceName: "example.Work",
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{{
		MethodName: "Do",
		Handler: func(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
			in := new(emptypb.Empty)
			if err := dec(in); err != nil {
				return nil, err
			}
			handle := func(ctx context.Context, _ any) (any, error) {
				if err := srv.(*backend).work(ctx); err != nil {
					return nil, err
				}
				return new(emptypb.Empty), nil
			}
			if interceptor == nil {
				return handle(ctx, in)
			}
			return interceptor(ctx, in, &grpc.UnaryServerInfo{Server: srv, FullMethod: workMethod}, handle)
		},
	}},
}

// quantile is the q-quantile of sorted, nearest rank; 0 when empty.
func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(math.Ceil(q*float64(len(sorted))))-1)]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/1e6) }

func pct(x float64) string { return fmt.Sprintf("%.1f%%", 100*x) }
