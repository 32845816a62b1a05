// Command ringhash shows what pickwise_ring_hash does for a gRPC client in
// front of a cache tier, side by side with grpc-go's
// ring_hash_experimental.
//
// It starts eleven gRPC servers on 127.0.0.1 and gives both channels the
// first ten. Each user's calls carry the user's ID as their key, so every
// call of a user goes to the same backend, whose cache holds that user.
// Then the tier changes twice:
//
//   - scale-out: the eleventh backend joins. Ideally it takes an
//     eleventh of the users and nobody else moves. ring_hash_experimental
//     shares a ring of about minRingSize entries (1024 by default) among
//     the endpoints, so each endpoint's entries depend on how many there
//     are: a newcomer takes entries from every old endpoint, and users
//     move between old endpoints too. pickwise_ring_hash gives each
//     endpoint entries of its own, whatever the count (below its memory
//     budget), so only the newcomer's users move.
//   - a flapping node: backend-3 drops out of the endpoint list for a
//     moment, three times. ring_hash_experimental moves its users away and
//     back each time, and every move is a cold cache; pickwise_ring_hash
//     gives a returning backend its users back only once it has stayed
//     present for rejoinHold (30 s by default), so its users move once.
//
// Using the policy takes a blank import that registers it (here, the
// import of the package whose WithKey sets the key), a service config
// that selects it, and a key per call:
//
//	import "github.com/pickwise/pickwise/balancer/ringhash"
//
//	grpc.WithDefaultServiceConfig(`{"loadBalancingConfig": [{"pickwise_ring_hash": {}}]}`)
//	ctx = ringhash.WithKey(ctx, userID)
//
// ring_hash_experimental takes its key from a request header instead
// (requestHashHeader), which pickwise_ring_hash also reads.
//
// Run it from the module root; it takes a few seconds:
//
//	go run ./examples/ringhash
//	go run ./examples/ringhash -users 2000
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"strconv"
	"sync"
	"text/tabwriter"
	"time"

	_ "google.golang.org/grpc/balancer/ringhash" // registers ring_hash_experimental
	"google.golang.org/grpc/metadata"

	"github.com/pickwise/pickwise/balancer/ringhash"
	"github.com/pickwise/pickwise/internal/fleet"
)

// userHeader carries the key for ring_hash_experimental.
const userHeader = "x-user-id"

// policy is one column: its service config, and how a call states its key.
type policy struct {
	name, serviceConfig string
	withKey             func(ctx context.Context, user string) context.Context
}

var policies = []policy{
	{
		name:          "ring_hash_experimental",
		serviceConfig: `{"loadBalancingConfig": [{"ring_hash_experimental": {"requestHashHeader": "` + userHeader + `"}}]}`,
		withKey: func(ctx context.Context, user string) context.Context {
			return metadata.AppendToOutgoingContext(ctx, userHeader, user)
		},
	},
	{
		name:          "pickwise_ring_hash",
		serviceConfig: `{"loadBalancingConfig": [{"pickwise_ring_hash": {}}]}`,
		withKey:       ringhash.WithKey,
	},
}

const (
	tier     = 10 // backends at the start; one more joins
	flapping = 3  // the backend that drops out and comes back
	flaps    = 3
)

func main() {
	users := flag.Int("users", 500, "users, each a key")
	flag.Parse()
	if err := run(*users); err != nil {
		log.Fatal(err)
	}
}

// result is what one policy did.
type result struct {
	sticky         float64 // share of users whose two calls met one backend
	moved, toNew   float64 // scale-out: share of users moved, and of them to the newcomer
	flapMoves      int     // user moves over the flaps, a user moved twice counting twice
	flapMovedUsers int     // users that moved at all over the flaps
}

