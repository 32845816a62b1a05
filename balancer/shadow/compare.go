package shadow

import (
	"github.com/pickwise/pickwise/internal/procid"
	"google.golang.org/grpc/balancer"
)

// compareLog is how many compared picks a shard lists before it counts
// them on their endpoints (conns.count), under the shared counts' lock
// once for all of them.
const compareLog = 256

// compare records a compared pick: live placed res on rc, and the
// candidate chose crc, candDone being its Done (nil if it gave none). It
// returns res with the Done that records the call.
//
// What a compared pick records is written under its P's shard lock, taken
// once, and no counter shared between Ps is written: the pick is listed
// for counting, the sampled live call counted, the candidate's prediction
// held until a call on crc would have ended (crc's recent latency from
// now), and the predictions due by now taken out to run. An untimed call whose live
// Done is nil then needs no record of its own: its end is rc's bound
// liveDone. A call that is timed, or has a live Done to call, takes a
// pooled record (wrap). The prediction waits for the call's end instead
// when there is no latency for crc yet, or when the candidate chose rc
// and learns how calls went only through its Done (no outcome feed):
// it is then given the call's outcome. (A timed pick still stores its
// reading for others to take, and metrics, if any, are recorded outside
// the lock.)
//
// bits are the pick's spare draw bits when drawn is set; otherwise the
// pick took no draw and the shard's xorshift gives them. canary says a
// canary runs: the live call is then counted in the candidate's in-flight
// calls (load), and its prediction is let go at once.
func (r *recorder) compare(res balancer.PickResult, rc, crc *realConn, candDone func(balancer.DoneInfo), bits uint32, drawn, canary bool) balancer.PickResult {
	outcome := predictionDisagree
	if crc == rc {
		outcome = predictionAgree
	}
	r.predictionMetrics(outcome, rc, crc)
	// A call known to be timed before the lock starts from a reading of
	// its own, as does the prediction held: when calls are sparse, every
	// one is timed (shift 0), and the latest reading may be from long
	// ago. When they are not, the latest is recent enough to hold by
	// (timing), and the shard's bits may choose the call after all.
	shift := r.timing.shift.Load()
	timed, start := false, int64(0)
	if drawn || shift == 0 {
		if timed = r.timing.timedAt(bits, shift); timed {
			start = r.timing.pickReading()
		}
	}
	now := start
	if !timed {
		now = r.timing.latest.Load()
	}
	est := crc.latency.get()
	feed := rc.candidateFeed.Load()
	var loaded *childFeed
	if canary {
		// The candidate sees this call's load for real: a held
		// prediction would count it twice.
		if loaded = startLoad(feed); loaded != nil && candDone != nil {
			candDone(balancer.DoneInfo{Err: errNotSent})
			candDone = nil
		}
	}
	atEnd := candDone != nil && (est == 0 || (crc == rc && feed == nil))
	s := r.held.shard(procid.Hint())
	var due [drainBatch]func(balancer.DoneInfo)
	s.mu.Lock()
	if !drawn {
		// Spare bits also choose the shards a timed pick collects.
		bits = s.nextBits()
		if shift != 0 {
			timed = r.timing.timedAt(bits, shift)
		}
	}
	s.liveCalls++
	s.compared = append(s.compared, comparison{live: rc, cand: crc})
	if len(s.compared) == compareLog {
		s.countComparedLocked(r.conns)
	}
	if candDone != nil && !atEnd {
		// Untimed, now is the latest reading, as late as the ones the
		// later picks that find it due take (see timing).
		s.holdLocked(now+est, candDone)
	}
	n := s.takeDueLocked(now, &due)
	s.mu.Unlock()
	for _, done := range due[:n] {
		done(balancer.DoneInfo{Err: errNotSent})
	}
	if n == len(due) {
		s.collect(now, false) // more may be due
	}
	if !timed && !atEnd && res.Done == nil && loaded == nil {
		res.Done = rc.liveDone
		return res
	}
	if !atEnd {
		crc, candDone = nil, nil
	}
	return r.wrap(res, armLive, rc, crc, candDone, bits, timed, start, loaded)
}

// finishLive is rc's liveDone: the end of a sampled live call that is
// untimed and had no Done of live's, its prediction held at the pick.
func (rc *realConn) finishLive(info balancer.DoneInfo) {
	r := rc.owner.rec
	if info.Err != nil {
		r.arms[armLive].failed.Add(1)
	}
	r.callMetrics(armLive, info.Err, false, 0)
	if observe := rc.candidateFeed.Load(); observe != nil {
		// An untimed call's duration is 0: an outcome without a
		// latency sample.
		observe.Outcome(info, 0)
	}
}
