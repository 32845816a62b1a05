// Command subset shows what pickwise_subset does for a fleet of gRPC
// clients, side by side with a full mesh and grpc-go's
// random_subsetting_experimental.
//
// It starts twelve gRPC servers on 127.0.0.1 and thirty clients, each a
// channel of its own, as thirty replicas of a service would be. Under a
// full mesh every backend holds a connection from every client. With
// subsets of four, each client connects to four backends only:
//
//   - random_subsetting_experimental (gRFC A68) draws each client's four at
//     random, so some backends get many more clients, and calls, than
//     others;
//   - pickwise_subset, given each client's index among the thirty, deals
//     the subsets so that every backend has the same number of clients
//     (balanced, the default), or moves no more clients than it must when
//     a backend leaves (stable).
//
// Then one backend leaves, and the table counts the connections the
// clients open to the others to replace it.
//
// Using the policy takes a blank import that registers it (and its child
// policy's), and a service config per client with the client's index:
//
//	import (
//		_ "github.com/pickwise/pickwise/balancer/p2c" // the default child
//		"github.com/pickwise/pickwise/balancer/subset"
//	)
//
//	index, err := subset.IndexFromHostname(hostname) // "api-7" -> 7
//	grpc.WithDefaultServiceConfig(fmt.Sprintf(`{"loadBalancingConfig": [{"pickwise_subset":
//		{"subsetSize": 4, "clientIndex": %d, "clientCount": 30}}]}`, index))
//
// Run it from the module root; it takes a few seconds:
//
//	go run ./examples/subset
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"slices"
	"sync"
	"text/tabwriter"
	"time"

	_ "google.golang.org/grpc/balancer/randomsubsetting" // registers random_subsetting_experimental

	"github.com/pickwise/pickwise/internal/fleet"

	_ "github.com/pickwise/pickwise/balancer/p2c"
	_ "github.com/pickwise/pickwise/balancer/subset"
)

const (
	backends   = 12
	clients    = 30
	subsetSize = 4
)

// arrangement is one column: the service config of client i, and whether
// every client connects to every backend.
type arrangement struct {
	name   string
	config func(i int) string
	mesh   bool
}

var arrangements = []arrangement{
	{"full mesh (pickwise_p2c)", func(int) string {
		return `{"loadBalancingConfig": [{"pickwise_p2c": {}}]}`
	}, true},
	{"random_subsetting_experimental", func(int) string {
		return fmt.Sprintf(`{"loadBalancingConfig": [{"random_subsetting_experimental": {"subsetSize": %d, "childPolicy": [{"round_robin": {}}]}}]}`, subsetSize)
	}, false},
	{"pickwise_subset (balanced)", func(i int) string {
		return fmt.Sprintf(`{"loadBalancingConfig": [{"pickwise_subset": {"subsetSize": %d, "clientIndex": %d, "clientCount": %d}}]}`, subsetSize, i, clients)
	}, false},
	{"pickwise_subset (stable)", func(i int) string {
		return fmt.Sprintf(`{"loadBalancingConfig": [{"pickwise_subset": {"subsetSize": %d, "clientIndex": %d, "clientCount": %d, "mode": "stable"}}]}`, subsetSize, i, clients)
	}, false},
}

func main() {
	calls := flag.Int("calls", 100, "calls per client")
	flag.Parse()
	if err := run(*calls); err != nil {
		log.Fatal(err)
	}
}

// result is what one arrangement did.
type result struct {
	minConns, maxConns int64   // connections a backend holds from the clients
	callSpread         float64 // the busiest backend's calls over the mean
	leaving            int64   // the clients of the backend that leaves
	replaced           int64   // connections opened to the others when it left
}

