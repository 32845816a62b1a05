package shadow

import (
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pickwise/pickwise/internal/engine"
	"github.com/pickwise/pickwise/internal/procid"
	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/codes"
	estats "google.golang.org/grpc/experimental/stats"
	"google.golang.org/grpc/status"
)

// The arms of a canary, and what a sampled prediction was.
const (
	armLive = iota
	armCanary
)

const (
	predictionAgree = iota
	predictionDisagree
	predictionNone
)

var (
	armNames        = [2]string{"live", "canary"}
	predictionNames = [3]string{"agree", "disagree", "none"}
)

// errNotSent is the outcome a candidate's Done is given for a call it
// chose and did not place: a client-side status with nothing sent, which
// pickwise's policies and grpc's ignore as evidence about the endpoint.
var errNotSent = status.Error(codes.Canceled, Name+": not sent: the candidate's choice is only recorded")

// recorder keeps the shadow's counts, for Summary and the metrics. It
// lives as long as the balancer; reset starts the counts over when a
// child changes.
type recorder struct {
	metrics estats.MetricsRecorder // nil: none recorded
	target  string
	rnd     engine.Rand
	timing  timing // the clock: which calls read it, and the latest reading
	conns   *conns

	// held is the per-P shards: the candidate's Dones for predictions
	// not yet due, and the compared picks and their live calls not yet
	// counted (recorder.compare).
	held      *releases
	labels    atomic.Pointer[labelSet]
	fallbacks atomic.Int64 // canary picks the candidate could not place

	// mu guards the names, rates and counts' origin below. It is held
	// across the whole of reset and summary, so that a Summary's counts
	// are those of the origin it carries (Summary.Since); it is taken
	// before the shards' and the conns' locks, never under them.
	mu         sync.Mutex
	live, cand string
	// origin tells these counts from those of other recorders, and of
	// this one before a reset (Summary.Since).
	origin      countsOrigin
	sampleRate  float64
	canaryShare float64

	noPrediction atomic.Int64 // the compared picks are counted by endpoint
	// arms are each arm's calls; the live arm's calls counts the
	// recorded ones that are not compared picks, which the shards count.
	arms [2]armCounts
}

type armCounts struct {
	calls, failed atomic.Int64
	timed         atomic.Int64 // the calls that were timed
	nanos         atomic.Int64 // their summed latency
}

func newRecorder(cc balancer.ClientConn, target string, rnd engine.Rand, clock engine.Clock, c *conns) *recorder {
	r := &recorder{target: target, rnd: rnd, timing: timing{clock: clock}, conns: c, held: newReleases(engine.PerPSlots(rnd, maxShards), rnd)}
	r.origin.recorder = recorderSeq.Add(1)
	c.rec = r
	r.labels.Store(newLabelSet(target, ""))
	if m := engine.MetricsRecorderOf(cc); m != nil {
		r.metrics = m
	}
	return r
}

// setLocality rebuilds the metrics' labels when the xDS locality changes.
func (r *recorder) setLocality(loc string) {
	if r.labels.Load().loc != loc {
		r.labels.Store(newLabelSet(r.target, loc))
	}
}

// labelSet is every label list the metrics record with, built once per
// locality: passed whole to Record, a list costs no allocation per call.
type labelSet struct {
	loc         string
	predictions [3][]string
	calls       [2][codeCount][]string
	duration    [2][]string
}

// codeCount is the number of grpc status codes, 0 to 16.
const codeCount = 17

func newLabelSet(target, loc string) *labelSet {
	ls := &labelSet{loc: loc}
	for i, name := range predictionNames {
		ls.predictions[i] = []string{target, name, loc}
	}
	for arm, name := range armNames {
		ls.duration[arm] = []string{target, name, loc}
		for code := range codeCount {
			ls.calls[arm][code] = []string{target, name, codes.Code(code).String(), loc}
		}
	}
	return ls
}

// endpointLabels are one endpoint's label lists for endpoint_picks.
type endpointLabels struct {
	set        *labelSet
	live, cand []string
}

