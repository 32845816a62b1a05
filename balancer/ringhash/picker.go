package ringhash

import (
	"errors"
	"math"
	"sync/atomic"

	"github.com/pickwise/pickwise/internal/engine"
	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/connectivity"
)

// picker is an immutable view of every endpoint, in any state, and the
// table over them. Pick takes no lock; with a WithKey key it allocates
// nothing.
type picker struct {
	// Immutable after construction.
	tbl        table
	members    []engine.Member      // indexed as the table's endpoints
	states     []engine.MemberState // the members' states, aligned with members
	header     string               // requestHashHeader, "" if none
	rand       engine.Rand
	connecting bool             // some endpoint is CONNECTING (gRFC A76's random-hash rule)
	snap       *engine.Snapshot // for avoidance and probes
	strict     bool             // StrictAffinity: retries stay home
	// adm is each member's share of its keys under the rejoin hold
	// (rejoin.go), nil when every member has all of them.
	adm []admission

	// Bounded load only (load != nil): the balancer-wide in-flight count,
	// BalanceFactor / the placing endpoints' total weight (placingWeight),
	// each member's weight (loadWeights), and the Done of each member that
	// keeps the count.
	load    *loadCounter
	factor  float64
	weights []uint32
	dones   []func(balancer.DoneInfo)
}

// Pick implements balancer.Picker. The key is the context's (WithKey),
// else the requestHashHeader's, else a random hash (gRFC A76).
func (p *picker) Pick(info balancer.PickInfo) (balancer.PickResult, error) {
	var a *engine.Attempts
	if !p.strict {
		a = engine.AttemptsOf(info)
	}
	h, keyed := requestHash(info.Ctx, p.header)
	if !keyed {
		return p.pickRandom(p.rand.Uint64(), info, a)
	}
	c := p.tbl.first(h)
	first := c.endpoint
	var load int64 = -1 // bounded load's in-flight total + 1, read on first need
	fallback, spill := int32(-1), int32(-1)
	// passed is the first READY endpoint the walk passed over because it
	// is ejected or an earlier attempt used it: the call's last resort.
	passed := int32(-1)
	var spillCost float64
	spills := 0
	// heldReady is the first READY endpoint the walk passed over because
	// the rejoin hold keeps the key off it: better than failing the call.
	heldReady := int32(-1)
	for ok := true; ok; c, ok = p.tbl.next(c) {
		m, st := &p.members[c.endpoint], p.states[c.endpoint]
		if p.adm != nil && !p.admits(c.endpoint, h) {
			// Held after a return: its keys stay where they went.
			if heldReady < 0 && st.State() == connectivity.Ready && !st.Ejected() {
				heldReady = c.endpoint
			}
			continue
		}
		switch st.State() {
		case connectivity.Ready:
			if st.Ejected() {
				// Locally ejected: its keys go to their next candidate,
				// but for a probe now and then, which shows its recovery.
				if p.snap.ProbeDue(m.Conn.Stats, a) {
					res, err := engine.PickProbe(&m.Conn, info)
					return a.Record(m.Conn.Stats, res, p.settled(c.endpoint, err))
				}
				if passed < 0 {
					passed = c.endpoint
				}
				continue
			}
			if a != nil && a.Used(m.Conn.Stats) {
				// A retry or hedge: the key's next candidate.
				if passed < 0 {
					passed = c.endpoint
				}
				continue
			}
			if p.load == nil {
				return p.record(a, c.endpoint, info, homeOr(c.endpoint, first))
			}
			if load < 0 {
				load = p.load.total.Load() + 1
			}
			if n := m.Conn.Stats.InFlight(); n+1 <= p.loadCap(c.endpoint, load) {
				if fallback < 0 {
					return p.recordBounded(a, c.endpoint, info, homeOr(c.endpoint, first))
				}
				// The key's own endpoint is full: its overflow goes to the
				// least loaded of the next spillChoices that can take it,
				// so that one hot key's spill does not fill its neighbour
				// and push that neighbour's own keys out in turn. Recent
				// failures count as load: an endpoint that fails fast is
				// never busy, and would otherwise draw every spill.
				cost := float64(n+1) / (1 - p.snap.Avoidance(m.Conn.Stats))
				if spill < 0 || cost < spillCost {
					spill, spillCost = c.endpoint, cost
				}
				if spills++; spills == spillChoices {
					return p.recordBounded(a, spill, info, reasonSpilled)
				}
			}
			if fallback < 0 {
				fallback = c.endpoint
			}
		case connectivity.Idle, connectivity.Connecting:
			if fallback < 0 {
				// gRFC A61: the key's endpoint is not connected yet. Its
				// child's picker wakes it if IDLE and queues the RPC
				// until it is READY: the key stays where it belongs. The
				// child may have turned READY since this snapshot was
				// taken (Member.Conn follows it), so the pick is counted
				// like any other.
				return p.record(a, c.endpoint, info, homeOr(c.endpoint, first))
			}
			// Bounded load skipped a READY endpoint to get here: wake
			// this one for later keys, but look on for one that can take
			// the call now rather than queue it.
			if st.State() == connectivity.Idle {
				m.Wake(info)
			}
		}
		// TRANSIENT_FAILURE: the next candidate along the table.
	}
	if spill >= 0 {
		return p.recordBounded(a, spill, info, reasonSpilled)
	}
	if fallback >= 0 {
		// Every READY endpoint the walk could use is at its cap. Their
		// caps sum to at least the load, so this is rare: the walk passed
		// some (earlier attempts used them, or a rejoin holds them), or
		// racing picks read the total before each other's calls. The
		// first READY candidate keeps as much affinity as is left.
		return p.recordBounded(a, fallback, info, homeOr(fallback, first))
	}
	if heldReady >= 0 {
		// Every other endpoint is down, ejected or used: the hold yields.
		return p.record(a, heldReady, info, homeOr(heldReady, first))
	}
	if passed >= 0 {
		// Every READY endpoint is ejected or was used by an earlier
		// attempt: one of them beats failing the call.
		return p.record(a, passed, info, homeOr(passed, first))
	}
	// Every endpoint failed: fail with the key's own endpoint's error,
	// unless it has recovered since the snapshot.
	return p.record(a, first, info, reasonHome)
}

