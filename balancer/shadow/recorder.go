package shadow

import (
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pickwise/pickwise/internal/engine"
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
	clock   engine.Clock
	conns   *conns

	locality  atomic.Pointer[string]
	fallbacks atomic.Int64 // canary picks the candidate could not place

	mu          sync.Mutex // guards the names and rates below
	live, cand  string
	sampleRate  float64
	canaryShare float64

	predictions [3]atomic.Int64
	arms        [2]armCounts
}

type armCounts struct {
	calls, failed atomic.Int64
	nanos         atomic.Int64 // summed latency
}

func newRecorder(cc balancer.ClientConn, target string, rnd engine.Rand, clock engine.Clock, c *conns) *recorder {
	r := &recorder{target: target, rnd: rnd, clock: clock, conns: c}
	if m := cc.MetricsRecorder(); m != nil {
		r.metrics = m
	}
	return r
}

func (r *recorder) setLocality(loc string) { r.locality.Store(&loc) }

func (r *recorder) loc() string {
	if p := r.locality.Load(); p != nil {
		return *p
	}
	return ""
}

func (r *recorder) setRates(sample, canaryPercent float64) {
	r.mu.Lock()
	r.sampleRate, r.canaryShare = sample, canaryPercent
	r.mu.Unlock()
}

// reset starts every count over, for a new pair of children.
func (r *recorder) reset(live, cand string) {
	r.mu.Lock()
	r.live, r.cand = live, cand
	r.mu.Unlock()
	for i := range r.predictions {
		r.predictions[i].Store(0)
	}
	for i := range r.arms {
		r.arms[i].calls.Store(0)
		r.arms[i].failed.Store(0)
		r.arms[i].nanos.Store(0)
	}
	r.fallbacks.Store(0)
	r.conns.mu.Lock()
	for rc := range r.conns.all {
		rc.livePicks.Store(0)
		rc.candidatePicks.Store(0)
	}
	r.conns.mu.Unlock()
}

// predicted counts one sampled pick: what the candidate answered, and,
// when it chose an endpoint, the endpoints of both.
func (r *recorder) predicted(outcome int, live, cand *realConn) {
	r.predictions[outcome].Add(1)
	if live != nil {
		live.livePicks.Add(1)
		cand.candidatePicks.Add(1)
	}
	if r.metrics == nil {
		return
	}
	loc := r.loc()
	predictionsMetric.Record(r.metrics, 1, r.target, predictionNames[outcome], loc)
	if live != nil {
		endpointPicksMetric.Record(r.metrics, 1, r.target, "live", live.addr, loc)
		endpointPicksMetric.Record(r.metrics, 1, r.target, "candidate", cand.addr, loc)
	}
}

// track returns res with a Done that records the call's outcome for arm
// and then calls res's own Done; candDone, if not nil, is the candidate's
// Done for a sampled prediction, called with the call's outcome when the
// candidate chose the same endpoint (agree), since it then learns what
// placing it would have taught it, and with errNotSent otherwise.
func (r *recorder) track(res balancer.PickResult, arm int, candDone func(balancer.DoneInfo), agree bool) balancer.PickResult {
	t := trackPool.Get().(*tracked)
	t.rec, t.arm, t.start = r, arm, r.clock.Nanotime()
	t.own, t.cand, t.agree = res.Done, candDone, agree
	res.Done = t.done
	return res
}

// tracked is one recorded call, pooled so that a sampled pick allocates
// nothing once the pool is warm.
type tracked struct {
	rec       *recorder
	arm       int
	start     int64
	own, cand func(balancer.DoneInfo)
	agree     bool
	done      func(balancer.DoneInfo) // t.finish, bound once
}

var trackPool sync.Pool

func init() {
	trackPool.New = func() any {
		t := &tracked{}
		t.done = t.finish
		return t
	}
}

func (t *tracked) finish(info balancer.DoneInfo) {
	r, arm, start, own, cand, agree := t.rec, t.arm, t.start, t.own, t.cand, t.agree
	*t = tracked{done: t.done}
	trackPool.Put(t)
	took := r.clock.Nanotime() - start
	a := &r.arms[arm]
	a.calls.Add(1)
	a.nanos.Add(took)
	code := status.Code(info.Err)
	if info.Err != nil {
		a.failed.Add(1)
	}
	if r.metrics != nil {
		loc := r.loc()
		callsMetric.Record(r.metrics, 1, r.target, armNames[arm], code.String(), loc)
		durationMetric.Record(r.metrics, float64(took)/1e9, r.target, armNames[arm], loc)
	}
	if own != nil {
		own(info)
	}
	if cand != nil {
		if agree {
			cand(info)
		} else {
			cand(balancer.DoneInfo{Err: errNotSent})
		}
	}
}

// summary reads the counts.
func (r *recorder) summary() Summary {
	r.mu.Lock()
	s := Summary{Target: r.target, Live: r.live, Candidate: r.cand, SampleRate: r.sampleRate, CanaryPercent: r.canaryShare}
	r.mu.Unlock()
	s.Agreed = r.predictions[predictionAgree].Load()
	s.Compared = s.Agreed + r.predictions[predictionDisagree].Load()
	s.NoPrediction = r.predictions[predictionNone].Load()
	s.CanaryFallbacks = r.fallbacks.Load()
	for i, arm := range []*ArmStats{&s.LiveArm, &s.CanaryArm} {
		arm.Calls = r.arms[i].calls.Load()
		arm.Failed = r.arms[i].failed.Load()
		arm.TotalLatency = time.Duration(r.arms[i].nanos.Load())
	}
	r.conns.mu.Lock()
	for rc := range r.conns.all {
		s.Endpoints = append(s.Endpoints, EndpointPicks{Addr: rc.addr, Live: rc.livePicks.Load(), Candidate: rc.candidatePicks.Load()})
	}
	r.conns.mu.Unlock()
	sort.Slice(s.Endpoints, func(i, j int) bool { return s.Endpoints[i].Addr < s.Endpoints[j].Addr })
	return s
}