// endpointLabelsFor returns rc's lists under ls, building them on first
// use and after a locality change.
func (r *recorder) endpointLabelsFor(rc *realConn, ls *labelSet) *endpointLabels {
	if el := rc.labels.Load(); el != nil && el.set == ls {
		return el
	}
	el := &endpointLabels{set: ls, live: []string{r.target, "live", rc.addr, ls.loc}, cand: []string{r.target, "candidate", rc.addr, ls.loc}}
	rc.labels.Store(el)
	return el
}

func (r *recorder) setRates(sample, canaryPercent float64) {
	r.mu.Lock()
	r.sampleRate, r.canaryShare = sample, canaryPercent
	r.mu.Unlock()
}

// reset starts every count over, for a new pair of children.
func (r *recorder) reset(live, cand string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.live, r.cand = live, cand
	r.origin.resets++
	r.noPrediction.Store(0)
	for i := range r.arms {
		r.arms[i].calls.Store(0)
		r.arms[i].failed.Store(0)
		r.arms[i].timed.Store(0)
		r.arms[i].nanos.Store(0)
	}
	r.fallbacks.Store(0)
	// Every shard's lock is held while the counts start over, so that no
	// list is counted between the lists' clearing and the counts'.
	for i := range r.held.shards {
		s := &r.held.shards[i]
		s.mu.Lock()
		clear(s.compared)
		s.compared, s.liveCalls = s.compared[:0], 0
	}
	c := r.conns
	c.mu.Lock()
	c.countsMu.Lock()
	for rc := range c.all {
		rc.agreed, rc.liveOnly, rc.candidateOnly = 0, 0, 0
	}
	c.retiredCompared, c.retiredAgreed = 0, 0
	c.countsMu.Unlock()
	c.mu.Unlock()
	for i := range r.held.shards {
		r.held.shards[i].mu.Unlock()
	}
}

// noPredictionFor counts a sampled pick the candidate could not place.
func (r *recorder) noPredictionFor() {
	r.noPrediction.Add(1)
	r.predictionMetrics(predictionNone, nil, nil)
}

// predictionMetrics records one sampled pick's metrics: what the
// candidate answered, and, when it chose an endpoint, the endpoints of
// both.
func (r *recorder) predictionMetrics(outcome int, live, cand *realConn) {
	if r.metrics == nil {
		return
	}
	ls := r.labels.Load()
	predictionsMetric.Record(r.metrics, 1, ls.predictions[outcome]...)
	if live != nil {
		endpointPicksMetric.Record(r.metrics, 1, r.endpointLabelsFor(live, ls).live...)
		endpointPicksMetric.Record(r.metrics, 1, r.endpointLabelsFor(cand, ls).cand...)
	}
}

// track counts a call placed by arm on rc and returns res with a Done that
// records the call's outcome and then calls res's own Done. For a live
// call whose address the candidate holds, the outcome also feeds the
// candidate's evidence about it, if the candidate is a pickwise policy.
// bits are spare bits of the pick's draw, which choose whether the call is
// timed (see timing). canary says a canary runs: a live call is then
// counted in the candidate's in-flight calls on rc until it ends (load).
// A canary's call is counted in live's, if live takes load there.
func (r *recorder) track(res balancer.PickResult, arm int, rc *realConn, bits uint32, canary bool) balancer.PickResult {
	r.arms[arm].calls.Add(1)
	var feed *childFeed
	switch {
	case arm == armCanary:
		feed = startLoad(rc.liveFeed.Load())
	case canary:
		feed = startLoad(rc.candidateFeed.Load())
	}
	return r.wrap(res, arm, rc, nil, nil, bits, r.timing.timed(bits), 0, feed)
}

// startLoad counts a call's start in f, either child's feed for the
// call's address, and returns f, which its end is to be told through; nil
// if f is nil or takes no load (the child is not a pickwise policy, or
// one whose picker does not compare loads, as ring hash's bounded load
// does not).
func startLoad(f *childFeed) *childFeed {
	if f == nil || f.Load == nil {
		return nil
	}
	f.Load(true)
	return f
}

