// Command shadow rolls a client out from grpc-go's round_robin to
// pickwise_p2c with pickwise_shadow, one service-config push at a time,
// on one channel:
//
//  1. shadow: round_robin places every call, and pickwise_p2c is asked
//     where it would have sent each one (recorded, never sent);
//  2. canary: pickwise_p2c places 10% of the calls for real, each arm's
//     outcomes recorded apart;
//  3. rollback: canaryPercent back to 0, which keeps both policies and
//     what they recorded;
//  4. switch: pickwise_p2c alone, whose shares the shadow predicted.
//
// It starts six gRPC servers on 127.0.0.1, four of a new generation (5 ms
// a call) and two of an old one (15 ms), and sends each step's calls from
// concurrent callers. round_robin gives the old generation a third of the
// calls; pickwise_p2c, which compares calls in flight, gives it less, and
// the shadow says how much less before the switch.
//
// A channel takes each step's config from its resolver: a control plane
// (xDS: each step is a cluster update), or, as here, a resolver that
// returns a service config with the endpoints (grpc's manual resolver
// stands in for one; a channel's WithDefaultServiceConfig cannot change
// once the channel is built). The shadow itself is a blank import, with
// one of each child policy that is not grpc's own, and a config:
//
//	import (
//		_ "github.com/pickwise/pickwise/balancer/p2c"
//		_ "github.com/pickwise/pickwise/balancer/shadow"
//	)
//
//	{"loadBalancingConfig": [{"pickwise_shadow": {
//	    "live": [{"round_robin": {}}], "candidate": [{"pickwise_p2c": {}}],
//	    "sampleRate": 1, "canaryPercent": 0}}]}
//
// Run it from the module root; it takes a few seconds:
//
//	go run ./examples/shadow
//	go run ./examples/shadow -rpcs 6000 -concurrency 32
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"math"
	"os"
	"text/tabwriter"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"

	"github.com/pickwise/pickwise/internal/fleet"

	// Register pickwise_shadow and the candidate it names; round_robin is
	// grpc's own.
	_ "github.com/pickwise/pickwise/balancer/p2c"
	"github.com/pickwise/pickwise/balancer/shadow"
)

// shadowConfig is a step of the rollout: round_robin live, pickwise_p2c
// the candidate, asked on sampleRate of the picks and placing
// canaryPercent of the calls.
func shadowConfig(sampleRate, canaryPercent float64) string {
	return fmt.Sprintf(`{"loadBalancingConfig": [{"pickwise_shadow": {
		"live": [{"round_robin": {}}],
		"candidate": [{"pickwise_p2c": {}}],
		"sampleRate": %v, "canaryPercent": %v}}]}`, sampleRate, canaryPercent)
}

// switchedConfig is the last step: the candidate alone.
const switchedConfig = `{"loadBalancingConfig": [{"pickwise_p2c": {}}]}`

// The fleet: backend-i answers in latencies[i].
var latencies = []time.Duration{
	5 * time.Millisecond, 5 * time.Millisecond, 5 * time.Millisecond, 5 * time.Millisecond,
	15 * time.Millisecond, 15 * time.Millisecond, // the old generation
}

func main() {
	rpcs := flag.Int("rpcs", 3000, "calls per step")
	concurrency := flag.Int("concurrency", 16, "concurrent callers")
	flag.Parse()
	if err := run(*rpcs, *concurrency); err != nil {
		log.Fatal(err)
	}
}

