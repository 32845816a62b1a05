package sim

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	v3orcapb "github.com/cncf/xds/go/xds/data/orca/v3"
	"github.com/pickwise/pickwise/internal/engine"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Request is one unit of work: a unary call, or a long-lived stream.
type Request struct {
	// Seq numbers requests in arrival order from 0.
	Seq int
	// Client is the index of the balancer that places it.
	Client int
	// Key is the request's hash key, when HasKey.
	Key    uint64
	HasKey bool
	// Stream, when positive, makes the request a stream held open this
	// long: it is in flight at its balancer and counts against its backend
	// for the whole lifetime, but needs no service time.
	Stream time.Duration
	// Attempt counts the request's attempts before this one (Run.Retry).
	Attempt int
	// Arrived is when the request's first attempt was made.
	Arrived time.Duration

	// ctx is the context its attempts are picked with, kept across them
	// so that a policy can tell a retry from a first attempt.
	ctx context.Context
}

// Retry is grpc's retryPolicy as the simulator models it: a request whose
// attempt fails with Unavailable is placed again after Backoff, up to
// MaxAttempts attempts in all.
type Retry struct {
	MaxAttempts int
	Backoff     time.Duration
	// Attempts gives each request an attempt record (the attempts
	// package's interceptor), so that pickwise policies place a retry away
	// from the endpoints earlier attempts used.
	Attempts bool
}

// Change replaces the set of backends every client sees, at a given time.
type Change struct {
	At       time.Duration
	Backends []int
}

// Run describes one simulation. The zero value of each field is a sensible
// default where one exists.
type Run struct {
	Seed     uint64
	Backends []Backend
	// Initial lists the backends present at the start; nil means all.
	Initial []int
	// Clients is the number of independent balancers (default 1).
	Clients int
	// Rate is the open-loop arrival rate, requests per second (Poisson).
	Rate float64
	// Requests stops arrivals after that many; Duration stops them at that
	// time. One of the two must be set; both may be. Both count from the
	// start of the run, warm-up included.
	Requests int
	Duration time.Duration
	// Warmup is how long the run goes before it is measured: requests that
	// arrive earlier are placed and served, but the Result's counts,
	// latencies, utilization and offered load cover only what arrives
	// after it (OnDone and OnPick still see every request). A policy that
	// learns before it acts, as pickwise_orca_wrr ignores a backend's
	// reports for its first 10 s (blackout), is then measured in its
	// steady state rather than in its start-up.
	Warmup time.Duration
	// WarmupRate, when positive, is the arrival rate during Warmup: a fleet
	// that warms up off-peak leaves no policy a backlog from its start-up
	// to carry into the measured window.
	WarmupRate float64
	// ProbeRTT is a load probe's round trip (probes.go); 0 means 1 ms.
	ProbeRTT time.Duration
	// Deadline fails a request that has not finished after it (0: none).
	Deadline time.Duration
	// Retry, if set, retries failed attempts.
	Retry *Retry
	// Key gives each request a hash key; nil means none.
	Key func(r *rand.Rand) uint64
	// StreamLife makes every request a stream with the returned lifetime.
	StreamLife func(r *rand.Rand) time.Duration
	// Changes are applied in time order.
	Changes []Change
	// OnDone, if set, sees every request's outcome.
	OnDone func(now time.Duration, req *Request, backend int, latency time.Duration, err error)
	// OnPick, if set, sees every request a policy placed, when its backend
	// admits it. first is a stream's first-message latency, known at once
	// (OnDone sees a stream only when it closes); it is 0 for a unary call.
	OnPick func(now time.Duration, req *Request, backend int, first time.Duration)
}

