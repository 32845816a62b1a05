package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pickwise/pickwise/internal/fakecc"
	"github.com/pickwise/pickwise/metrics"
	"github.com/pickwise/pickwise/sim"
	"google.golang.org/grpc"
	"google.golang.org/grpc/stats"

	_ "github.com/pickwise/pickwise/balancer/shadow"
	_ "github.com/pickwise/pickwise/balancer/subset"
)

// The lab's graceful drain: the step of a rolling restart, over and over.
// Five backends answer in about 100 ms. Every policy has a client channel
// of its own, all at once, each sending 100 calls a second open loop
// (drainDefault), so that about two calls of each channel are in flight
// on each backend at any moment. One backend at a time is shut down with
// grpc's GracefulStop (a GOAWAY on every connection; the calls in flight
// run to their end), stays down for drainDown, serves again on the same
// address as a new process would, and drainNext later the next one
// drains, as a rollout that waits that long after each server is up.
const (
	drainBackends = 5
	drainDrains   = 10
	// drainFirst is the traffic before the first drain: it outlasts the
	// ORCA columns' 1 s blackout, so that their weights are in use.
	drainFirst = 1500 * time.Millisecond
	drainDown  = 200 * time.Millisecond
	drainNext  = 4 * time.Second
	// drainGrace bounds a drain: calls still running then are cut. The
	// backends' calls take well under a second.
	drainGrace = 5 * time.Second
)

// drainLoad is what each channel of the drain scenario sends: calls a
// second, and how long a backend takes to answer one.
type drainLoad struct {
	rate    float64
	latency time.Duration
}

// drainDefault is the lab's load: about two calls of each channel in
// flight on each backend.
var drainDefault = drainLoad{rate: 100, latency: 100 * time.Millisecond}

// drainLoad is the drain scenario's load: l.drain, or drainDefault.
func (l *lab) drainLoad() drainLoad {
	if l.drain.rate > 0 {
		return l.drain
	}
	return drainDefault
}

// drainWindows are the windows a returning backend's share is read over,
// from its first call back: [0, 0.5 s), [0.5 s, 1 s), [1 s, 2 s),
// [2 s, 3 s). All end before the next drain, since the client reconnects
// within grpc's first backoff (1 s ± 20%) of the GOAWAY.
var drainWindows = []time.Duration{0, 500 * time.Millisecond, time.Second, 2 * time.Second, 3 * time.Second}

// drainPolicies are the drain scenario's columns: grpc-go's, then
// pickwise's. Calls carry a key, for the hash policy.
var drainPolicies = []labPolicy{
	roundRobin, leastRequest, p2c, peakEWMA, orcaWRR, pwRingHash,
	{name: "pickwise_ring_hash (no hold)", config: lbConfig("pickwise_ring_hash", `{"requestHashHeader":"`+keyHeader+`","rejoinHold":"0s","rejoinRamp":"0s"}`)},
	prequal,
	{name: "pickwise_subset", config: lbConfig("pickwise_subset", `{"subsetSize":5,"childPolicy":[{"pickwise_p2c":{}}]}`)},
	{name: "pickwise_shadow", config: lbConfig("pickwise_shadow", `{"live":[{"pickwise_p2c":{}}],"candidate":[{"pickwise_peak_ewma":{}}],"sampleRate":0.1,"canaryPercent":10}`)},
}

// drainEvent is one drain, as the lab ran it.
type drainEvent struct {
	backend int
	// at is when the drain began (the GOAWAY), stopped when the server
	// had shut down, restarted when it served again.
	at, stopped, restarted time.Time
}

// drainColumn is one policy's run of the drain scenario.
type drainColumn struct {
	policy string
	out    outcome
	events []drainEvent
	// back is the start of the first call each drain's backend answered
	// once restarted, by event; zero if none before the next drain.
	back []time.Time
	// retried counts grpc's transparent retries: attempts refused by a
	// draining connection before the server saw them, which grpc sends
	// again at once. streamed counts the attempts that failed after grpc
	// had created their stream: the ones a balancer's Done is told of
	// as failed after being sent (DoneInfo.BytesSent).
	retried, streamed int
	// The policy's own view, from its metrics: local ejections, probe
	// calls to ejected endpoints, and picks that passed over a
	// candidate for its failures. Unset for grpc-go's policies.
	pickwise                       bool
	ejections, probes, avoidedPick int
}

// inFlight counts the calls the drained backends were serving when their
// drain began, and those of them that failed.
func (c drainColumn) inFlight(l *lab) (all, failed int) {
	for _, ev := range c.events {
		name := l.fleet.names[ev.backend]
		for _, t := range c.out.trace {
			if t.backend == name && t.start.Before(ev.at) && t.end.After(ev.at) {
				all++
				if t.err != nil {
					failed++
				}
			}
		}
	}
	return all, failed
}