// admits reports whether member i takes the key of hash h under the
// rejoin hold; it reads the clock only for a member being readmitted.
func (p *picker) admits(i int32, h uint64) bool {
	a := &p.adm[i]
	if a.full == 0 {
		return true
	}
	if a.from == math.MaxInt64 {
		return false
	}
	return a.admits(h, p.snap.Clock.Nanotime())
}

// record picks member i and notes it in the call's attempt record a (nil:
// none).
func (p *picker) record(a *engine.Attempts, i int32, info balancer.PickInfo, why engine.PickReason) (balancer.PickResult, error) {
	res, err := p.pick(i, info, why)
	return a.Record(p.members[i].Conn.Stats, res, err)
}

// recordBounded is record through bounded load's count.
func (p *picker) recordBounded(a *engine.Attempts, i int32, info balancer.PickInfo, why engine.PickReason) (balancer.PickResult, error) {
	res, err := p.pickBounded(i, info, why)
	return a.Record(p.members[i].Conn.Stats, res, err)
}

// homeOr is the reason for picking endpoint i for a key whose own endpoint
// is home: reasonHome if they are the same, else reasonUnavailable (the
// walk along the table passed endpoints that could not take the call).
func homeOr(i, home int32) engine.PickReason {
	if i == home {
		return reasonHome
	}
	return reasonUnavailable
}

// spillChoices is how many candidates under the cap, past a full first
// choice, compete for its overflow. Taking the first one, as Envoy does,
// lets a hot key's spill fill that neighbour and evict the neighbour's own
// keys in a cascade; in TestBoundedLoadHotKey, three raise the calls that
// land on their first choice from 76-80% to 84-89%. The spill of one key
// still goes to a few fixed endpoints, so it keeps some locality.
const spillChoices = 3