// Result is what one policy did in one Run. Its counts and measures cover
// the requests that arrived after Run.Warmup.
type Result struct {
	Policy string
	// Picks counts requests placed on each backend.
	Picks []int
	// Failed counts requests that did not succeed (backend error, deadline,
	// or no backend to pick), after their last attempt; Total counts all
	// requests; Attempts counts every attempt placed on a backend.
	Failed, Total, Attempts int
	// Latency holds every successful request's latency (a stream's: its
	// first message's), sorted.
	Latency []time.Duration
	// Utilization is each backend's busy share of its servers while
	// requests arrived: a backend still draining an overload after
	// arrivals stop would look less loaded than it was if the drain
	// counted.
	Utilization []float64
	// Offered is each backend's arrival rate, over the same period,
	// divided by its capacity; unlike utilization it can exceed 1.
	Offered []float64
	// End is the virtual time the run ended.
	End time.Duration
	// Probes counts the load probes the balancers sent (probes.go).
	Probes int
}

// Quantile returns the q-quantile of successful latencies (0 when none).
func (r *Result) Quantile(q float64) time.Duration { return Quantile(r.Latency, q) }

// Quantile is the nearest-rank q-quantile of sorted latencies (0 when
// there are none).
func Quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// Share is backend id's share of placed requests.
func (r *Result) Share(id int) float64 {
	total := 0
	for _, n := range r.Picks {
		total += n
	}
	if total == 0 {
		return 0
	}
	return float64(r.Picks[id]) / float64(total)
}

// ErrorRate is the share of requests that failed.
func (r *Result) ErrorRate() float64 {
	if r.Total == 0 {
		return 0
	}
	return float64(r.Failed) / float64(r.Total)
}

// Execute runs the simulation with policy p. It panics on a malformed Run
// (a programming error in a scenario) and returns an error when the policy
// cannot be built.
func (run Run) Execute(p Policy) (*Result, error) {
	if run.Requests == 0 && run.Duration == 0 {
		panic("sim: Run needs Requests or Duration")
	}
	if run.Rate <= 0 {
		panic("sim: Run needs a positive Rate")
	}
	clients := max(run.Clients, 1)
	s := &state{
		run:   run,
		loop:  &Loop{},
		rand:  rand.New(rand.NewPCG(run.Seed, run.Seed^0x5eed)),
		res:   &Result{Policy: p.Name, Picks: make([]int, len(run.Backends))},
		insts: make([]instance, clients),
	}
	rtt := run.ProbeRTT
	if rtt == 0 {
		rtt = defaultProbeRTT
	}
	e := &env{loop: s.loop, rand: rand.New(rand.NewPCG(run.Seed+1, run.Seed^0xba1)), seed: run.Seed, backends: run.Backends,
		prober: prober{state: s, rtt: rtt}}
	initial := run.Initial
	if initial == nil {
		initial = make([]int, len(run.Backends))
		for i := range initial {
			initial[i] = i
		}
	}
	s.servers = make([]*server, len(run.Backends))
	for i, b := range run.Backends {
		s.servers[i] = &server{spec: b, id: i, load: newLoadGauge(b, run.Seed, i)}
	}
	e.servers = s.servers
	for c := range s.insts {
		in, err := p.newInstance(e)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p.Name, err)
		}
		if err := in.setBackends(initial); err != nil {
			return nil, fmt.Errorf("%s: %w", p.Name, err)
		}
		s.insts[c] = in
	}
	defer func() {
		for _, in := range s.insts {
			in.close()
		}
	}()

	for _, ch := range run.Changes {
		s.loop.At(ch.At, func() {
			for _, id := range ch.Backends {
				if !slices.Contains(s.present, id) {
					s.servers[id].joinedAt = s.loop.Now()
				}
			}
			s.present = slices.Clone(ch.Backends)
			for _, in := range s.insts {
				if err := in.setBackends(ch.Backends); err != nil {
					s.err = err
				}
			}
		})
	}
	if run.Warmup > 0 {
		s.loop.At(run.Warmup, func() {
			for _, srv := range s.servers {
				srv.accountBusy(s.loop.Now())
				srv.warmBusy, srv.warmServed = srv.busyTime, srv.served
			}
		})
	}
	s.present = slices.Clone(initial)
	s.scheduleArrival()
	s.loop.RunAll()
	if s.err != nil {
		return nil, fmt.Errorf("%s: %w", p.Name, s.err)
	}

	s.res.End = s.loop.Now()
	slices.Sort(s.res.Latency)
	return s.res, nil
}