// shareBack is the drained backends' share of the calls that started in
// [from, to) after each answered its first call back, over every drain;
// and how many drains' backends answered none before the next drain.
func (c drainColumn) shareBack(l *lab, from, to time.Duration) (share float64, never int) {
	calls, total := 0, 0
	for i, ev := range c.events {
		if c.back[i].IsZero() {
			never++
			continue
		}
		name := l.fleet.names[ev.backend]
		lo, hi := c.back[i].Add(from), c.back[i].Add(to)
		for _, t := range c.out.trace {
			if !t.start.Before(lo) && t.start.Before(hi) {
				total++
				if t.backend == name {
					calls++
				}
			}
		}
	}
	return float64(calls) / float64(max(total, 1)), never
}

// backAfter is the median time from a drain's GOAWAY to its backend's
// first call once restarted, over the drains whose backend had one.
func (c drainColumn) backAfter() (time.Duration, bool) {
	var ds []time.Duration
	for i, ev := range c.events {
		if !c.back[i].IsZero() {
			ds = append(ds, c.back[i].Sub(ev.at))
		}
	}
	if len(ds) == 0 {
		return 0, false
	}
	slices.Sort(ds)
	return sim.Quantile(ds, 0.5), true
}

// drainScenario runs drainDrains drains (fewer, but at least two, with a
// smaller -scale) with every policy's channel and prints the table.
func drainScenario(ctx context.Context, l *lab) (section, error) {
	drains := max(2, int(float64(drainDrains)*min(1, l.scale)+0.5))
	cols, err := l.drainRun(ctx, drains)
	if err != nil {
		return section{}, err
	}
	t := drainTable(l, cols, drains)
	return section{Name: "drain", Table: t, Order: t.Columns}, nil
}

// drainTable is the scenario's table.
func drainTable(l *lab, cols []drainColumn, drains int) *sim.Table {
	load := l.drainLoad()
	t := &sim.Table{Title: fmt.Sprintf("Graceful drain (real gRPC): %d backends at %v, a channel per policy at %.0f calls/s; %d times, one backend shut down with GracefulStop (GOAWAY), down %v, restarted on its address, the next %v later",
		drainBackends, sim.Ms(load.latency), load.rate, drains, drainDown, drainNext)}
	for _, c := range cols {
		t.Columns = append(t.Columns, c.policy)
	}
	cells := func(f func(c drainColumn) string) []string {
		out := make([]string, len(cols))
		for i, c := range cols {
			out[i] = f(c)
		}
		return out
	}
	ours := func(f func(c drainColumn) int) func(c drainColumn) string {
		return func(c drainColumn) string {
			if !c.pickwise {
				return "-"
			}
			return fmt.Sprint(f(c))
		}
	}
	t.AddRow("calls", cells(func(c drainColumn) string { return fmt.Sprint(c.out.total) })...)
	t.AddRow("failed calls", cells(func(c drainColumn) string { return fmt.Sprint(c.out.failed) })...)
	t.AddRow("calls in flight on the drained backend at its GOAWAY, answered", cells(func(c drainColumn) string {
		all, failed := c.inFlight(l)
		return fmt.Sprintf("%d of %d", all-failed, all)
	})...)
	t.AddRow("attempts refused by a draining connection, sent again by grpc", cells(func(c drainColumn) string { return fmt.Sprint(c.retried) })...)
	t.AddRow("attempts failed after grpc created their stream", cells(func(c drainColumn) string { return fmt.Sprint(c.streamed) })...)
	t.AddRow("local ejections", cells(ours(func(c drainColumn) int { return c.ejections }))...)
	t.AddRow("picks that passed over a failing endpoint", cells(ours(func(c drainColumn) int { return c.avoidedPick }))...)
	t.AddRow("probe calls to ejected endpoints", cells(ours(func(c drainColumn) int { return c.probes }))...)
	t.AddRow("GOAWAY to the backend's first call after its restart (median)", cells(func(c drainColumn) string {
		d, ok := c.backAfter()
		if !ok {
			return "none"
		}
		return sim.Ms(d)
	})...)
	for w := range len(drainWindows) - 1 {
		from, to := drainWindows[w], drainWindows[w+1]
		label := fmt.Sprintf("its share, %v-%v back", sim.Ms(from), sim.Ms(to))
		if w == 0 {
			label = fmt.Sprintf("its share, first %v back (fair 20%%)", sim.Ms(to))
		}
		t.AddRow(label, cells(func(c drainColumn) string {
			s, never := c.shareBack(l, from, to)
			if never > 0 && w == 0 {
				return fmt.Sprintf("%s, %d of %d not back", sim.Pct(s), never, len(c.events))
			}
			return sim.Pct(s)
		})...)
	}
	var stops []time.Duration
	if len(cols) > 0 {
		for _, ev := range cols[0].events {
			stops = append(stops, ev.stopped.Sub(ev.at))
		}
	}
	slices.Sort(stops)
	t.AddNote(fmt.Sprintf("GracefulStop returned %v after the GOAWAY (median of the drains), once the last call in flight had ended", sim.Ms(sim.Quantile(stops, 0.5))))
	t.AddNote("a drained backend's connection gets a GOAWAY and goes IDLE at once; the client reconnects, is refused while the backend is down, and tries again after grpc's connection backoff (1 s ± 20%), which is most of the time until the first call back")
	t.AddNote("attempts refused: picks that met a connection already draining, which grpc sends again at once, elsewhere, unseen by the call; failed after grpc created their stream: what a policy is told of as an attempt that was sent and failed (DoneInfo.BytesSent). GracefulStop sends its GOAWAY in two steps, the last stream it will serve a round trip after the first, so every stream sent before the client knew is answered; a server that drains with a single GOAWAY (net/http's HTTP/2 server) refuses those in transit, which pickwise's policies take as no evidence")
	t.AddNote("pickwise_ring_hash holds a backend that went into TRANSIENT_FAILURE after it was READY out of its keys for rejoinHold (30 s) once it is back, then gives them back over rejoinRamp (10 s), so that a flapping node does not move its keys on every flap: a drained backend is held past the next drain, and once every backend is held the hold yields and keys go home. (no hold): rejoinHold and rejoinRamp 0s, as grpc-go's ring_hash")
	t.AddNote("pickwise's load-aware policies ramp a backend back from a connection failure with slow start (10% of its weight, ending once its answers show it warm): it is a new process")
	t.AddNote("pickwise_subset: subsetSize 5 of 5, child pickwise_p2c; pickwise_shadow: live pickwise_p2c, candidate pickwise_peak_ewma, sampleRate 0.1, canaryPercent 10")
	return t
}

