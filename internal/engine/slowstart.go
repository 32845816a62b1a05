package engine

import (
	"math"
	"sync/atomic"
	"time"

	"github.com/pickwise/pickwise/internal/ramp"
	"github.com/pickwise/pickwise/lbconfig"
	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/connectivity"
)

// SlowStartConfig is lbconfig.SlowStartConfig, under the name the
// engine's code uses.
type SlowStartConfig = lbconfig.SlowStartConfig

// slowStart decides which endpoints ramp and until when. The ramp's math
// and the proof that ends one early are in internal/ramp; the pickers
// apply a ramp at a pick (below) over the spans this hands each Snapshot.
// docs/design/slow-start.md has the rules and why.
//
// Guarded by the balancer's mu, but for served, which picks set.
type slowStart struct {
	cfg     *ramp.Curve // nil: slow start is off
	clock   Clock
	work    *doneWork // served: the channel has placed a call
	peers   *ramp.Peers
	locked  runLocked // runs a timer's work under the balancer's lock
	publish func(now int64)
	timer   Timer // republishes when the earliest ramp ends
	timerAt int64 // when timer fires; 0 if none
}

func (s *slowStart) configure(c *SlowStartConfig) { s.cfg = ramp.New(c) }

// joinsCold says whether an endpoint that joins now ramps on its first
// READY: only once the channel has placed a call. The endpoints that join
// before are its initial fleet, however the resolver spread them over its
// first updates; none carries any load yet, so ramping some would only
// override their weights.
func (s *slowStart) joinsCold() bool { return s.work.served.Load() }

// track follows e's connectivity: a ramp starts on its first READY if it
// joined after the initial fleet, and on any READY after a connection
// failure (a backend that was down is a new, cold process). A READY after
// a plain reconnect (a GOAWAY, an idle timeout) is the same warm process.
func (s *slowStart) track(e *Endpoint, st connectivity.State, now int64) {
	prev := e.state
	e.state = st
	switch {
	case st == connectivity.Ready && prev != connectivity.Ready:
		e.ramping, e.rampStart = e.coldReady, now
		if e.ramping {
			e.rampShare.Reset()
			e.rampProof.Reset(now)
			s.peers.RestartIfStale(now)
		}
		e.coldReady = false
	case st == connectivity.TransientFailure:
		e.coldReady = true
	}
}

// end is when e's ramp ends, or 0 if e is not ramping at now.
func (s *slowStart) end(e *Endpoint, now int64) int64 {
	if s.cfg == nil || !e.ramping || e.rampProof.Proven() {
		return 0
	}
	if end := e.rampStart + s.cfg.Window(); end > now {
		return end
	}
	return 0
}

// spans are the ramps of ready as of now for a Snapshot (nil if none
// ramps), and the earliest of their ends.
func (s *slowStart) spans(ready []Ready, now int64) (ramps []rampSpan, earliest int64) {
	if s.cfg == nil {
		return nil, 0
	}
	for i := range ready {
		e := ready[i].Stats
		end := s.end(e, now)
		if end == 0 {
			continue
		}
		if ramps == nil {
			ramps = make([]rampSpan, len(ready))
		}
		ramps[i] = rampSpan{start: e.rampStart, end: end}
		if earliest == 0 || end < earliest {
			earliest = end
		}
	}
	return ramps, earliest
}

// republishAt arranges a republish at at (0: none), when the earliest
// running ramp ends, so that pickers stop reading the clock for endpoints
// at full weight.
func (s *slowStart) republishAt(at, now int64) {
	if at == s.timerAt {
		return
	}
	s.stop()
	s.timerAt = at
	if at == 0 {
		return
	}
	s.timer = s.clock.AfterFunc(time.Duration(at-now), func() {
		s.locked(func() {
			if s.timerAt == at {
				s.timer, s.timerAt = nil, 0
				s.publish(s.clock.Nanotime())
			}
		})
	})
}

// rampsProven republishes once ramping endpoints' answers have shown them
// warm (ramp.Proof): their pickers have stopped ramping them already, and
// the new one no longer lists them as ramping.
func (s *slowStart) rampsProven() {
	s.locked(func() { s.publish(s.clock.Nanotime()) })
}

func (s *slowStart) stop() {
	if s.timer != nil {
		s.timer.Stop()
		s.timer = nil
	}
}

// What slow start does at a pick: a d-choice picker (LeastLoaded) holds
// a ramping endpoint to its share (ramp.Shares) and times the calls that
// prove it warm; a weighted picker (WeightedRR) ramps its weight in the
// schedule and lends it its opening calls.

