package sim

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	_ "github.com/pickwise/pickwise/balancer/subset" // registers pickwise_subset
	"github.com/pickwise/pickwise/internal/subsetting"
)

// subsetKind is how a pickwise_subset column chooses each client's subset.
type subsetKind int

const (
	// subsetBalanced is mode "balanced" with clientIndex: [subsetting.Balanced].
	subsetBalanced subsetKind = iota
	// subsetStable is mode "stable" with clientIndex: [subsetting.Stable].
	subsetStable
	// subsetNoIndex is the config without clientIndex, with a clientId per
	// client: [subsetting.Rendezvous], gRFC A68's ranking with a fixed seed.
	subsetNoIndex
)

// PickwiseSubset is a pickwise_subset column: client i (in the order the
// run builds clients, as DeterministicSubset counts them) takes the subset
// of size backends that pickwise_subset computes for it, and child, built
// as the simulator builds any policy (virtual clock, seeded source),
// balances over that subset. With subsetBalanced and subsetStable, i is the
// config's clientIndex and clientCount is the fleet size; with
// subsetNoIndex, the config's clientId is "sim-client-<i>".
//
// The subset comes from the pure functions pickwise_subset itself calls
// (package subsetting) over the identities it reads (each endpoint's
// address, backendAddr), which is all the parent computes before it hands
// the filtered list to its child (TestPickwiseSubsetMatchesBalancer checks
// this against the real balancer). The real parent would build its child through grpc's
// registry, with the wall clock and an unseeded source; composing here
// keeps the run in virtual time and its placements a function of the seed.
//
// Like DeterministicSubset, the returned Policy counts the clients it
// builds and must not be shared by runs executing at the same time.
func PickwiseSubset(label string, kind subsetKind, size, clientCount int, child Policy) Policy {
	var last *env
	next := 0
	// The balanced assignment of client i is row i of the fleet's
	// assignment, and row i depends only on the rows before it, so one
	// BalancedAll per backend list serves every client: computing Balanced
	// separately for each of 1,000 clients would cost each the rows before
	// it, about 500 times as much in all.
	var cachedIDs string
	var cachedRows [][]string
	rows := func(addrs []string) ([][]string, error) {
		key := strings.Join(addrs, "\n")
		if cachedRows == nil || key != cachedIDs {
			r, err := subsetting.BalancedAll(addrs, size, clientCount)
			if err != nil {
				return nil, err
			}
			cachedIDs, cachedRows = key, r
		}
		return cachedRows, nil
	}
	compute := func(client int, addrs []string) ([]string, error) {
		switch kind {
		case subsetBalanced:
			if client >= clientCount {
				return nil, fmt.Errorf("client %d of a fleet of %d", client, clientCount)
			}
			all, err := rows(addrs)
			if err != nil {
				return nil, err
			}
			return all[client], nil
		case subsetStable:
			return subsetting.Stable(addrs, size, client, clientCount)
		default:
			return subsetting.Rendezvous(addrs, size, subsetClientID(client))
		}
	}
	return Policy{Name: label, newInstance: func(e *env) (instance, error) {
		if e != last {
			last, next = e, 0
		}
		c, err := child.newInstance(e)
		if err != nil {
			return nil, err
		}
		in := &pickwiseSubsetInstance{client: next, compute: compute, child: c}
		next++
		return in, nil
	}}
}

// subsetClientID is the clientId of client i in subsetNoIndex columns.
func subsetClientID(i int) string { return "sim-client-" + strconv.Itoa(i) }

// pickwiseSubsetInstance is one client of a PickwiseSubset column.
type pickwiseSubsetInstance struct {
	client  int
	compute func(client int, addrs []string) ([]string, error)
	child   instance
	subset  []int // sorted backend ids
}

func (in *pickwiseSubsetInstance) setBackends(ids []int) error {
	addrs := make([]string, len(ids))
	byAddr := make(map[string]int, len(ids))
	for i, id := range ids {
		addrs[i] = backendAddr(id)
		byAddr[addrs[i]] = id
	}
	// pickwise_subset hands an empty list on as it is, and the child
	// reports TRANSIENT_FAILURE.
	var sub []int
	if len(ids) > 0 {
		chosen, err := in.compute(in.client, addrs)
		if err != nil {
			return err
		}
		sub = make([]int, len(chosen))
		for i, a := range chosen {
			sub[i] = byAddr[a]
		}
		slices.Sort(sub)
	}
	in.subset = sub
	return in.child.setBackends(sub)
}

func (in *pickwiseSubsetInstance) pick(req *Request) (int, finishFunc, error) {
	return in.child.pick(req)
}

func (in *pickwiseSubsetInstance) close() { in.child.close() }

// connections is the backends the client connects to: its subset, all of
// which the child (pickwise_p2c connects every endpoint it is given) holds
// a connection to.
func (in *pickwiseSubsetInstance) connections() []int { return slices.Clone(in.subset) }

// pickwiseP2C is pickwise_subset's default child, pickwise_p2c with its
// defaults.
func pickwiseP2C() Policy { return GRPC("pickwise_p2c", "pickwise_p2c", `{}`) }
