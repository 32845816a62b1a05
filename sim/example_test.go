package sim_test

import (
	"fmt"
	"time"

	"github.com/pickwise/pickwise/sim"
)

// The scenarios, in the order go run ./interop/lab -sim prints them.
func Example() {
	for _, s := range sim.Scenarios() {
		fmt.Println(s.Name)
	}
	// Output:
	// balls-into-bins
	// black-hole
	// transient-failure
	// one-stall
	// flapping-backend
	// retry-storm
	// cold-start
	// cold-join-unary
	// warm-rejoin
	// hardware-generations
	// slow-backend
	// noisy-reports
	// noisy-neighbours
	// hot-key
	// hash-black-hole
	// remap-storm
	// flapping-cache
	// subsetting
	// rollout
	// hardware-generations-subsetting
}

// One scenario at the reduced scale CI runs, printed as the lab prints it:
// a column per policy, a row per measure, and notes on what a column's
// figures mean.
func ExampleLookup() {
	s, err := sim.Lookup("remap-storm")
	if err != nil {
		fmt.Println(err)
		return
	}
	table, err := s.Run(sim.Reduced)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Print(table)
}

// A simulation of one's own: four backends, one of which fails every
// request in a millisecond, and pickwise_p2c against random placement.
// Runs are in virtual time and seeded, so they repeat exactly; a thousand
// requests take milliseconds.
func ExampleRun_Execute() {
	healthy := sim.Backend{Servers: 4, Service: sim.LogNormal(20*time.Millisecond, 0.3)}
	broken := healthy
	broken.FailRate, broken.FailAfter = 1, time.Millisecond
	run := sim.Run{
		Seed:     1,
		Backends: []sim.Backend{broken, healthy, healthy, healthy},
		Rate:     200,
		Requests: 2000,
	}
	for _, p := range []sim.Policy{sim.Random(), sim.GRPC("pickwise_p2c", "pickwise_p2c", `{}`)} {
		r, err := run.Execute(p)
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("%s: %d requests, %.0f%% on the broken backend, %.0f%% failed\n", r.Policy, r.Total, 100*r.Share(0), 100*r.ErrorRate())
	}
	// Output:
	// random: 2000 requests, 25% on the broken backend, 25% failed
	// pickwise_p2c: 2000 requests, 1% on the broken backend, 1% failed
}

// Noisy neighbours for a scenario of one's own: twelve backends, each
// slowed 2-4x now and then, never more than four at once.
func ExampleNeighbours() {
	nb := sim.Neighbours{Min: 2 * time.Second, Max: 8 * time.Second, MinFactor: 2, MaxFactor: 4, Gap: 10 * time.Second, MaxSlowed: 4, Seed: 1}
	backends := make([]sim.Backend, 12)
	for i, slow := range nb.Slowdowns(len(backends), time.Minute) {
		backends[i] = sim.Backend{Servers: 10, Service: sim.LogNormal(10*time.Millisecond, 0.5), Slow: slow}
	}
	most := 0
	for t := time.Duration(0); t < time.Minute; t += 100 * time.Millisecond {
		n := 0
		for _, b := range backends {
			if sim.Slowed(b.Slow, t) {
				n++
			}
		}
		most = max(most, n)
	}
	fmt.Println("most slowed at once:", most <= 4)
	// Output: most slowed at once: true
}
