package sim

import (
	"errors"
	"fmt"
	"slices"

	v3orcapb "github.com/cncf/xds/go/xds/data/orca/v3"
	"github.com/pickwise/pickwise/internal/engine"
	"google.golang.org/grpc/balancer"
)

// Baselines are written here for comparison only: they are the textbook
// algorithms that published figures on load balancing describe, not
// policies to ship.

var errNoBackends = errors.New("no backends")

// Random picks a backend uniformly at random.
func Random() Policy {
	return Policy{Name: "random", newInstance: func(e *env) (instance, error) { return &randomInstance{env: e}, nil }}
}

type randomInstance struct {
	env *env
	ids []int
}

func (in *randomInstance) setBackends(ids []int) error { in.ids = slices.Clone(ids); return nil }
func (in *randomInstance) close()                      {}
func (in *randomInstance) pick(*Request) (int, finishFunc, error) {
	if len(in.ids) == 0 {
		return -1, nil, errNoBackends
	}
	return in.ids[in.env.rand.IntN(len(in.ids))], func(error, *v3orcapb.OrcaLoadReport) {}, nil
}

// LeastConnections scans every backend and picks the one with the fewest
// requests in flight from this client; ties go to a random one among them.
func LeastConnections() Policy {
	return Policy{Name: "least-conn (full scan)", newInstance: func(e *env) (instance, error) {
		return &leastConnInstance{env: e, inflight: map[int]int{}}, nil
	}}
}

type leastConnInstance struct {
	env      *env
	ids      []int
	inflight map[int]int
}

func (in *leastConnInstance) setBackends(ids []int) error { in.ids = slices.Clone(ids); return nil }
func (in *leastConnInstance) close()                      {}
func (in *leastConnInstance) pick(*Request) (int, finishFunc, error) {
	if len(in.ids) == 0 {
		return -1, nil, errNoBackends
	}
	best, ties := -1, 0
	for _, id := range in.ids {
		switch n := in.inflight[id]; {
		case best < 0 || n < in.inflight[best]:
			best, ties = id, 1
		case n == in.inflight[best]:
			// Reservoir sampling keeps every tied backend equally likely.
			ties++
			if in.env.rand.IntN(ties) == 0 {
				best = id
			}
		}
	}
	in.inflight[best]++
	return best, func(error, *v3orcapb.OrcaLoadReport) { in.inflight[best]-- }, nil
}

// Modulo hashes a request's key onto the backend list: key mod n. Requests
// without a key go to a random backend.
func Modulo() Policy {
	return Policy{Name: "modulo hash", newInstance: func(e *env) (instance, error) { return &moduloInstance{env: e}, nil }}
}

type moduloInstance struct {
	env *env
	ids []int
}

func (in *moduloInstance) setBackends(ids []int) error {
	in.ids = slices.Sorted(slices.Values(ids))
	return nil
}
func (in *moduloInstance) close() {}
func (in *moduloInstance) pick(req *Request) (int, finishFunc, error) {
	if len(in.ids) == 0 {
		return -1, nil, errNoBackends
	}
	if !req.HasKey {
		return in.ids[in.env.rand.IntN(len(in.ids))], func(error, *v3orcapb.OrcaLoadReport) {}, nil
	}
	return in.ids[req.Key%uint64(len(in.ids))], func(error, *v3orcapb.OrcaLoadReport) {}, nil
}

// Static is a column for a pickwise policy's real picker built directly
// over the backends (engine.StaticPicker), for fleet sizes where building
// through grpc's endpointsharding costs O(n²). It has no slow start and no
// time decay of failures; membership changes rebuild it.
func Static(label, name, config string) Policy {
	return Policy{Name: label, newInstance: func(e *env) (instance, error) {
		spec, ok := engine.Lookup(name)
		if !ok {
			return nil, fmt.Errorf("sim: %q is not a pickwise policy", name)
		}
		cfg, err := spec.ParseConfig([]byte(config))
		if err != nil {
			return nil, err
		}
		return &staticInstance{env: e, build: func(conns []balancer.SubConn, weights []uint32) (balancer.Picker, error) {
			return engine.StaticPicker(spec, cfg, conns, weights, engine.Options{Clock: e.loop.clock(), Rand: engine.NewSeededRand(e.rand.Uint64())})
		}}, nil
	}}
}

type staticInstance struct {
	env    *env
	build  func([]balancer.SubConn, []uint32) (balancer.Picker, error)
	picker balancer.Picker
}

// staticConn names a backend inside a static picker's result.
type staticConn struct {
	balancer.SubConn
	id int
}

func (in *staticInstance) setBackends(ids []int) error {
	if len(ids) == 0 {
		in.picker = nil
		return nil
	}
	conns := make([]balancer.SubConn, len(ids))
	weights := make([]uint32, len(ids))
	for i, id := range ids {
		conns[i] = &staticConn{id: id}
		weights[i] = in.env.backends[id].Weight
	}
	p, err := in.build(conns, weights)
	in.picker = p
	return err
}

func (in *staticInstance) close() {}

func (in *staticInstance) pick(*Request) (int, finishFunc, error) {
	if in.picker == nil {
		return -1, nil, errNoBackends
	}
	res, err := in.picker.Pick(balancer.PickInfo{})
	if err != nil {
		return -1, nil, err
	}
	return res.SubConn.(*staticConn).id, grpcDone(res.Done), nil
}
