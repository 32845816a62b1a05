package ramp

import (
	"math"
	"sync/atomic"
	"time"
)

// Peers is the balancer's average of the answers of endpoints not
// ramping, that a ramping endpoint's own are judged against. Its first
// PeerWarmup answers give their minimum, and after them one over capRatio
// times it is left out as a long call, unless peerRedo in a row are.
type Peers struct {
	timer     timer
	timed     atomic.Int32  // since the last restart, counted up to peerBound (more if picks race)
	boundFrom atomic.Int64  // 1 + when the peerBound-th timed call started; 0 before
	bits      atomic.Uint64 // math.Float64bits of the average; 0 before the first answer
	answers   atomic.Int32  // folded in since the last restart, counted up to PeerWarmup+1
	dropped   atomic.Int32  // answers left out in a row
	fedAt     atomic.Int64  // Clock.Nanotime of the last answer folded in
	restarted atomic.Int64  // Clock.Nanotime of the last restart
}

const (
	// PeerWarmup is how many first answers give their minimum.
	PeerWarmup = 4
	peerBound  = 1 // the first call's wait bounds the average: a later one left ramps longer
	peerShift  = 4 // the answers of the last 16 ms or more, at one a proofGap
	capRatio   = 4
	peerRedo   = 8
	peersStale = int64(10 * time.Second)
)

// Add folds in an answer that took took nanoseconds and came at now.
func (a *Peers) Add(took, now int64) {
	if now-took < a.restarted.Load() {
		return // timed before the average started over
	}
	sample := float64(max(took, 1))
	n := a.answers.Load()
	if n <= PeerWarmup {
		n = a.answers.Add(1)
	}
	for {
		old := a.bits.Load()
		prev := math.Float64frombits(old)
		avg := sample
		switch {
		case old == 0:
		case n <= PeerWarmup:
			avg = min(prev, sample)
		case sample > capRatio*prev:
			if a.dropped.Add(1) >= peerRedo {
				a.restart(now)
			}
			return
		default:
			avg = prev + (sample-prev)/(1<<peerShift)
		}
		if a.bits.CompareAndSwap(old, math.Float64bits(avg)) {
			a.dropped.Store(0)
			a.fedAt.Store(now)
			return
		}
	}
}

// Claim reports whether a peer's call placed at now is to be timed: at
// most one in proofGap.
func (a *Peers) Claim(now int64) bool {
	if !a.timer.claim(now) {
		return false
	}
	if a.timed.Load() < peerBound && a.timed.Add(1) == peerBound {
		a.boundFrom.Store(now + 1)
	}
	return true
}

// WantsCalls reports whether fewer than peerBound calls have been timed
// since the average started over: pickers then time the next call placed
// on a peer, so that the wait bound dates from the ramps that ask for it.
func (a *Peers) WantsCalls() bool { return a.timed.Load() < peerBound }

// restart starts the average over at now: its next answers are a new
// warm-up, and its next calls are timed at once.
func (a *Peers) restart(now int64) {
	a.restarted.Store(now)
	a.bits.Store(0)
	a.answers.Store(0)
	a.dropped.Store(0)
	a.timer.lastTimed.Store(0)
	a.boundFrom.Store(0)
	a.timed.Store(0)
}

// Failed notes that a call timed at start failed or never reached its
// server: before the first answer, the calls timed so far bound nothing,
// and the count starts again. A call from before a restart is not its.
func (a *Peers) Failed(start int64) {
	if start >= a.restarted.Load() && a.bits.Load() == 0 {
		a.boundFrom.Store(0)
		a.timed.Store(0)
	}
}

// AtLeast is the average, or before the first answer the wait at now of
// the peerBound-th timed call: a lower bound, 0 when there is neither.
func (a *Peers) AtLeast(now int64) float64 {
	peers, _ := a.Judged(now)
	return peers
}

// Judged is AtLeast, and whether it is the average rather than the wait,
// from one reading.
func (a *Peers) Judged(now int64) (peers float64, average bool) {
	if avg := math.Float64frombits(a.bits.Load()); avg != 0 {
		return avg, true
	}
	if from := a.boundFrom.Load() - 1; from >= 0 && now > from {
		return float64(now - from), false
	}
	return 0, false
}

// RestartIfStale starts the average over if it holds anything and neither
// an answer nor a restart has touched it for peersStale before now, so
// that a ramp is judged against the fleet of the moment.
func (a *Peers) RestartIfStale(now int64) {
	since := max(a.fedAt.Load(), a.restarted.Load())
	if (a.bits.Load() != 0 || a.timed.Load() > 0) && now-since > peersStale {
		a.restart(now)
	}
}
