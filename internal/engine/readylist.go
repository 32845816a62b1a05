package engine

import (
	"slices"

	"google.golang.org/grpc/connectivity"
)

// This file keeps the lists a publish hands to a snapshot between
// publishes: the READY endpoints (readyList) and, under a lazy policy,
// every endpoint (memberList). A publish after one endpoint's change then
// costs a copy of a list rather than a walk over every endpoint's state.
// The walk reads each endpoint's cold fields, one or two cache misses per
// endpoint, which at 10k endpoints is most of a millisecond; the copy is
// one sequential move.
// A publish with no change of the list since the last one (a weight
// update, a slow-start step) hands the snapshot the same array, and the
// next edit copies it first: at 50k endpoints the copy is 800 KB. An
// endpoint that leaves READY stays in the array until something else
// changes the list or a publish comes (readyOut): if it comes back
// first (a flap within a coalescing window, under churn over more than
// publishAtOnceUpTo endpoints), nothing was copied or moved. One that
// comes back to its place after a publish and before anything else
// changes takes back the array published before it left (see
// readyUndo), so such a flap copies once, not twice.

// readyList is the balancer's list of READY endpoints that are not
// ejected, and of those that are, in resolver order, as a publish hands
// them to the snapshot. It is edited when one endpoint's state changes
// (in place, or into a new array when the last snapshot holds it; a new
// picker of a READY endpoint changes only the endpoint, see
// Endpoint.followChild), and dropped (valid false) on anything rarer that
// changes what it holds: a resolver update, an ejection or a readmission,
// an ejected endpoint's change. The next publish then walks the endpoints
// and keeps the result. Slow start's ramps, which depend on the time of
// the publish, are not in it: each publish computes them (slowStart.spans).
// Guarded by the balancer's mu.
type readyList struct {
	valid   bool
	ready   []Ready // sorted by Endpoint.pos
	ejected []Ready // never edited in place: rebuilt on any change
	// published says that ready is held by a published snapshot (the
	// last, or after an undo an earlier one) as its Endpoints, which must
	// not change: the next edit copies it (insertAt, deleteAt).
	published bool
	weights   readyWeights
	// undo is the array ready was before its last edit, when that edit
	// took an endpoint out of a published array and nothing has changed
	// since: the endpoint's return to the same place (a flap, a
	// connection re-established) then takes the array back, which no
	// one changes once published, rather than copying it again.
	undo readyUndo
	// out is an endpoint that left READY and is still in ready, its
	// removal put off until another endpoint's change or a publish
	// (settle): at 50k endpoints a removal moves or copies 800 KB, and
	// an endpoint whose connection drops and is re-established before
	// the next publish (under churn in a fleet of more than
	// publishAtOnceUpTo endpoints, whose changes are coalesced) then
	// costs none. Zero when there is none.
	out readyOut
}

// readyOut is an endpoint whose removal from readyList.ready, at index
// i, is put off.
type readyOut struct {
	e *Endpoint
	i int
}

// readyUndo is the published array a removal copied, the endpoint it
// removed and where; zero when there is none.
type readyUndo struct {
	before []Ready
	i      int
	e      *Endpoint
}

// invalidate drops the list; the next publish rebuilds it.
func (l *readyList) invalidate() {
	l.valid, l.ready, l.ejected, l.published = false, nil, nil, false
	l.undo, l.out = readyUndo{}, readyOut{}
	l.weights.drop()
}

// changed brings the list up to date after e's state changed
// (a new picker in the same state changes only e: see followChild).
func (l *readyList) changed(e *Endpoint) {
	if !l.valid {
		return
	}
	if e.ejection.ejected {
		// Rare: the ejected list is rebuilt rather than edited.
		l.invalidate()
		return
	}
	if l.out.e == e {
		if e.state != connectivity.Ready {
			return // still out (IDLE, then CONNECTING)
		}
		// A guard: its weight and position change only with a resolver
		// update, which drops the list.
		if l.ready[l.out.i] == (Ready{Stats: e, InvWeight: 1 / e.weight}) {
			l.out = readyOut{} // back before anything else changed
			return
		}
		l.settle() // back as another entry: out, then in
	}
	// The pending entry keeps its place in the order, so the search is
	// right with it there; only an edit of the list takes it out first,
	// and a change that edits nothing (a picker replaced, a down
	// endpoint retrying) leaves it pending.
	search := func() (int, bool) {
		return slices.BinarySearchFunc(l.ready, e.pos, func(r Ready, pos int) int { return r.Stats.pos - pos })
	}
	i, found := search()
	want := e.state == connectivity.Ready
	if want == found {
		// A new READY picker: the endpoint holds it (conn), the list
		// nothing to change; or a change between states that are not
		// READY.
		return
	}
	if l.out.e != nil {
		l.settle()
		i, found = search()
	}
	switch {
	case want:
		r := Ready{Stats: e, InvWeight: 1 / e.weight}
		if u := l.undo; u.e == e && u.i == i && u.before[i] == r {
			l.ready, l.published = u.before, true
		} else {
			l.ready = insertAt(l.ready, l.published, i, r)
			l.published = false
		}
		l.undo = readyUndo{}
		if l.weights.valid {
			l.weights.insert(i, e)
		}
	case found:
		l.out = readyOut{e: e, i: i}
	}
}

