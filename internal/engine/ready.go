package engine

import (
	"slices"

	"github.com/pickwise/pickwise/internal/ramp"
	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/resolver"
)

// Ready is one READY endpoint in a picker's snapshot (and, as a Member's
// Conn, any endpoint of a lazy policy). A picker holds a slice of them and
// never changes it; the counters it reads, and the way to the child's
// connection, live in Stats. It is what a pick reads besides the
// endpoint's own lines: 16 bytes and one pointer, four to a cache line,
// so that the array a publish copies after an edit and a picker reads in
// place is small and cheap to copy (160 KB at 10k endpoints; with the
// child's picker in it, it was twice that and three pointers an entry,
// each paying the collector's write barrier while it marks). What only
// some snapshots need (slow start's ramps, the Done that reads per-call
// reports) is kept beside it, not in it.
type Ready struct {
	// Stats is the endpoint's long-lived state, its way to its child's
	// connection included: pick through PickEndpoint or PickEndpointDone.
	Stats *Endpoint
	// InvWeight is 1/weight, the endpoint's static weight (from the weight
	// attribute, xDS's load_balancing_weight, at least 1), so the pick path
	// multiplies instead of dividing.
	InvWeight float64
}

// rampSpan bounds one endpoint's slow start, in the engine's
// Clock.Nanotime; end is 0 when it is not ramping.
type rampSpan struct{ start, end int64 }

// Snapshot is what a policy builds a picker from: the READY endpoints and
// the engine services a picker needs. It is immutable.
type Snapshot struct {
	// Endpoints are the READY endpoints that are not locally ejected.
	// Never empty, except under a lazy policy (Spec.Lazy), whose pickers
	// are published in every state.
	Endpoints []Ready
	// Ejected are the READY endpoints that are locally ejected, reached
	// by probes (Probe) and, under a lazy policy, by keys whose walk finds
	// them due for one (ProbeDue), or that find no better candidate.
	Ejected []Ready
	// Members, under a lazy policy only, are all the endpoints in resolver
	// order, whatever their state; never empty. Nil otherwise. What a
	// member holds changes only with the set of endpoints (a resolver
	// update, an endpoint's first report), and until then every snapshot
	// has the same array: a policy that sees the array of its last
	// snapshot again knows its placement inputs are unchanged.
	Members []Member
	// States are the members' connectivity as of the snapshot, aligned
	// with Members; nil when Members is. Kept apart from Members so that
	// a connectivity change copies a byte per endpoint for the next
	// snapshot, not a member.
	States []MemberState
	// Weights are the endpoints' backend-reported weights, aligned with
	// Endpoints, when the policy asked for Settings.Weights: the median
	// stands in for an endpoint without a usable weight, and all are 1 when
	// fewer than two have one. Nil otherwise. Slow start is not applied.
	// Read only, and only while the policy's NewPicker runs, which must
	// not keep them: the array is the balancer's own, which it changes with
	// the next edit of the READY list or the next picker, and it sets
	// Weights to nil once the picker is built.
	Weights []float64
	// WeightsFallback says that fewer than two endpoints had a usable
	// weight, so that Weights are all equal: the policy is round robin
	// until reports arrive.
	WeightsFallback bool
	// Built is when the snapshot was taken, in Clock.Nanotime.
	Built int64
	// ramps, aligned with Endpoints, are their slow-start ramps as of
	// Built; nil when none of them is ramping.
	ramps []rampSpan
	// Clock and Rand are the engine's injected time and randomness.
	Clock   Clock
	Rand    Rand
	ramp    *ramp.Curve
	penalty *penalty
	ejector *ejector
	shared  *doneShared // the fleet's failure rate, and every endpoint's own shared; nil outside a balancer
	latency *latency
	turns   *turns // the balancer's, for its d-choice pickers; nil outside a balancer
	// loadProbes is the balancer's load probing, for Prequal pickers; nil
	// outside a balancer.
	loadProbes *loadProbes
	// unserved says that the balancer had placed no call when the
	// snapshot was taken: its pickers' picks mark the first (notePlaced).
	unserved bool
}

// notePlaced marks the balancer as having placed a call, for the pick of
// a picker built while it had placed none (unserved, which the picker
// copies to a field it reads on every pick): the endpoints that join
// after are newcomers to slow start (slowStart.joinsCold).
//
//go:noinline
func (s *Snapshot) notePlaced() {
	if sh := s.shared; sh != nil && !sh.work.served.Load() {
		sh.work.served.Store(true)
	}
}