// load returns res, a live call on rc that no record follows, counted in
// the candidate's in-flight calls on rc until it ends: every live call
// is, while a canary runs, so that the candidate places the canary's calls
// seeing live's load beside its own, as it would see all of it live.
func load(res balancer.PickResult, rc *realConn) balancer.PickResult {
	f := startLoad(rc.candidateFeed.Load())
	switch {
	case f == nil:
	case res.Done == nil:
		res.Done = f.loadDone
	default:
		e := loadEndPool.Get().(*loadEnd)
		e.feed, e.own = f, res.Done
		res.Done = e.done
	}
	return res
}

// loadEnd ends a loaded live call that has a Done of live's, pooled.
type loadEnd struct {
	feed *childFeed
	own  func(balancer.DoneInfo)
	done func(balancer.DoneInfo) // e.finish, bound once
}

// loadEndPool is set up with trackPool, in init.
var loadEndPool sync.Pool

func (e *loadEnd) finish(info balancer.DoneInfo) {
	feed, own := e.feed, e.own
	e.feed, e.own = nil, nil
	loadEndPool.Put(e)
	own(info)
	feed.Load(false)
}

// wrap is track for a call already counted, and known to be timed or not;
// start is a timed call's reading if taken already, 0 if not. candDone, if
// not nil, is the candidate's Done for a sampled prediction of cand that
// waits for the call's end (recorder.compare): it is then called with the
// call's outcome if cand is rc and the candidate takes no evidence feed,
// and otherwise with errNotSent, at once or once a call on cand would have
// ended (see releases). loaded, if not nil, is the child feed the call's
// start was counted in (the candidate's for a live call, live's for a
// canary's), to be told of its end.
func (r *recorder) wrap(res balancer.PickResult, arm int, rc *realConn, cand *realConn, candDone func(balancer.DoneInfo), bits uint32, timed bool, start int64, loaded *childFeed) balancer.PickResult {
	t := trackPool.Get().(*tracked)
	if timed {
		if start == 0 {
			start = r.timing.pickReading()
		}
		t.start, t.timed = start, true
		// A new reading may have made the pending predictions due, in
		// other Ps' shards too. An untimed pick collects only its own
		// P's shard, and only if it is compared (recorder.compare).
		r.held.collect(procid.Hint(), t.start, bits>>8)
	} else {
		t.start = r.timing.latest.Load()
	}
	t.rec, t.arm, t.real = r, arm, rc
	t.own, t.candReal, t.cand, t.loaded = res.Done, cand, candDone, loaded
	res.Done = t.done
	return res
}

// tracked is one recorded call, pooled so that a sampled pick allocates
// nothing once the pool is warm.
type tracked struct {
	rec            *recorder
	arm            int
	real, candReal *realConn
	start          int64 // the pick's reading; the latest one if not timed
	timed          bool
	own, cand      func(balancer.DoneInfo)
	loaded         *childFeed              // see wrap
	done           func(balancer.DoneInfo) // t.finish, bound once
}

var trackPool sync.Pool

// Set here rather than in the declarations: each New binds a finish that
// refers to its pool.
func init() {
	trackPool.New = func() any {
		t := &tracked{}
		t.done = t.finish
		return t
	}
	loadEndPool.New = func() any {
		e := &loadEnd{}
		e.done = e.finish
		return e
	}
}

// recycle returns t to its pool, cleared but for its bound Done.
func (t *tracked) recycle() {
	*t = tracked{done: t.done}
	trackPool.Put(t)
}