// drainRun opens a channel per policy, sends each its traffic while
// drainSteps drains the backends, and returns what each saw.
func (l *lab) drainRun(ctx context.Context, drains int) ([]drainColumn, error) {
	if len(l.fleet.servers) < drainBackends {
		return nil, fmt.Errorf("drain needs the lab's own backends, to shut them down and restart them: it does not run with -target")
	}
	// Warmed up on quick answers, every channel at once, then slowed for
	// the run.
	if err := l.fleet.configure(ctx, nil, `{"latency":"1ms"}`); err != nil {
		return nil, err
	}
	members := make([]int, drainBackends)
	for i := range members {
		members[i] = i
	}
	type column struct {
		p   labPolicy
		ch  *channel
		m   *fakecc.Metrics
		as  *attemptStats
		out outcome
	}
	var cols []*column
	defer func() {
		for _, c := range cols {
			c.ch.conn.Close()
		}
	}()
	for _, p := range l.keep("drain", drainPolicies) {
		c := &column{p: p, m: fakecc.NewMetrics(), as: &attemptStats{}}
		ch, err := dial(l.fleet, p.config, members, nil, grpc.WithStatsHandler(c.m), grpc.WithStatsHandler(c.as))
		if err != nil {
			return nil, err
		}
		c.ch = ch
		cols = append(cols, c)
	}
	warmed := make([]error, len(cols))
	var wg sync.WaitGroup
	for i, c := range cols {
		wg.Go(func() { warmed[i] = c.ch.warm(ctx, drainBackends) })
	}
	wg.Wait()
	for i, c := range cols {
		if warmed[i] != nil {
			return nil, fmt.Errorf("drain/%s: %w", c.p.name, warmed[i])
		}
		// The warm-up's attempts do not count.
		c.as.reset()
	}
	load := l.drainLoad()
	// ORCA per call, utilization = calls answered per second / 100: equal
	// backends report equal weights however many calls each has in
	// flight, as they should.
	backend := fmt.Sprintf(`{"latency":%q,"latencySpread":0.2,"orca":{"perCall":true,"utilization":"rate","ratedQps":100}}`, load.latency)
	if err := l.fleet.configure(ctx, nil, backend); err != nil {
		return nil, err
	}
	prog := l.progress.start("drain", fmt.Sprintf("%d policies at once", len(cols)), 0)
	until := make(chan struct{})
	for i, c := range cols {
		// Arrivals of their own, so that the channels' calls do not all
		// start at the same instants.
		tr := traffic{calls: int(load.rate * 3600), rate: load.rate, seed: l.seed + uint64(i), until: until, trace: true,
			key: func(i int) string { return fmt.Sprint("key-", i%300) }}
		wg.Go(func() { c.out = drive(ctx, c.ch, tr, func(int) {}) })
	}
	events, err := l.drainSteps(ctx, drains)
	close(until)
	wg.Wait()
	if err != nil {
		return nil, err
	}
	var out []drainColumn
	for _, c := range cols {
		dc := drainColumn{policy: c.p.name, out: c.out, events: events, back: make([]time.Time, len(events)),
			pickwise: strings.HasPrefix(c.p.name, "pickwise_")}
		for i, ev := range events {
			name := l.fleet.names[ev.backend]
			// Back before the next drain, or it is not back.
			next := time.Now()
			if i+1 < len(events) {
				next = events[i+1].at
			}
			for _, t := range c.out.trace {
				if t.backend == name && t.err == nil && t.start.After(ev.restarted) && t.start.Before(next) && (dc.back[i].IsZero() || t.start.Before(dc.back[i])) {
					dc.back[i] = t.start
				}
			}
		}
		dc.retried, dc.streamed = c.as.counts()
		// What the policy counted since its last flush, as a scrape
		// would.
		if err := c.m.Collect(); err != nil {
			return nil, err
		}
		for _, name := range metrics.Names() {
			switch {
			case strings.HasSuffix(name, ".ejections"):
				dc.ejections += int(c.m.Total(name))
			case strings.HasSuffix(name, ".probe_picks"):
				dc.probes += int(c.m.Total(name))
			case strings.HasSuffix(name, ".picks"):
				for _, r := range c.m.Records(name) {
					if r.Labels["pickwise.reason"] == "avoided_failing" {
						dc.avoidedPick += int(r.Value)
					}
				}
			}
		}
		prog.total += dc.out.total
		out = append(out, dc)
	}
	prog.finish()
	return out, nil
}