// pickRandom places an RPC without a key (gRFC A76): the first READY
// endpoint along the table from a random hash, waking at most one IDLE
// endpoint on the way, and none while one is connecting already. Such a
// call has no endpoint of its own, so it also passes over endpoints that
// are failing (failingAvoidance) or ejected while another can take it.
func (p *picker) pickRandom(h uint64, info balancer.PickInfo, a *engine.Attempts) (balancer.PickResult, error) {
	if res, err, ok := p.snap.Probe(info, a, uint32(h>>32)); ok {
		return res, err
	}
	requested := p.connecting
	var load int64 = -1
	fallback, failing, heldReady := int32(-1), int32(-1), int32(-1)
	for c, ok := p.tbl.first(h), true; ok; c, ok = p.tbl.next(c) {
		m, st := &p.members[c.endpoint], p.states[c.endpoint]
		if p.adm != nil && !p.admits(c.endpoint, h) {
			if heldReady < 0 && st.State() == connectivity.Ready && !st.Ejected() {
				heldReady = c.endpoint
			}
			continue
		}
		switch st.State() {
		case connectivity.Ready:
			if st.Ejected() || p.snap.Avoidance(m.Conn.Stats) >= failingAvoidance || (a != nil && a.Used(m.Conn.Stats)) {
				if failing < 0 {
					failing = c.endpoint
				}
				continue
			}
			if p.load != nil {
				if load < 0 {
					load = p.load.total.Load() + 1
				}
				if m.Conn.Stats.InFlight()+1 > p.loadCap(c.endpoint, load) {
					if fallback < 0 {
						fallback = c.endpoint
					}
					continue
				}
			}
			res, err := p.pick(c.endpoint, info, reasonRandom)
			return a.Record(m.Conn.Stats, res, err)
		case connectivity.Idle:
			if !requested {
				requested = true
				// The child's picker wakes it (once, for a lazy child).
				m.Wake(info)
			}
		}
	}
	// Over the cap is better than failing: the cap is a preference, a
	// failing endpoint's calls are lost.
	if fallback >= 0 {
		res, err := p.pick(fallback, info, reasonRandom)
		return a.Record(p.members[fallback].Conn.Stats, res, err)
	}
	if heldReady >= 0 {
		res, err := p.pick(heldReady, info, reasonRandom)
		return a.Record(p.members[heldReady].Conn.Stats, res, err)
	}
	if failing >= 0 {
		res, err := p.pick(failing, info, reasonRandom)
		return a.Record(p.members[failing].Conn.Stats, res, err)
	}
	if requested {
		return balancer.PickResult{}, balancer.ErrNoSubConnAvailable
	}
	// Every endpoint failed: fail with the first one's error, unless it has
	// recovered since the snapshot.
	first := p.tbl.first(h).endpoint
	res, err := p.pick(first, info, reasonRandom)
	return a.Record(p.members[first].Conn.Stats, res, err)
}

// failingAvoidance is the avoidance (about 30% of recent calls failed)
// past which a call without a key passes an endpoint over.
const failingAvoidance = 0.4

// pick picks member i, through bounded load's count when it is on.
func (p *picker) pick(i int32, info balancer.PickInfo, why engine.PickReason) (balancer.PickResult, error) {
	if p.load == nil {
		res, err := engine.PickEndpoint(&p.members[i].Conn, info, why)
		return res, p.settled(i, err)
	}
	return p.pickBounded(i, info, why)
}

// settled is the error of a pick on member i as the call should see it.
// A member picks through its child's latest picker (Member.Conn), and the
// child of one this snapshot shows READY may have failed since: its error
// would fail a call that a snapshot walking past the member would place.
// The call waits for that snapshot instead, which the child's report has
// already scheduled, as it waited when a READY member's picker was the
// child's picker of that time (grpc finds the connection gone and waits).
func (p *picker) settled(i int32, err error) error {
	if err != nil && p.states[i].State() == connectivity.Ready && !errors.Is(err, balancer.ErrNoSubConnAvailable) {
		return balancer.ErrNoSubConnAvailable
	}
	return err
}

// loadCap is bounded load's limit on member i for the next call, given
// load, the total in flight plus that call: ceil(BalanceFactor * load *
// w_i / W), W the total weight of the endpoints that take calls, with
// factor = BalanceFactor / W computed once per picker. Their caps sum to
// at least the load, so one of them is always under its cap.
func (p *picker) loadCap(i int32, load int64) int64 {
	return int64(math.Ceil(p.factor * float64(p.weights[i]) * float64(load)))
}

// pickBounded picks member i and counts the call in the balancer-wide
// total until its Done.
func (p *picker) pickBounded(i int32, info balancer.PickInfo, why engine.PickReason) (balancer.PickResult, error) {
	res, err := engine.PickEndpointDone(&p.members[i].Conn, info, why, p.dones[i])
	if err == nil {
		p.load.total.Add(1)
	}
	return res, p.settled(i, err)
}

// Snapshot is what the picker was built from, for the introspection
// page.
func (p *picker) Snapshot() *engine.Snapshot { return p.snap }

// ReportCosts implements engine.CostReporter: the in-flight calls of every
// READY endpoint, what bounded load caps.
func (p *picker) ReportCosts(_ int64, record func(float64)) {
	for i, st := range p.states {
		if st.State() == connectivity.Ready {
			record(float64(p.members[i].Conn.Stats.InFlight()))
		}
	}
}

// loadCounter is a balancer's in-flight total for bounded load. It counts
// only this balancer's calls: bounded load balances what one client
// sends, not what the backend serves.
type loadCounter struct {
	total atomic.Int64
}

// doneFor returns the Done of e's calls: the engine's, then the total.
func (l *loadCounter) doneFor(e *engine.Endpoint) func(balancer.DoneInfo) {
	return func(di balancer.DoneInfo) {
		e.Finish(di)
		l.total.Add(-1)
	}
}