func (t *tracked) finish(info balancer.DoneInfo) {
	r, arm, rc, candReal, start, timed, own, cand, loaded := t.rec, t.arm, t.real, t.candReal, t.start, t.timed, t.own, t.cand, t.loaded
	t.recycle() // read out: back to the pool for the next sampled pick on this core
	proc := procid.Hint()
	var now, took int64 // took stays 0 for an untimed call: no latency
	if timed {
		now = r.timing.endReading()
		took = now - start
	} else {
		now = r.timing.latest.Load()
	}
	a := &r.arms[arm]
	if info.Err != nil {
		a.failed.Add(1)
	}
	if timed {
		a.timed.Add(1)
		a.nanos.Add(took)
		if info.Err == nil {
			rc.latency.add(took)
		}
	}
	r.callMetrics(arm, info.Err, timed, took)
	if own != nil {
		own(info)
	}
	if loaded != nil {
		loaded.Load(false)
	}
	var observe *childFeed
	if arm == armLive {
		observe = rc.candidateFeed.Load()
	}
	if observe != nil {
		// An untimed call's took is 0, which the candidate's engine takes
		// as an outcome without a latency sample.
		observe.Outcome(info, took)
	}
	if cand != nil {
		switch {
		case candReal == rc && observe == nil:
			// The candidate chose this endpoint and has no other way to
			// learn how the call went.
			cand(info)
		case candReal == rc:
			cand(balancer.DoneInfo{Err: errNotSent})
		default:
			// Untimed, start and now are both the latest reading at the
			// time, as late as each other on average (see timing).
			if est := candReal.latency.get(); est != 0 && start+est > now {
				r.held.hold(proc, start+est, cand)
			} else {
				cand(balancer.DoneInfo{Err: errNotSent})
			}
		}
	}
	// A timed end's new reading may have made Dones due; other Ps'
	// shards wait for a timed pick, whose spare bits choose them.
	r.held.drain(proc, now)
}

// callMetrics records a recorded call's end in the metrics, if any: its
// status, and its duration if timed.
func (r *recorder) callMetrics(arm int, err error, timed bool, took int64) {
	if r.metrics == nil {
		return
	}
	ls := r.labels.Load()
	code := status.Code(err)
	if code >= codeCount {
		code = codes.Unknown
	}
	callsMetric.Record(r.metrics, 1, ls.calls[arm][code]...)
	if timed {
		durationMetric.Record(r.metrics, float64(took)/1e9, ls.duration[arm]...)
	}
}

// summary reads the counts.
func (r *recorder) summary() Summary {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := Summary{Target: r.target, Live: r.live, Candidate: r.cand, SampleRate: r.sampleRate, CanaryPercent: r.canaryShare, origin: r.origin}
	s.NoPrediction = r.noPrediction.Load()
	s.CanaryFallbacks = r.fallbacks.Load()
	// Ends are read before placements, so that a call placed and ended
	// while Summary reads is in Calls if it is in Failed.
	for i, arm := range []*ArmStats{&s.LiveArm, &s.CanaryArm} {
		arm.Failed = r.arms[i].failed.Load()
		arm.Timed = r.arms[i].timed.Load()
		arm.TotalLatency = time.Duration(r.arms[i].nanos.Load())
	}
	c := r.conns
	for i := range r.held.shards {
		sh := &r.held.shards[i]
		sh.mu.Lock()
		sh.countComparedLocked(c)
		s.LiveArm.Calls += sh.liveCalls
		sh.mu.Unlock()
	}
	for i, arm := range []*ArmStats{&s.LiveArm, &s.CanaryArm} {
		arm.Calls += r.arms[i].calls.Load()
	}
	c.mu.Lock()
	c.countsMu.Lock()
	s.Compared, s.Agreed = c.retiredCompared, c.retiredAgreed
	for rc := range c.all {
		agreed, live := rc.agreed, rc.liveOnly
		s.Compared += agreed + live
		s.Agreed += agreed
		s.Endpoints = append(s.Endpoints, EndpointPicks{Addr: rc.addr, Live: agreed + live, Candidate: agreed + rc.candidateOnly, conn: rc.seq})
	}
	c.countsMu.Unlock()
	c.mu.Unlock()
	sort.Slice(s.Endpoints, func(i, j int) bool { return s.Endpoints[i].Addr < s.Endpoints[j].Addr })
	return s
}