// drainSteps drains the backends one at a time, after drainFirst and
// then drainNext after each restart, and returns what it did. It leaves
// every backend serving.
func (l *lab) drainSteps(ctx context.Context, drains int) ([]drainEvent, error) {
	var events []drainEvent
	wait := func(d time.Duration) error {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(d):
			return nil
		}
	}
	if err := wait(drainFirst); err != nil {
		return nil, err
	}
	for i := range drains {
		k := i % drainBackends
		s := l.fleet.servers[k]
		ev := drainEvent{backend: k, at: time.Now()}
		s.Drain(drainGrace)
		ev.stopped = time.Now()
		err := wait(drainDown)
		if rerr := s.Restart(); rerr != nil {
			return nil, rerr
		}
		if err != nil {
			return nil, err
		}
		ev.restarted = time.Now()
		events = append(events, ev)
		if err := wait(drainNext); err != nil {
			return nil, err
		}
	}
	return events, nil
}

// attemptStats counts, per call attempt, what a balancer's Done is told:
// which attempts failed after grpc created their stream on a connection.
// It is a stats.Handler for the lab's channels; grpc tags each attempt.
type attemptStats struct {
	mu                sync.Mutex
	retried, streamed int
}

type attemptKey struct{}

// attempt is one attempt's state, in its context: whether grpc created
// its stream.
type attempt struct{ streamed atomic.Bool }

func (a *attemptStats) reset() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.retried, a.streamed = 0, 0
}

func (a *attemptStats) counts() (retried, streamed int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.retried, a.streamed
}

// TagRPC implements stats.Handler.
func (a *attemptStats) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context {
	return context.WithValue(ctx, attemptKey{}, &attempt{})
}

// HandleRPC implements stats.Handler.
func (a *attemptStats) HandleRPC(ctx context.Context, s stats.RPCStats) {
	at, _ := ctx.Value(attemptKey{}).(*attempt)
	if at == nil {
		return
	}
	switch s := s.(type) {
	case *stats.Begin:
		if s.IsTransparentRetryAttempt {
			a.mu.Lock()
			a.retried++
			a.mu.Unlock()
		}
	case *stats.OutHeader:
		// Reported once grpc has created the attempt's stream.
		at.streamed.Store(true)
	case *stats.End:
		if s.Error != nil && at.streamed.Load() {
			a.mu.Lock()
			a.streamed++
			a.mu.Unlock()
		}
	}
}

// TagConn implements stats.Handler.
func (a *attemptStats) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context {
	return ctx
}

// HandleConn implements stats.Handler.
func (a *attemptStats) HandleConn(context.Context, stats.ConnStats) {}
