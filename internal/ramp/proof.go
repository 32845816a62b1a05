package ramp

import (
	"sync/atomic"
	"time"
)

// What ends a ramp early, against the peers' average (Peers).
const (
	// ProofAnswers answers with a mean within warmRatio of it prove a ramp.
	ProofAnswers = 8
	warmRatio    = 1.5
	// QuickAnswers within quickRatio prove it sooner; a ramp opens with as many.
	QuickAnswers = 5
	quickRatio   = 1.2
	reliefRatio  = 2                       // relief: peers that much slower than its slowest answer
	proofGap     = int64(time.Millisecond) // the least time between timed calls of one average
)

// Kind says what a timed call's answer is evidence of.
type Kind uint8

const (
	None     Kind = iota // no evidence
	Own                  // the answer of a ramping endpoint (Proof)
	Baseline             // the answer of one of its peers (Peers)
)

// timer spaces the calls timed for one side of the evidence.
type timer struct {
	lastTimed atomic.Int64 // Clock.Nanotime; 0 before the first
}

// claim reports whether a call placed at now is timed; racing picks may both be.
func (t *timer) claim(now int64) bool {
	last := t.lastTimed.Load()
	if last != 0 && now-last < proofGap {
		return false
	}
	t.lastTimed.Store(now)
	return true
}

// Proof is one endpoint's evidence, in its current ramp, that it is warm.
// A failed call spoils the ramp, which then runs by time.
type Proof struct {
	timer   timer
	since   atomic.Int64 // Clock.Nanotime the ramp began
	sum     atomic.Int64 // nanoseconds
	slowest atomic.Int64 // nanoseconds
	answers atomic.Int32
	spoiled atomic.Bool
	proven  atomic.Bool
	opened  atomic.Int32 // the opening's calls; racing picks may pass QuickAnswers
	owed    atomic.Int32 // lent calls its own slots have yet to repay
	// started and settled count timed calls placed and their outcomes.
	started, settled atomic.Int32
}

// Reset starts the evidence over, for a ramp that begins at now.
func (p *Proof) Reset(now int64) {
	p.since.Store(now)
	p.timer.lastTimed.Store(0)
	// The slowest before the sum (ProvesWarm).
	p.slowest.Store(0)
	p.sum.Store(0)
	p.answers.Store(0)
	p.spoiled.Store(false)
	p.proven.Store(false)
	p.opened.Store(0)
	p.owed.Store(0)
	p.started.Store(0)
	p.settled.Store(0)
}

// Since is when the ramp began.
func (p *Proof) Since() int64 { return p.since.Load() }

// Proven reports whether the answers have ended the ramp.
func (p *Proof) Proven() bool { return p.proven.Load() }

// Prove ends the ramp, reporting whether this call did.
func (p *Proof) Prove() bool { return p.proven.CompareAndSwap(false, true) }

// Answers is how many successful timed answers the ramp has had.
func (p *Proof) Answers() int { return int(p.answers.Load()) }

// Opening reports whether the ramp's opening, whose calls are all timed, is under way.
func (p *Proof) Opening() bool {
	return p.opened.Load() < QuickAnswers && !p.spoiled.Load()
}

// Unopened reports whether no call is timed yet and evidence is still wanted.
func (p *Proof) Unopened() bool {
	return p.timer.lastTimed.Load() == 0 && !p.spoiled.Load() && !p.proven.Load()
}

// Claim reports whether a call placed on the ramping endpoint at now is
// timed: any of the opening's, then one in proofGap; none once spoiled.
func (p *Proof) Claim(now int64) bool {
	if p.spoiled.Load() {
		return false
	}
	if p.opened.Load() < QuickAnswers && p.opened.Add(1) <= QuickAnswers {
		p.timer.lastTimed.Store(now)
		return true
	}
	return p.timer.claim(now)
}

// Count counts a timed call placed as evidence of kind, if it is Own.
func (p *Proof) Count(kind Kind) {
	if kind == Own {
		p.started.Add(1)
	}
}

// Owe counts a call a weighted schedule lent ahead of the ramped share.
func (p *Proof) Owe() { p.owed.Add(1) }

// Repay reports whether one of the endpoint's own slots repays a lent call.
func (p *Proof) Repay() bool {
	for {
		n := p.owed.Load()
		if n <= 0 {
			return false
		}
		if p.owed.CompareAndSwap(n, n-1) {
			return true
		}
	}
}

// Ours reports whether a call timed at start belongs to the current ramp.
func (p *Proof) Ours(start int64) bool { return start >= p.since.Load() }

// Settle records the outcome of a timed call that gave no answer; spoils
// says it reached the endpoint and failed, which leaves the ramp to time.
func (p *Proof) Settle(spoils bool) {
	if spoils {
		// Before it is settled: no relief sees it settled and not spoiled.
		p.spoiled.Store(true)
	}
	p.settled.Add(1)
}

// Add records an answer that took took nanoseconds, and reports whether
// the answers so far prove the ramp against peers (ProvesWarm).
func (p *Proof) Add(took int64, peers float64) bool {
	took = max(took, 1)
	p.sum.Add(took)
	slowest := p.slowest.Load()
	for took > slowest && !p.slowest.CompareAndSwap(slowest, took) {
		slowest = p.slowest.Load()
	}
	// Counted and settled after: ProvesWarm never reads them short.
	p.answers.Add(1)
	p.settled.Add(1)
	return p.ProvesWarm(peers, true)
}

// ProvesWarm reports whether the answers so far show the endpoint warm
// against peers, its peers' average or a lower bound on it (0: unknown):
// by the quick or the mean proof if average is set, or by relief.
func (p *Proof) ProvesWarm(peers float64, average bool) bool {
	if peers <= 0 || p.spoiled.Load() {
		return false
	}
	// The count first; a slowest of 0 with answers is a ramp begun since.
	n := p.answers.Load()
	sum := float64(p.sum.Load())
	slowest := float64(p.slowest.Load())
	if n == 0 || slowest == 0 {
		return false
	}
	switch {
	case !average:
	case n >= QuickAnswers && slowest <= quickRatio*peers:
		return true
	case n >= ProofAnswers && sum/float64(n) <= warmRatio*peers:
		return true
	}
	return p.relieves(peers)
}

// relieves reports whether its answers, at least one, are reliefRatio
// times faster than peers, with no timed call out: it may be slow.
func (p *Proof) relieves(peers float64) bool {
	// Settled first: its slowest or spoiling is written (Add, Settle).
	settled := p.settled.Load()
	slowest := p.slowest.Load()
	return slowest != 0 && !p.spoiled.Load() && float64(slowest)*reliefRatio <= peers &&
		settled >= p.started.Load()
}
