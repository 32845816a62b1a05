package ringhash

import (
	"math"

	"github.com/pickwise/pickwise/internal/engine"
	"github.com/pickwise/pickwise/internal/mix"
	"google.golang.org/grpc/connectivity"
)

// This file is the rejoin hold (Config.RejoinHold and RejoinRamp): an
// endpoint that left, by removal or TRANSIENT_FAILURE, after it was READY
// is held out of its keys when it comes back, until it has been present
// and READY for the hold, and then gets them back over the ramp. While it
// is held a key's walk passes it, as it passes an endpoint in
// TRANSIENT_FAILURE, so its keys stay where they went when it left.
// Nothing runs on a timer: the picker reads the clock for the keys of an
// endpoint that is being readmitted, and every state change publishes a
// new picker anyway.

// rejoinState is what the hold remembers of one identity.
type rejoinState struct {
	seed     uint64 // hash of the identity: with a key's, its moment in the ramp
	ready    bool   // has been READY while present, and is not held
	returner bool   // left after it was READY and is not yet readmitted in full
	proving  bool   // a returner READY since readyAt
	readyAt  int64  // Nanotime of its first READY since it came back
	gone     bool   // missing from the list since goneAt
	goneAt   int64
}

// admission is how much of its keys a member gets, as the picker reads
// it: all of them when full is 0; otherwise none before from and all from
// full, each key at its own moment in between.
type admission struct {
	from, full int64
	seed       uint64
}

// held is an admission of none of the keys: a returner not READY yet.
var held = admission{from: math.MaxInt64, full: math.MaxInt64}

// rejoins tracks the identities of the policy's table for the hold.
type rejoins struct {
	byID    map[string]*rejoinState // every identity present, or gone within forgetAfter
	aligned []*rejoinState          // byID's entries in the table's order
	for_    []endpoint              // the table entries aligned was built for
}

// forgetAfter is how long, in holds, an identity that left is remembered:
// one that comes back after that is a newcomer, and takes its keys at
// once. (Its cache is as cold as a newcomer's by then.)
const forgetAfter = 10

// align points aligned at the states of eps, the table's endpoints, and
// notes the identities that left the list at now. It runs when the table
// is rebuilt: a change of the endpoint set.
func (r *rejoins) align(eps []endpoint, now, hold int64) {
	if r.byID == nil {
		r.byID = make(map[string]*rejoinState, len(eps))
	}
	present := make(map[string]bool, len(eps))
	r.aligned = make([]*rejoinState, len(eps))
	for i, ep := range eps {
		st := r.byID[ep.id]
		if st == nil {
			st = &rejoinState{seed: hashIdentity(ep.id)}
			r.byID[ep.id] = st
		}
		if st.gone {
			// Back after a removal; after forgetAfter holds, as a newcomer.
			st.gone = false
			switch {
			case now-st.goneAt > forgetAfter*max(hold, 1):
				*st = rejoinState{seed: st.seed}
			case st.ready || st.returner:
				st.returner, st.ready, st.proving = true, false, false
			}
		}
		r.aligned[i] = st
		present[ep.id] = true
	}
	for id, st := range r.byID {
		if present[id] {
			continue
		}
		if !st.gone {
			st.gone, st.goneAt = true, now
		}
		if !(st.ready || st.returner) || now-st.goneAt > forgetAfter*max(hold, 1) {
			// Never READY: nothing of it to protect.
			delete(r.byID, id)
		}
	}
	r.for_ = eps
}

// update reads the members' states at now and returns each member's
// admission, aligned with members (the table's order), or nil when every
// member has all its keys. IDLE members that are held are woken, so that
// they can prove themselves.
func (r *rejoins) update(members []engine.Member, states []engine.MemberState, now, hold, ramp int64) []admission {
	var adm []admission
	for i, ms := range states {
		state, st := ms.State(), r.aligned[i]
		switch state {
		case connectivity.Ready:
			if st.returner && !st.proving {
				st.proving, st.readyAt = true, now
			}
			if !st.returner {
				st.ready = true
			}
		case connectivity.TransientFailure:
			if st.ready || st.returner {
				st.returner, st.ready, st.proving = true, false, false
			}
		default:
			// IDLE or CONNECTING: a returner must be READY for the whole
			// hold, so it starts over; an endpoint that was not held keeps
			// its keys (IDLE is a connection closed for idleness).
			st.proving = false
		}
		if !st.returner {
			continue
		}
		if st.proving && now >= st.readyAt+hold+ramp {
			st.returner, st.ready = false, true
			continue
		}
		if adm == nil {
			adm = make([]admission, len(members))
		}
		if !st.proving {
			adm[i] = held
			if m := &members[i]; state == connectivity.Idle && m.ExitIdle != nil {
				m.ExitIdle()
			}
			continue
		}
		adm[i] = admission{from: st.readyAt + hold, full: st.readyAt + hold + ramp, seed: st.seed}
	}
	return adm
}

// admits reports whether a's member takes the key of hash h at now.
func (a *admission) admits(h uint64, now int64) bool {
	switch {
	case now >= a.full:
		return true
	case now < a.from:
		return false
	}
	moment := float64(mix.Mix64(h^a.seed)>>11) / (1 << 53)
	return moment < float64(now-a.from)/float64(a.full-a.from)
}