// closeWindow measures each backend's load over the period requests
// arrived after the warm-up, which ends now.
func (s *state) closeWindow() {
	end, from := s.loop.Now(), s.run.Warmup
	s.res.Utilization = make([]float64, len(s.servers))
	s.res.Offered = make([]float64, len(s.servers))
	if end <= from {
		return
	}
	for i, srv := range s.servers {
		s.res.Utilization[i] = srv.utilization(from, end)
		if cap := srv.capacity(); cap > 0 {
			s.res.Offered[i] = float64(srv.served-srv.warmServed) / (end - from).Seconds() / cap
		}
	}
}

// state is one Execute's mutable state.
type state struct {
	run     Run
	loop    *Loop
	rand    *rand.Rand
	res     *Result
	insts   []instance
	servers []*server
	present []int
	seq     int
	err     error
}

// scheduleArrival schedules the next open-loop arrival.
func (s *state) scheduleArrival() {
	rate := s.run.Rate
	warming := s.run.WarmupRate > 0 && s.loop.Now() < s.run.Warmup
	if warming {
		rate = s.run.WarmupRate
	}
	gap := time.Duration(s.rand.ExpFloat64() / rate * float64(time.Second))
	at := s.loop.Now() + gap
	if s.run.Requests > 0 && s.seq >= s.run.Requests {
		s.closeWindow() // at the last arrival
		return
	}
	if s.run.Duration > 0 && at > s.run.Duration {
		s.loop.At(s.run.Duration, s.closeWindow)
		return
	}
	if warming && at >= s.run.Warmup {
		// Arrivals are memoryless: the first at the peak rate is drawn
		// from the instant the rate changes.
		s.loop.At(s.run.Warmup, s.scheduleArrival)
		return
	}
	s.loop.At(at, func() {
		s.arrive()
		s.scheduleArrival()
	})
}

func (s *state) arrive() {
	req := &Request{Seq: s.seq, Client: s.seq % len(s.insts), Arrived: s.loop.Now()}
	s.seq++
	if s.run.Key != nil {
		req.Key, req.HasKey = s.run.Key(s.rand), true
	}
	if s.run.StreamLife != nil {
		req.Stream = s.run.StreamLife(s.rand)
	}
	if s.loop.Now() >= s.run.Warmup {
		s.res.Total++
	}
	s.place(req)
}

// place makes one attempt of req.
func (s *state) place(req *Request) {
	measured := req.Arrived >= s.run.Warmup
	if s.run.Retry != nil && s.run.Retry.Attempts && req.ctx == nil {
		req.ctx = engine.WithAttempts(context.Background())
	}
	id, done, err := s.insts[req.Client].pick(req)
	if err != nil {
		s.finish(&call{req: req, started: s.loop.Now()}, -1, status.Error(codes.Unavailable, err.Error()), nil)
		return
	}
	if measured {
		s.res.Picks[id]++
		s.res.Attempts++
	}
	c := &call{req: req, srv: s.servers[id], started: s.loop.Now(), done: done}
	if s.run.Deadline > 0 && req.Stream == 0 {
		// The deadline is the call's, as grpc's is: a retry gets what its
		// earlier attempts left of it.
		c.deadline = s.loop.After(max(0, req.Arrived+s.run.Deadline-s.loop.Now()), func() { s.expire(c) })
	}
	s.admit(c)
}

