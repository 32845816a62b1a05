package engine

import (
	"time"

	"google.golang.org/grpc/connectivity"
)

// slowStart decides which endpoints ramp and until when. The ramp's math
// and the proof that ends one early are in ramp.go; the pickers apply a
// ramp at a pick (rampShares in leastloaded.go, rampChecks in weighted.go)
// over the spans this hands each Snapshot. docs/design/slow-start.md has
// the rules and why.
//
// Guarded by the balancer's mu, but for served, which picks set.
type slowStart struct {
	cfg     *ramp // nil: slow start is off
	clock   Clock
	work    *doneWork // served: the channel has placed a call
	peers   *peerAverage
	locked  runLocked // runs a timer's work under the balancer's lock
	timer   Timer     // republishes when the earliest ramp ends
	timerAt int64     // when timer fires; 0 if none
}

// runLocked runs f under the balancer's lock unless the balancer is
// closed, and publishes if f says the pickers must change.
type runLocked = func(f func(now int64) (publish bool))

func (s *slowStart) configure(c *SlowStartConfig) { s.cfg = newRamp(c) }

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
			e.rampShare.reset()
			e.rampProof.reset(now)
			s.peers.restartIfStale(now)
		}
		e.coldReady = false
	case st == connectivity.TransientFailure:
		e.coldReady = true
	}
}

// end is when e's ramp ends, or 0 if e is not ramping at now.
func (s *slowStart) end(e *Endpoint, now int64) int64 {
	if s.cfg == nil || !e.ramping || e.rampProof.proven.Load() {
		return 0
	}
	if end := e.rampStart + s.cfg.window; end > now {
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
		s.locked(func(int64) bool {
			if s.timerAt != at {
				return false
			}
			s.timer, s.timerAt = nil, 0
			return true
		})
	})
}

// rampsProven republishes once ramping endpoints' answers have shown them
// warm (rampProof): their pickers have stopped ramping them already, and
// the new one no longer lists them as ramping.
func (s *slowStart) rampsProven() { s.locked(func(int64) bool { return true }) }

func (s *slowStart) stop() {
	if s.timer != nil {
		s.timer.Stop()
		s.timer = nil
	}
}