// rampingPair reports whether a pair of candidates needs choose's checks
// for slow start: either is in its ramp, or, while ramps end on evidence,
// no call of their peers has been timed yet (ramp.Peers.WantsCalls), which
// a pair of peers then gives.
func (p *LeastLoaded) rampingPair(i, j int) bool {
	return p.ramping && (p.snap.ramps[i].end|p.snap.ramps[j].end != 0 ||
		p.proving && p.snap.sharedOf(p.cands[i].Stats).peers.WantsCalls())
}

// rampingAt reports whether endpoint i is in its slow-start ramp: listed
// as ramping by the snapshot, and not yet proved warm by its answers.
func (p *LeastLoaded) rampingAt(i int) bool {
	return p.ramping && p.snap.ramps[i].end != 0 && !p.cands[i].Stats.rampProof.Proven()
}

// countRamping counts a pick that endpoint i took, if it is ramping
// (ramp.Shares).
func (p *LeastLoaded) countRamping(i int) {
	if p.rampingAt(i) {
		p.cands[i].Stats.rampShare.Take()
	}
}

// proofFor says what a call placed on cands[best] at now (0: the clock
// is not read yet) is to be timed as evidence of, if anything, and the
// clock's reading: of a ramping endpoint's speed; or of its peers', if it
// was compared with a ramping endpoint or their calls are wanted
// (ramp.Peers.WantsCalls). The ramping endpoint's opening calls are all
// timed (ramp.Proof.Claim); others at most one a millisecond.
func (p *LeastLoaded) proofFor(cands []int, best int, now int64) (ramp.Kind, int64) {
	if p.rampingAt(best) {
		if p.cands[best].Stats.rampProof.Claim(now) {
			return ramp.Own, now
		}
		return ramp.None, now
	}
	shared := p.snap.sharedOf(p.cands[best].Stats)
	wanted := shared.peers.WantsCalls()
	for _, i := range cands {
		wanted = wanted || i != best && p.rampingAt(i)
	}
	if !wanted {
		return ramp.None, now
	}
	if now == 0 {
		now = p.snap.Clock.Nanotime()
	}
	if shared.peers.Claim(now) {
		return ramp.Baseline, now
	}
	return ramp.None, now
}

// proofSampled says whether the pick at position pos, on an endpoint that
// is not ramping, reads the clock to see whether its answer is wanted for
// the peers' average (ramp.Peers): one position in 16, enough answers
// for it, the others spared the clock. Chosen by a multiplicative hash of
// the position: every 16th position of a schedule whose length is a
// multiple of 16 would be the same few slots, and the same endpoints.
func proofSampled(pos uint32) bool { return (pos*0x9E3779B9)>>28 == 0 }

// rampChecks are the ramping endpoints of a WeightedRR picker's snapshot,
// and what the picker does for their evidence beside timing their calls.
// At its ramped weight a ramping endpoint's own slots come rarely: for a
// client that sends a hundred calls a second over a dozen backends, about
// one a second. So the picker gives each its first call of the ramp at
// the pace at which two random choices would draw it, on a pick the
// schedule gave another (as a d-choice picker gives it one the first time
// it is drawn), and, if the client sends it many calls, the rest of its
// opening's the same way (ramp.Curve.Lends). Its sampled picks ask the
// ramping endpoints, a few at a time, in turn, whether their peers'
// average or wait has grown enough for their answers to end their ramps
// (ramp.Proof.ProvesWarm), which only their own rare picks would ask
// otherwise. At that pace, and not at once, clients without number do not
// all send a cold process a call in the same moment; and by the time the
// first call's answer comes, its peers' wait has had time to show whether
// they are overloaded.
type rampChecks struct {
	ramping []int32 // indices in the snapshot's Endpoints
	turn    atomic.Uint32
	// The opening calls: positions whose hash is under openBelow, two
	// in as many as there are endpoints for each ramping one, visit the
	// ramping endpoints in turn (visit); a visit to one that has had its
	// first call gives it none unless ramp.Curve.Lends says it may have
	// more, and once a whole round of visits in a row (misses) gives
	// none, the picker stops looking.
	visit     atomic.Uint32
	misses    atomic.Int32
	openBelow uint32
}

// newRampChecks lists snap's ramping endpoints.
func newRampChecks(snap *Snapshot) *rampChecks {
	c := &rampChecks{}
	for i, r := range snap.ramps {
		if r.end != 0 {
			c.ramping = append(c.ramping, int32(i))
		}
	}
	share := 2 * float64(len(c.ramping)) / float64(max(len(snap.Endpoints), 1))
	c.openBelow = uint32(min(share, 1) * math.MaxUint32)
	return c
}

// judgeChecks is how many ramping endpoints a sampled pick judges.
const judgeChecks = 4

