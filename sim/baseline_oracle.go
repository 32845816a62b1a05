package sim

import (
	"slices"
	"time"

	v3orcapb "github.com/cncf/xds/go/xds/data/orca/v3"
)

// oracleNote is the oracle column's note under every table that has it.
const oracleNote = "oracle: not a policy a client can run: it reads every backend's true state at the instant of each call " +
	"(busy workers, queue, the mean service time in force, slowdowns included), which no real client has, " +
	"and places the call where it is expected to complete soonest: the reference for what placement can do"

// Oracle places every call on the backend where it is expected to complete
// soonest, reading each backend's true state at the instant of the call,
// as no client can: global join-the-shortest-queue weighed by each
// backend's current speed. Plain JSQ over true queues is beaten when
// backends slow down, since a short queue on a slow backend can take
// longer than a longer one on a fast backend.
//
// A call placed now on a backend with W workers, b of them busy and q
// calls queued (those whose client still waits), and a mean service time
// m (Dist.Mean times the Slow and cold-start factors in force now)
// completes in expectation after
//
//	m                       if b + q < W (a worker is free)
//	m * (1 + (b+q+1-W)/W)   otherwise
//
// It waits for b+q+1-W completions among W busy workers, one every m/W on
// average (exact for exponential service, close enough for the others),
// then its own service. A backend without a worker limit takes m.
// Failures are not foreseen: the oracle knows speed and load, not
// outcomes. Ties, as between idle backends of equal speed, go to a random
// one among them, drawn from the run's seeded source.
func Oracle() Policy {
	return Policy{Name: "oracle", Note: oracleNote, newInstance: func(e *env) (instance, error) {
		return &oracleInstance{env: e}, nil
	}}
}

type oracleInstance struct {
	env *env
	ids []int
}

func (in *oracleInstance) setBackends(ids []int) error { in.ids = slices.Clone(ids); return nil }
func (in *oracleInstance) close()                      {}

func (in *oracleInstance) pick(*Request) (int, finishFunc, error) {
	if len(in.ids) == 0 {
		return -1, nil, errNoBackends
	}
	now := in.env.loop.Now()
	best, ties := -1, 0
	var bestAt float64
	for _, id := range in.ids {
		switch at := expectedCompletion(in.env.servers[id], now); {
		case best < 0 || at < bestAt:
			best, bestAt, ties = id, at, 1
		case at == bestAt:
			// Reservoir sampling keeps every tied backend equally likely.
			ties++
			if in.env.rand.IntN(ties) == 0 {
				best = id
			}
		}
	}
	// The oracle reads the servers' own state, so an outcome tells it
	// nothing.
	return best, func(error, *v3orcapb.OrcaLoadReport) {}, nil
}

// expectedCompletion is how long a call placed on srv now takes in
// expectation, in nanoseconds (see Oracle).
func expectedCompletion(srv *server, now time.Duration) float64 {
	m := float64(srv.spec.Service.Mean()) * srv.slowdown(now)
	w := srv.spec.Servers
	if w == 0 {
		return m
	}
	ahead := srv.busy + srv.waiting + 1 - w
	if ahead <= 0 {
		return m
	}
	return m * (1 + float64(ahead)/float64(w))
}
