package sim

import (
	"fmt"
	"slices"

	v3orcapb "github.com/cncf/xds/go/xds/data/orca/v3"
	"github.com/pickwise/pickwise/internal/subsetting"
)

// DeterministicSubset is the deterministic subsetting of Google's SRE book
// ("Load Balancing in the Datacenter"), [subsetting.SRE]: clients are
// grouped into rounds of backends/subsetSize; every client of a round
// shuffles the backend list with the round number as the seed, and client
// i takes the (i mod backends/subsetSize)-th slice of subsetSize backends
// of its round's shuffle. A round covers every backend once, so with a
// client count that is a multiple of the round size each backend gets
// exactly the same number of clients. Its known cost is churn: removing
// one backend changes the round size and every shuffle, so nearly every
// client's subset changes.
//
// A client's index is the order in which the run built it (Execute builds
// clients 0, 1, ... in turn), and clientCount bounds it, as for
// PickwiseSubset; so the returned Policy counts the clients it builds and
// must not be shared by runs executing at the same time. Within its subset
// a client round-robins.
func DeterministicSubset(subsetSize, clientCount int) Policy {
	// Execute builds all of a run's clients with one env before the next
	// run starts, so a change of env restarts the count.
	var last *env
	next := 0
	return Policy{Name: "deterministic subsetting", newInstance: func(e *env) (instance, error) {
		if e != last {
			last, next = e, 0
		}
		if next >= clientCount {
			return nil, fmt.Errorf("client %d of a fleet of %d", next, clientCount)
		}
		in := &subsetInstance{client: next, count: clientCount, size: subsetSize}
		next++
		return in, nil
	}}
}

type subsetInstance struct {
	client, count, size int
	subset              []int
	next                int // round-robin position in subset
}

// setBackends takes the client's subset of ids. The algorithm runs over the
// integer ids themselves, not their addresses: it shuffles the sorted list,
// and the ids' numeric order does not depend on how backendAddr spells an
// address.
func (in *subsetInstance) setBackends(ids []int) error {
	sub, err := subsetting.SRE(ids, in.size, in.client, in.count)
	if err != nil {
		return err
	}
	in.subset = sub
	return nil
}

func (in *subsetInstance) close() {}

func (in *subsetInstance) pick(*Request) (int, finishFunc, error) {
	if len(in.subset) == 0 {
		return -1, nil, errNoBackends
	}
	id := in.subset[in.next%len(in.subset)]
	in.next++
	return id, func(error, *v3orcapb.OrcaLoadReport) {}, nil
}

// connections is the backends the client connects to: its subset.
func (in *subsetInstance) connections() []int { return slices.Clone(in.subset) }