// settle takes out the endpoint whose removal was put off, if any.
func (l *readyList) settle() {
	e, i := l.out.e, l.out.i
	if e == nil {
		return
	}
	l.out = readyOut{}
	l.undo = readyUndo{}
	if l.published {
		l.undo = readyUndo{before: l.ready, i: i, e: e}
	}
	l.ready = deleteAt(l.ready, l.published, i)
	l.published = false
	if l.weights.valid {
		l.weights.remove(i)
	}
}

// take is the READY endpoints that are not ejected and
// those that are, in resolver order, as of now, for a snapshot: the
// caller may keep them and must not change them.
func (l *readyList) take(order []*Endpoint) (ready, ejected []Ready) {
	if !l.valid {
		l.valid = true
		l.ready, l.ejected = scanReady(order)
	}
	l.settle()
	l.published = true
	return l.ready, l.ejected
}

// scanReady is take computed from every endpoint's
// state.
func scanReady(order []*Endpoint) (ready, ejected []Ready) {
	// Resolver order keeps seeded runs reproducible without sorting on
	// every update.
	ready = make([]Ready, 0, len(order))
	for _, e := range order {
		if e.state != connectivity.Ready {
			continue
		}
		r := Ready{Stats: e, InvWeight: 1 / e.weight}
		if e.ejection.ejected {
			ejected = append(ejected, r)
			continue
		}
		ready = append(ready, r)
	}
	return ready, ejected
}

// memberList is a lazy policy's Snapshot.Members and States between
// publishes. The members change only when the set of endpoints does (a
// resolver update, an endpoint's first report), which drops the list, so
// every snapshot until then shares their array. A connectivity or
// ejection change edits one state, in place or in a copy of the states
// when the last snapshot holds them: a byte per endpoint, 50 KB at 50k
// endpoints, where a copy of the members would be 4 MB of pointers (a
// burst of keys waking endpoints brings a publish per coalescing window;
// BenchmarkWake in internal/scale). Guarded by the balancer's mu.
type memberList struct {
	valid   bool
	members []Member      // the endpoints that have reported, in resolver order
	states  []MemberState // aligned with members
	counts  stateCounts
	// published says that states is the last snapshot's too: the next
	// edit copies it first.
	published bool
}

// invalidate drops the list; the next publish rebuilds it.
func (l *memberList) invalidate() {
	*l = memberList{}
}

// memberStateOf is e's MemberState.
func memberStateOf(e *Endpoint) MemberState { return MemberStateOf(e.state, e.ejection.ejected) }

// changed brings the member list up to date after e's state,
// picker or ejection changed.
func (l *memberList) changed(e *Endpoint) {
	if !l.valid {
		return
	}
	i := e.member
	if i >= len(l.members) || l.members[i].Conn.Stats != e {
		// Not in the list: its first report, which changes the list's
		// length and every later member's index.
		l.invalidate()
		return
	}
	st := memberStateOf(e)
	if l.states[i] == st {
		return // a new picker in the same state: nothing to copy
	}
	if l.published {
		l.states = slices.Clone(l.states)
		l.published = false
	}
	l.counts.move(l.states[i].State(), e.state)
	l.states[i] = st
}

// take is every endpoint that has reported, in resolver order,
// their states, and how many are in each state, for a snapshot: the
// caller may keep the slices and must not change them.
func (l *memberList) take(order []*Endpoint) ([]Member, []MemberState, stateCounts) {
	if !l.valid {
		l.valid = true
		l.members = make([]Member, 0, len(order))
		l.states = make([]MemberState, 0, len(order))
		for _, e := range order {
			if e.picker == nil {
				continue // its child has not reported yet
			}
			e.member = len(l.members)
			// The live picker in every state, so that the member need
			// not change when the endpoint's state does: while it is not
			// READY, calls waiting on it follow the child from here on
			// (see onDemand.readyLocked).
			l.members = append(l.members, Member{Conn: Ready{Stats: e, InvWeight: 1 / e.weight},
				Endpoint: e.resolved, Weight: uint32(e.weight), ExitIdle: e.exitIdle})
			l.states = append(l.states, memberStateOf(e))
			l.counts.move(noStateYet, e.state)
		}
	}
	l.published = true
	// Without spare capacity: a snapshot's holder cannot append into the
	// list's arrays.
	return slices.Clip(l.members), slices.Clip(l.states), l.counts
}

// stateCounts counts endpoints by connectivity state.
type stateCounts [connectivity.Shutdown + 1]int

func (s *stateCounts) move(from, to connectivity.State) {
	if from <= connectivity.Shutdown {
		s[from]--
	}
	if to <= connectivity.Shutdown {
		s[to]++
	}
}

// noStateYet stands for a state not yet reported or published; it is
// outside the range stateCounts counts.
const noStateYet = connectivity.Shutdown + 1