// Ramping says that some endpoint of Endpoints is in its slow-start ramp.
func (s *Snapshot) Ramping() bool { return s.ramps != nil }

// RampFactor is slow start's multiplier of Endpoints[i]'s weight at now: in
// (0, 1] during its ramp, 1 outside it.
func (s *Snapshot) RampFactor(i int, now int64) float64 {
	if s.ramps == nil || s.ramp == nil {
		return 1
	}
	if r := s.ramps[i]; r.end != 0 && now < r.end {
		return s.ramp.Factor(now - r.start)
	}
	return 1
}

// provesRamps says whether pickers over s time answers to end ramps on
// evidence (ramp.Proof): some endpoint ramps, ramps end on evidence
// (SlowStartConfig.TimeOnly unset), and there is a clock to time by.
func (s *Snapshot) provesRamps() bool {
	return s.ramps != nil && s.ramp != nil && s.ramp.Proves() && s.Clock != nil
}

// sharedOf is e's doneShared, for a timed call's Done: the snapshot's,
// which is every endpoint's own, so that the Done need not read it from
// the endpoint's second line; e's where the snapshot was built by hand.
func (s *Snapshot) sharedOf(e *Endpoint) *doneShared {
	if s.shared != nil {
		return s.shared
	}
	return e.shared
}

// Avoidance is the probability, in [0, 1), with which a picker passes e
// over for its recent server-side failures (FailurePenaltyConfig): 0 when
// the penalty is off or e has no recent failure.
func (s *Snapshot) Avoidance(e *Endpoint) float64 {
	if s.penalty == nil {
		return 0
	}
	o := e.outcomes()
	if o.Failures == 0 {
		return 0
	}
	return s.penalty.avoidance(o, s.fleetRate())
}

// mayAvoid reports whether Avoidance may be above 0 for some endpoint:
// false when the penalty is off or no endpoint has a failure counted, so
// that a picker built over a large fleet need not ask each endpoint.
func (s *Snapshot) mayAvoid() bool {
	return s.penalty != nil && (s.shared == nil || s.shared.failing.Load())
}

// fleetRate is the fleet's failure rate as of the last health tick.
func (s *Snapshot) fleetRate() float64 {
	if s.shared == nil {
		return 0
	}
	return s.shared.fleetRate()
}

// PickEndpoint asks r's child for a connection and, if it has one, counts
// the RPC against r until its Done runs. Every policy's picker ends here
// but WeightedRR's (pickWeighted, which counts the same way on its own
// path), so that in-flight counts and failure tracking are the same for
// all of them. why is counted for the policy's
// picks metric.
func PickEndpoint(r *Ready, info balancer.PickInfo, why PickReason) (balancer.PickResult, error) {
	res, ok := r.Stats.readyResult()
	if !ok {
		var err error
		if res, err = r.Stats.askChild(info); err != nil {
			return res, err
		}
	}
	r.Stats.started(why)
	return withDone(res, r.Stats.done), nil
}

// PickEndpointDone is PickEndpoint with done as the call's Done instead of
// the engine's own, for a policy that must see every call end (to keep a
// count of its own). done must call r.Stats.Finish exactly once.
func PickEndpointDone(r *Ready, info balancer.PickInfo, why PickReason, done func(balancer.DoneInfo)) (balancer.PickResult, error) {
	res, ok := r.Stats.readyResult()
	if !ok {
		var err error
		if res, err = r.Stats.askChild(info); err != nil {
			return res, err
		}
	}
	r.Stats.started(why)
	return withDone(res, done), nil
}

// pickWeighted is a WeightedRR pick of r: the child's connection, with
// r's weightedDone, the call counted in r's in-flight count only (the
// picker counts its picks itself: WeightedRR.Pick).
func pickWeighted(r *Ready, info balancer.PickInfo) (balancer.PickResult, error) {
	res, ok := r.Stats.readyResult()
	if !ok {
		var err error
		if res, err = r.Stats.askChild(info); err != nil {
			return res, err
		}
	}
	r.Stats.inflight.Add(1)
	return withDone(res, r.Stats.weightedDone), nil
}

