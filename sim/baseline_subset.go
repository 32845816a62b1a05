package sim

import (
	"math/rand/v2"
	"slices"

	v3orcapb "github.com/cncf/xds/go/xds/data/orca/v3"
)

// DeterministicSubset is the deterministic subsetting of Google's SRE book
// ("Load Balancing in the Datacenter"): clients are grouped into rounds of
// backends/subsetSize; every client of a round shuffles the backend list
// with the round number as the seed, and client i takes the (i mod
// backends/subsetSize)-th slice of subsetSize backends of its round's
// shuffle. A round covers every backend once, so with a client count that
// is a multiple of the round size each backend gets exactly the same
// number of clients. Its known cost is churn: removing one backend changes
// the round size and every shuffle, so nearly every client's subset changes.
//
// A client's index is the order in which the run built it (Execute builds
// clients 0, 1, ... in turn), so the returned Policy counts the clients it
// builds and must not be shared by runs executing at the same time. Within
// its subset a client round-robins.
func DeterministicSubset(subsetSize int) Policy {
	// Execute builds all of a run's clients with one env before the next
	// run starts, so a change of env restarts the count.
	var last *env
	next := 0
	return Policy{Name: "deterministic subsetting", newInstance: func(e *env) (instance, error) {
		if e != last {
			last, next = e, 0
		}
		in := &subsetInstance{client: next, size: subsetSize}
		next++
		return in, nil
	}}
}

type subsetInstance struct {
	client, size int
	subset       []int
	next         int // round-robin position in subset
}

func (in *subsetInstance) setBackends(ids []int) error {
	in.subset = deterministicSubset(ids, in.client, in.size)
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

// deterministicSubset returns client's subset of size backends from ids.
func deterministicSubset(ids []int, client, size int) []int {
	// Every client must start from the same list, whatever order the
	// resolver gave.
	backends := slices.Sorted(slices.Values(ids))
	if size <= 0 || len(backends) <= size {
		return backends
	}
	count := len(backends) / size // subsets per round
	round := client / count
	// The seed is the round: the clients of one round agree on the shuffle
	// without talking to each other, and rounds differ so that the
	// backends left over by len%size are not always the same ones.
	r := rand.New(rand.NewPCG(uint64(round), 0))
	r.Shuffle(len(backends), func(i, j int) { backends[i], backends[j] = backends[j], backends[i] })
	start := (client % count) * size
	return slices.Clone(backends[start : start+size])
}