func run(calls int) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var results []result
	for _, a := range arrangements {
		r, err := measure(ctx, a, calls)
		if err != nil {
			return fmt.Errorf("%s: %v", a.name, err)
		}
		results = append(results, r)
	}
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(w, "%d clients, %d backends\t", clients, backends)
	for _, a := range arrangements {
		fmt.Fprintf(w, "%s\t", a.name)
	}
	fmt.Fprintln(w)
	row := func(label string, cell func(result) string) {
		fmt.Fprintf(w, "%s\t", label)
		for _, r := range results {
			fmt.Fprintf(w, "%s\t", cell(r))
		}
		fmt.Fprintln(w)
	}
	row("connections per backend, fewest-most", func(r result) string { return fmt.Sprintf("%d-%d", r.minConns, r.maxConns) })
	row("busiest backend's calls / mean", func(r result) string { return fmt.Sprintf("%.2fx", r.callSpread) })
	row("one backend leaves: its clients", func(r result) string { return fmt.Sprint(r.leaving) })
	row("  connections opened to the others", func(r result) string { return fmt.Sprint(r.replaced) })
	if err := w.Flush(); err != nil {
		return err
	}
	fmt.Printf("\nWith subsets of %d, a backend averages %d clients. When one leaves, each of its clients needs a new backend: that many new connections is the least a change can open (the full mesh has them all already). Balanced subsets keep every backend within one client of the others and pay for it with a few more moves; stable ones move the least and balance only on average, as random ones do.\n",
		subsetSize, clients*subsetSize/backends)
	return check(results)
}

// measure starts a fleet, connects the clients under a, sends each
// client's calls, and removes the last backend.
func measure(ctx context.Context, a arrangement, calls int) (result, error) {
	f, err := fleet.Start(backends)
	if err != nil {
		return result{}, err
	}
	defer f.Close()
	addrs := f.Addrs()
	conns := make([]*fleet.Client, clients)
	for i := range conns {
		c, err := fleet.Dial(addrs, a.config(i))
		if err != nil {
			return result{}, err
		}
		defer c.Close()
		conns[i] = c
	}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for _, c := range conns {
		wg.Go(func() {
			if res := c.Load(ctx, calls, 1, 10*time.Second); res.Failed > 0 {
				mu.Lock()
				errs = append(errs, fmt.Errorf("%d of %d calls failed", res.Failed, res.Total))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		return result{}, errs[0]
	}
	settle(f)
	var r result
	accepted := make([]int64, backends)
	served := make([]int64, backends)
	for i, b := range f.Backends {
		accepted[i], served[i] = b.Accepted(), b.Served()
	}
	r.minConns, r.maxConns = slices.Min(accepted), slices.Max(accepted)
	r.leaving = accepted[backends-1]
	var total int64
	for _, n := range served {
		total += n
	}
	r.callSpread = float64(slices.Max(served)) / (float64(total) / backends)

	// The last backend leaves every client's list; each client then sends
	// a few calls, over whatever connections its policy opened.
	for _, c := range conns {
		c.SetAddrs(addrs[:backends-1])
	}
	for _, c := range conns {
		wg.Go(func() { c.Load(ctx, 10, 1, 10*time.Second) })
	}
	wg.Wait()
	replaced := func() int64 {
		var n int64
		for i, b := range f.Backends[:backends-1] {
			n += b.Accepted() - accepted[i]
		}
		return n
	}
	// Every client of the leaving backend connects to another (in a
	// subset: the mesh has them all): wait for as many new connections,
	// then for any more a policy opens.
	for deadline := time.Now().Add(10 * time.Second); !a.mesh && replaced() < r.leaving && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	settle(f)
	r.replaced = replaced()
	return r, nil
}

// settle waits until the backends have accepted no connection for a
// while (at most a few seconds): channels connect in the background.
func settle(f *fleet.Fleet) {
	total := func() int64 {
		var n int64
		for _, b := range f.Backends {
			n += b.Accepted()
		}
		return n
	}
	last, still := total(), 0
	for tries := 0; still < 4 && tries < 100; tries++ {
		time.Sleep(50 * time.Millisecond)
		if n := total(); n != last {
			last, still = n, 0
		} else {
			still++
		}
	}
}

// check fails the run, which CI makes, if pickwise_subset stops showing
// what this example says it shows.
func check(results []result) error {
	random, balanced, stable := results[1], results[2], results[3]
	switch {
	case balanced.maxConns-balanced.minConns > 1:
		return fmt.Errorf("balanced subsets: %d to %d connections per backend, want the same number within one", balanced.minConns, balanced.maxConns)
	case balanced.maxConns >= random.maxConns:
		return fmt.Errorf("balanced subsets: the busiest backend holds %d connections, random subsets' %d", balanced.maxConns, random.maxConns)
	case stable.replaced != stable.leaving:
		return fmt.Errorf("stable subsets opened %d connections when a backend of %d clients left, want one for each", stable.replaced, stable.leaving)
	}
	return nil
}