// Finish is what the engine's own Done does for a call picked for e: the
// call leaves the in-flight count and its outcome is recorded. Only a Done
// given to PickEndpointDone may call it.
func (e *Endpoint) Finish(info balancer.DoneInfo) { e.finish(info) }

// withDone makes ours res's Done, chained before the child's own if it has
// one. A child that tracks its own calls is rare (pickfirst does not); only
// then does a pick pay for a closure.
func withDone(res balancer.PickResult, ours func(balancer.DoneInfo)) balancer.PickResult {
	if res.Done == nil {
		res.Done = ours
		return res
	}
	childDone := res.Done
	res.Done = func(di balancer.DoneInfo) {
		ours(di)
		childDone(di)
	}
	return res
}

// Member is one endpoint of a lazy policy's snapshot, in any connectivity
// state.
type Member struct {
	// Conn is how a picker reaches the endpoint and its long-lived state.
	// Pick through it with PickEndpoint or PickEndpointDone, in any state:
	// the pick follows the child's latest picker, which queues the call
	// and makes it connect, as pickfirst's does, or places it once the
	// child is READY, before the next snapshot shows it (Wake asks the
	// child without placing a call). Following the child, a pick on a
	// member the snapshot shows READY returns the child's error if its
	// connection failed since; the policy decides whether the call waits
	// for the next snapshot. Slow start does not apply to lazy policies.
	Conn Ready
	// Endpoint is the endpoint as the resolver gave it, attributes
	// included (the A76 hash key, the weight).
	Endpoint resolver.Endpoint
	// Weight is the endpoint's static weight, at least 1.
	Weight uint32
	// ExitIdle asks the endpoint's child to connect. It returns at once
	// (the work happens on a goroutine), so a picker may call it.
	ExitIdle func()
}

// Wake asks the member's child for a connection as a pick would, without
// placing a call: a lazy child that is IDLE starts connecting (once).
func (m *Member) Wake(info balancer.PickInfo) { _, _ = m.Conn.Stats.pickChild(info) }

// ChildPicker is the picker r's picks go through as of now (it does not
// follow later ones): its child's last READY one, or, before any or
// under a lazy policy while the child is not READY, one that follows the
// child's latest. For yardsticks that pick through the child
// themselves; a policy's picker goes through PickEndpoint.
func (r *Ready) ChildPicker() balancer.Picker {
	if c := r.Stats.conn.Load(); c != nil {
		return c.picker
	}
	return &r.Stats.live
}

// MemberState is a member's connectivity as of a snapshot, in a byte: its
// state, and whether it is locally ejected.
type MemberState uint8

// ejectedBit marks a MemberState ejected; states fit in the bits below.
const ejectedBit MemberState = 1 << 7

// MemberStateOf is the MemberState of an endpoint in state s; ejected
// counts only for a READY one.
func MemberStateOf(s connectivity.State, ejected bool) MemberState {
	st := MemberState(s)
	if ejected && s == connectivity.Ready {
		st |= ejectedBit
	}
	return st
}

// State is the member's connectivity state.
func (s MemberState) State() connectivity.State { return connectivity.State(s &^ ejectedBit) }

// Ejected says the member is READY and locally ejected (EjectionConfig):
// a key's walk passes it unless its probe is due (Snapshot.ProbeDue).
func (s MemberState) Ejected() bool { return s&ejectedBit != 0 }

// insertAt returns s with x inserted at i. When shared, a snapshot holds
// s's array, and the result is a new array, written in one pass (copying
// and then shifting the tail would move the tail twice; the elements hold
// pointers, and while the collector runs each one moved costs a write
// barrier). It has no room to spare: the list is published again soon,
// and the first edit after that publish makes a new array anyway (edits
// between two publishes are in place, and may grow it).
func insertAt[T any](s []T, shared bool, i int, x T) []T {
	if !shared {
		return slices.Insert(s, i, x)
	}
	out := make([]T, 0, len(s)+1)
	out = append(out, s[:i]...)
	out = append(out, x)
	return append(out, s[i:]...)
}

// deleteAt returns s without its element i, in a new array when shared,
// as insertAt.
func deleteAt[T any](s []T, shared bool, i int) []T {
	if !shared {
		return slices.Delete(s, i, i+1)
	}
	out := make([]T, 0, len(s)-1)
	out = append(out, s[:i]...)
	return append(out, s[i+1:]...)
}