// admit hands a call to its backend.
func (s *state) admit(c *call) {
	srv := c.srv
	srv.served++
	now := s.loop.Now()
	c.tok, c.admitted = srv.est.Begin(), now
	if c.req.Stream > 0 {
		srv.streams++
		srv.load.change(now, +1)
		lat := srv.serviceTime(now, s.rand)
		if srv.spec.Servers > 0 {
			lat = time.Duration(float64(lat) * max(1, float64(srv.streams)/float64(srv.spec.Servers)))
		}
		if c.started >= s.run.Warmup {
			s.res.Latency = append(s.res.Latency, lat)
		}
		if s.run.OnPick != nil {
			s.run.OnPick(now, c.req, srv.id, lat)
		}
		s.loop.After(c.req.Stream, func() {
			now := s.loop.Now()
			srv.streams--
			srv.load.change(now, -1)
			srv.load.complete(now, false)
			srv.est.Drop(c.tok)
			s.finish(c, srv.id, nil, srv.withLoad(now, srv.load.current(now)))
		})
		return
	}
	if s.run.OnPick != nil {
		s.run.OnPick(now, c.req, srv.id, 0)
	}
	if srv.fails(now, s.rand) {
		srv.failed++
		code := srv.spec.FailCode
		if code == codes.OK {
			code = codes.Unavailable
		}
		// A fast failure does no service, but answering it holds a worker
		// for FailAfter: the gauge sees a little busy time.
		srv.load.change(now, +1)
		s.loop.After(srv.spec.FailAfter, func() {
			now := s.loop.Now()
			srv.load.change(now, -1)
			srv.load.complete(now, true)
			srv.est.Drop(c.tok)
			s.finish(c, srv.id, status.Error(code, "backend failed"), srv.withLoad(now, srv.load.current(now)))
		})
		return
	}
	if srv.spec.Servers > 0 && srv.busy >= srv.spec.Servers {
		c.queued = true
		srv.queue = append(srv.queue, c)
		srv.waiting++
		srv.maxQueued = max(srv.maxQueued, len(srv.queue))
		return
	}
	s.serve(c)
}

// serve starts service on a free server.
func (s *state) serve(c *call) {
	srv := c.srv
	now := s.loop.Now()
	srv.accountBusy(now)
	srv.busy++
	srv.load.change(now, +1)
	s.loop.After(srv.serviceTime(now, s.rand), func() {
		now := s.loop.Now()
		srv.accountBusy(now)
		srv.busy--
		srv.load.change(now, -1)
		// An answer after the client gave up ends, on the server, with
		// DeadlineExceeded: its counters see a failure.
		srv.load.complete(now, c.finished)
		srv.est.End(c.tok, now, now-c.admitted)
		s.finish(c, srv.id, nil, srv.withLoad(now, srv.load.current(now)))
		// The freed server takes the oldest call still waiting.
		for len(srv.queue) > 0 {
			next := srv.queue[0]
			srv.queue = srv.queue[1:]
			if next.finished {
				// Its client gave up while it waited; the server ends it
				// with DeadlineExceeded as it takes it up.
				srv.load.complete(now, true)
				srv.est.Drop(next.tok)
				continue
			}
			next.queued = false
			srv.waiting--
			s.serve(next)
			break
		}
	})
}

// expire fails a call at its deadline, as the client does; a call still in
// its backend's queue is dropped there, since grpc cancels it server-side.
func (s *state) expire(c *call) {
	if c.finished {
		return
	}
	if c.queued {
		// It stays in the queue until the server reaches it and skips it.
		c.queued = false
		c.srv.waiting--
	}
	// The client's deadline fires before any answer, so no load report
	// reaches it.
	s.finish(c, c.srv.id, status.Error(codes.DeadlineExceeded, "deadline exceeded"), nil)
}

// finish records a call's outcome once and runs the balancer's Done with
// the backend's load report, if the answer carried one.
func (s *state) finish(c *call, backend int, err error, load *v3orcapb.OrcaLoadReport) {
	if c.finished {
		return
	}
	c.finished = true
	if c.deadline != nil {
		c.deadline.cancelled = true
	}
	now := s.loop.Now()
	lat := now - c.req.Arrived
	if c.done != nil {
		c.done(err, load)
	}
	if r := s.run.Retry; r != nil && err != nil && status.Code(err) == codes.Unavailable && c.req.Attempt+1 < r.MaxAttempts &&
		(s.run.Deadline == 0 || now+r.Backoff < c.req.Arrived+s.run.Deadline) {
		req := c.req
		req.Attempt++
		s.loop.After(r.Backoff, func() { s.place(req) })
		return
	}
	if c.req.Arrived >= s.run.Warmup {
		if err != nil {
			s.res.Failed++
		} else if c.req.Stream == 0 {
			s.res.Latency = append(s.res.Latency, lat)
		}
	}
	if s.run.OnDone != nil {
		s.run.OnDone(now, c.req, backend, lat, err)
	}
}