// judge asks the next judgeChecks ramping endpoints of snap, in turn,
// whether their answers show them warm against their peers as of now
// (doneShared.judge).
func (c *rampChecks) judge(snap *Snapshot, now int64) {
	n := uint32(len(c.ramping))
	k := c.turn.Add(judgeChecks) - judgeChecks
	for j := range min(uint32(judgeChecks), n) {
		e := snap.Endpoints[c.ramping[(k+j)%n]].Stats
		snap.sharedOf(e).judge(e, now)
	}
}

// lend is an opening call that a pick gives a ramping endpoint
// (rampChecks.opening).
type lend struct {
	i     int   // the endpoint's index in the snapshot
	now   int64 // the clock's reading if one was taken to decide, 0 if not
	ahead bool  // not its first call: its own slots repay it (ramp.Proof.Repay)
}

// opening is the opening call that the pick at position pos gives a
// ramping endpoint, if the position is one that visits one and the one it
// visits may have one: its first call whenever it comes, and more of its
// opening's while its ramp is young enough (ramp.Curve.Lends).
func (c *rampChecks) opening(snap *Snapshot, pos uint32) (lend, bool) {
	if pos*0x85EBCA77 >= c.openBelow || int(c.misses.Load()) >= len(c.ramping) {
		return lend{}, false
	}
	i := int(c.ramping[(c.visit.Add(1)-1)%uint32(len(c.ramping))])
	proof := &snap.Endpoints[i].Stats.rampProof
	switch {
	case proof.Unopened():
		c.misses.Store(0)
		return lend{i: i}, true
	case proof.Opening() && !proof.Proven():
		now := snap.Clock.Nanotime()
		if snap.ramp.Lends(now - proof.Since()) {
			c.misses.Store(0)
			return lend{i: i, now: now, ahead: true}, true
		}
	}
	c.misses.Add(1)
	return lend{}, false
}

// pickProving is pickWeighted while some endpoint ramps and ramps end on
// evidence: a call on endpoint i, r, at position pos is timed if its
// answer is wanted as evidence, its own if i is ramping (rampingAt), its
// peers' otherwise (ramp.Proof), sampled as proofSampled says or while calls of
// the peers are wanted (ramp.Peers.WantsCalls). A sampled pick also
// judges judgeChecks ramping endpoints, as a pick on a ramping endpoint
// judges its own; and a pick that is neither goes instead to a ramping
// endpoint that has yet to have a call in its ramp, or whose opening is
// young (rampChecks.opening), if open allows (not a retry), and back to r
// if that one's connection cannot take it. It returns the endpoint it
// placed the call on.
func (p *WeightedRR) pickProving(i int, r *Ready, ramping bool, info balancer.PickInfo, pos uint32, open bool) (balancer.PickResult, *Ready, error) {
	shared := p.snap.sharedOf(r.Stats)
	if !ramping && !proofSampled(pos) && !shared.peers.WantsCalls() {
		if open {
			if l, ok := p.checks.opening(p.snap, pos); ok {
				// The connection first: a claim for a call that did not go
				// out would end the endpoint's opening with none.
				lent := &p.snap.Endpoints[l.i]
				if res, err := lent.Stats.pickChild(info); err == nil {
					now := l.now
					if now == 0 {
						now = p.snap.Clock.Nanotime()
					}
					if l.ahead {
						lent.Stats.rampProof.Owe()
					}
					if lent.Stats.rampProof.Claim(now) {
						return startWeightedProof(lent.Stats, res, p.snap.sharedOf(lent.Stats), now, p.snap.Clock, ramp.Own), lent, nil
					}
					lent.Stats.inflight.Add(1)
					return withDone(res, lent.Stats.weightedDone), lent, nil
				}
			}
		}
		res, err := p.place(r, info, pos)
		return res, r, err
	}
	now := p.snap.Clock.Nanotime()
	proof := ramp.None
	switch {
	case ramping:
		if shared.judge(r.Stats, now) {
			break
		}
		if r.Stats.rampProof.Claim(now) {
			proof = ramp.Own
		}
	default:
		p.checks.judge(p.snap, now)
		if shared.peers.Claim(now) {
			proof = ramp.Baseline
		}
	}
	if proof == ramp.None {
		res, err := p.place(r, info, pos)
		return res, r, err
	}
	res, err := r.Stats.pickChild(info)
	if err != nil {
		return res, r, err
	}
	return startWeightedProof(r.Stats, res, shared, now, p.snap.Clock, proof), r, nil
}

// rampingAt reports whether endpoint i, r, is in its slow-start ramp:
// listed as ramping by the snapshot, and not yet proved warm.
func (p *WeightedRR) rampingAt(i int, r *Ready) bool {
	return p.snap.ramps[i].end != 0 && !r.Stats.rampProof.Proven()
}