func run(users int) error {
	f, err := fleet.Start(tier + 1)
	if err != nil {
		return err
	}
	defer f.Close()
	ids := make([]string, users)
	for i := range ids {
		ids[i] = "user-" + strconv.Itoa(i)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var results []result
	for _, p := range policies {
		r, err := measure(ctx, f, p, ids)
		if err != nil {
			return fmt.Errorf("%s: %v", p.name, err)
		}
		results = append(results, r)
	}

	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(w, "%d users\t", users)
	for _, p := range policies {
		fmt.Fprintf(w, "%s\t", p.name)
	}
	fmt.Fprintln(w)
	row := func(label string, value func(result) float64) {
		fmt.Fprintf(w, "%s\t", label)
		for _, r := range results {
			fmt.Fprintf(w, "%.1f%%\t", 100*value(r))
		}
		fmt.Fprintln(w)
	}
	row("a user's calls on one backend", func(r result) float64 { return r.sticky })
	row(fmt.Sprintf("scale-out %d -> %d: users moved (ideal %.1f%%)", tier, tier+1, 100.0/(tier+1)), func(r result) float64 { return r.moved })
	row("  of them, to the newcomer (ideal 100%)", func(r result) float64 { return r.toNew })
	count := func(label string, value func(result) int) {
		fmt.Fprintf(w, "%s\t", label)
		for _, r := range results {
			fmt.Fprintf(w, "%d\t", value(r))
		}
		fmt.Fprintln(w)
	}
	count(fmt.Sprintf("backend-%d out and back %d times: user moves", flapping, flaps), func(r result) int { return r.flapMoves })
	count("  users moved at least once", func(r result) int { return r.flapMovedUsers })
	if err := w.Flush(); err != nil {
		return err
	}
	fmt.Printf("\npickwise_ring_hash moved backend-%d's users once, when it first left: each time it came back it had not been present for rejoinHold (30 s), so its users stayed on their next backend. Once it has, they come back over rejoinRamp (10 s), each at its own moment.\n", flapping)
	return check(results)
}

// check fails the run, which CI makes, if pickwise_ring_hash stops
// showing what this example says it shows.
func check(results []result) error {
	theirs, ours := results[0], results[1]
	switch {
	case ours.sticky != 1:
		return fmt.Errorf("pickwise_ring_hash sent %.1f%% of users' calls to one backend, want 100%%", 100*ours.sticky)
	case ours.toNew != 1:
		return fmt.Errorf("pickwise_ring_hash's scale-out sent %.1f%% of the users it moved to the newcomer, want all", 100*ours.toNew)
	case ours.flapMoves != ours.flapMovedUsers || ours.flapMoves == 0:
		return fmt.Errorf("pickwise_ring_hash's flaps moved %d users %d times, want each that moved moved once: the hold did not keep them", ours.flapMovedUsers, ours.flapMoves)
	case theirs.flapMoves <= theirs.flapMovedUsers:
		return fmt.Errorf("ring_hash_experimental's flaps moved %d users %d times, want each moved away and back", theirs.flapMovedUsers, theirs.flapMoves)
	}
	return nil
}

// measure runs the scale-out and the flaps through a channel of p's.
func measure(ctx context.Context, f *fleet.Fleet, p policy, users []string) (result, error) {
	addrs := f.Addrs()
	c, err := fleet.Dial(addrs[:tier], p.serviceConfig)
	if err != nil {
		return result{}, err
	}
	defer c.Close()
	// round sends one call per user, from a few callers at once, and
	// returns the backend of each.
	round := func() (map[string]string, error) {
		backends := make([]string, len(users))
		errs := make([]error, callers)
		var wg sync.WaitGroup
		for w := range callers {
			wg.Go(func() {
				for i := w; i < len(users) && errs[w] == nil; i += callers {
					backends[i], errs[w] = c.Call(p.withKey(ctx, users[i]))
				}
			})
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			return nil, err
		}
		where := make(map[string]string, len(users))
		for i, u := range users {
			where[u] = backends[i]
		}
		return where, nil
	}
	var r result
	first, err := round()
	if err != nil {
		return r, err
	}
	second, err := round()
	if err != nil {
		return r, err
	}
	r.sticky = same(first, second)

	// Scale-out: the eleventh backend joins.
	c.SetAddrs(addrs)
	grown, err := round()
	if err != nil {
		return r, err
	}
	moved, toNew := 0, 0
	for u, b := range grown {
		if b != second[u] {
			moved++
			if b == f.Backends[tier].Name() {
				toNew++
			}
		}
	}
	r.moved = float64(moved) / float64(len(users))
	r.toNew = float64(toNew) / float64(max(moved, 1))

	// The flaps: out of the list for a round, back for the next.
	without := append(append([]string(nil), addrs[:flapping]...), addrs[flapping+1:]...)
	prev, moves, movedOnce := grown, 0, map[string]bool{}
	for range flaps {
		for _, list := range [][]string{without, addrs} {
			c.SetAddrs(list)
			now, err := round()
			if err != nil {
				return r, err
			}
			for u, b := range now {
				if b != prev[u] {
					moves++
					movedOnce[u] = true
				}
			}
			prev = now
		}
	}
	r.flapMoves, r.flapMovedUsers = moves, len(movedOnce)
	return r, nil
}

// callers is how many goroutines send a round's calls.
const callers = 8

// same is the share of users a and b send to the same backend.
func same(a, b map[string]string) float64 {
	n := 0
	for u, backend := range a {
		if b[u] == backend {
			n++
		}
	}
	return float64(n) / float64(len(a))
}