func run(rpcs, concurrency int) error {
	f, err := fleet.Start(len(latencies))
	if err != nil {
		return err
	}
	defer f.Close()
	for i, b := range f.Backends {
		b.SetBehavior(fleet.Behavior{Latency: latencies[i]})
	}
	endpoints := make([]resolver.Endpoint, len(f.Backends))
	for i, addr := range f.Addrs() {
		endpoints[i] = resolver.Endpoint{Addresses: []resolver.Address{{Addr: addr}}}
	}

	// The resolver hands the channel its endpoints and each step's config.
	r := manual.NewBuilderWithScheme("rollout")
	r.InitialState(resolver.State{Endpoints: endpoints})
	// The first step's config is the channel's default, until the
	// resolver returns one.
	conn, err := grpc.NewClient("rollout:///backends",
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithResolvers(r),
		grpc.WithDefaultServiceConfig(shadowConfig(1, 0)))
	if err != nil {
		return err
	}
	defer conn.Close()
	push := func(config string) error {
		sc := r.CC().ParseServiceConfig(config)
		if sc.Err != nil {
			return sc.Err
		}
		// The balancer has the new config when UpdateState returns.
		r.UpdateState(resolver.State{Endpoints: endpoints, ServiceConfig: sc})
		return nil
	}
	conn.Connect() // as its first call would: the resolver starts
	client := &fleet.Client{Conn: conn, Resolver: r}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	load := func() fleet.LoadResult { return client.Load(ctx, rpcs, concurrency, 10*time.Second) }
	summary := func() (shadow.Summary, error) {
		for _, s := range shadow.Summaries() {
			if s.Target == conn.CanonicalTarget() {
				return s, nil
			}
		}
		return shadow.Summary{}, fmt.Errorf("no pickwise_shadow summary for %s", conn.CanonicalTarget())
	}

	// Step 1: shadow. Shares, not agreement, say what a switch changes
	// for a load-aware candidate: two policies that each rotate through
	// the backends agree by their phase, whatever their quality.
	load() // both policies connect and warm up
	start, err := summary()
	if err != nil {
		return err
	}
	placed := load()
	end, err := summary()
	if err != nil {
		return err
	}
	shadowed := end.Since(start)
	fmt.Printf("Step 1, shadow: round_robin places every call; pickwise_p2c is asked on every pick (%d compared, %.1f%% agreed)\n\n",
		shadowed.Compared, 100*shadowed.Agreement())

	// Step 2: canary.
	if err := push(shadowConfig(0.1, 10)); err != nil {
		return err
	}
	before, err := summary()
	if err != nil {
		return err
	}
	load()
	after, err := summary()
	if err != nil {
		return err
	}
	canary := after.Since(before)
	fmt.Printf("Step 2, canary: pickwise_p2c places %.1f%% of the calls\n", 100*float64(canary.CanaryArm.Calls)/float64(rpcs))
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "arm\tcalls\terrors\tmean latency\t")
	for _, arm := range []struct {
		name string
		a    shadow.ArmStats
	}{{"live (recorded)", canary.LiveArm}, {"canary", canary.CanaryArm}} {
		fmt.Fprintf(w, "%s\t%d\t%.1f%%\t%.1f ms\t\n", arm.name, arm.a.Calls, 100*arm.a.ErrorRate(), float64(arm.a.MeanLatency().Microseconds())/1000)
	}
	w.Flush()

	// Step 3: rollback. Only the rates change: both children stay, with
	// what they recorded.
	if err := push(shadowConfig(1, 0)); err != nil {
		return err
	}
	kept, err := summary()
	if err != nil {
		return err
	}
	fmt.Printf("\nStep 3, rollback (canaryPercent 0): the shadow keeps both policies and its counts: %d picks compared so far, %d canary calls\n\n",
		kept.Compared, kept.CanaryArm.Calls)

	// Step 4: switch.
	if err := push(switchedConfig); err != nil {
		return err
	}
	load() // the switch's first calls, while p2c's picture of the load forms
	switched := load()
	fmt.Println("Step 4, switch: pickwise_p2c alone. Each backend's share of the calls:")
	w = tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "backend\tlatency\tround_robin (step 1)\tpredicted for pickwise_p2c (step 1)\tpickwise_p2c (step 4)\t")
	var worst float64 // the largest difference between predicted and switched shares
	for i, b := range f.Backends {
		var predicted float64
		for _, e := range shadowed.Endpoints {
			if e.Addr == b.Addr() {
				_, predicted = e.Shares(shadowed)
			}
		}
		got := share(switched, b.Name())
		worst = max(worst, math.Abs(100*predicted-got))
		fmt.Fprintf(w, "%s\t%v\t%.1f%%\t%.1f%%\t%.1f%%\t\n", b.Name(), latencies[i],
			share(placed, b.Name()), 100*predicted, got)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	// CI runs this example: it fails when the shadow stops showing what
	// it says it shows.
	switch canaryShare := float64(canary.CanaryArm.Calls) / float64(rpcs); {
	case shadowed.Compared != int64(rpcs):
		return fmt.Errorf("step 1 compared %d picks of %d", shadowed.Compared, rpcs)
	case canaryShare < 0.05 || canaryShare > 0.15:
		return fmt.Errorf("step 2's canary placed %.1f%% of the calls, want about 10%%", 100*canaryShare)
	case kept.CanaryArm.Calls != after.CanaryArm.Calls || kept.Compared < after.Compared:
		return fmt.Errorf("the rollback lost the shadow's counts")
	case worst > tolerance(rpcs):
		return fmt.Errorf("a backend's predicted share is %.1f points off its share after the switch, over %.1f", worst, tolerance(rpcs))
	}
	return nil
}

// tolerance is how many points a backend's predicted share may be off
// the share it gets after the switch: a point for the prediction, and
// four standard deviations of the difference between two samples of rpcs
// calls at a share of a fifth.
func tolerance(rpcs int) float64 {
	return 1 + 4*100*math.Sqrt(2*0.2*0.8/float64(rpcs))
}

// share is backend's share of res's calls, in percent.
func share(res fleet.LoadResult, backend string) float64 {
	return 100 * float64(res.PerBackend[backend]) / float64(max(res.Total, 1))
}
