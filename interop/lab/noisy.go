package main

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/pickwise/pickwise/interop/server"
	"github.com/pickwise/pickwise/sim"
	"google.golang.org/grpc"
	"google.golang.org/grpc/peer"
)

// The lab's noisy neighbours: the simulator's noisy-neighbours scenario
// (sim/scenario_neighbours.go) at loopback scale. Ten equal backends of
// four workers are each slowed 2-4x now and then, by a schedule the lab
// plays through their admin RPC, while 16 client channels, each with its
// own balancer, share them: each channel sees a sixteenth of the calls,
// a thin view of every backend.
const (
	nnBackends = 10
	nnChannels = 16
	nnWorkers  = 4
	nnMedian   = 40 * time.Millisecond
	// nnSigma spreads service times: lognormal, p99 3.2x the median.
	nnSigma = 0.5
	// nnRate is 70% of what the healthy fleet serves: 10 x 4 workers
	// over the lognormal's mean, 40 ms x e^(0.5^2/2) = 45.3 ms, make 883
	// calls a second. The service time is long, and the rate low, because
	// the lab's one process serves the fleet and its clients: short of
	// CPU, every backend's timers fire late and the fleet queues whatever
	// the policy.
	nnRate = 618
	// Slowdowns, as the simulator draws them: windows of U(nnSlowMin,
	// nnSlowMax) multiplying service times by U(2, 4), apart by
	// exponential gaps of mean nnSlowGap, so that a backend is slowed
	// about a quarter of the time once nnMaxSlowed has dropped some.
	nnSlowMin = 2 * time.Second
	nnSlowMax = 8 * time.Second
	nnSlowGap = 10 * time.Second
	// nnMaxSlowed is the most backends slowed at once, a third of the
	// fleet as in the simulator: a window that would start while as many
	// are slowed is dropped, so that the fleet can always serve the load
	// (three slowed 4x leave 90% of its capacity offered) and the table
	// measures placement rather than an overloaded fleet.
	nnMaxSlowed = 3
	// nnSlowSeed seeds each backend's windows, with its index: every
	// column meets the same ones.
	nnSlowSeed = 0x6e6f697379
	// Every column sends the scenario's traffic for nnWarmup, not
	// measured, then measures for nnMeasured (scaled by -scale, at least
	// nnMeasuredMin). The warm-up outlasts the ORCA columns' 1 s blackout,
	// so their weights are in use when measuring starts.
	nnWarmup      = 2 * time.Second
	nnMeasured    = 12 * time.Second
	nnMeasuredMin = 3 * time.Second
	nnDeadline    = time.Second
)

// nnBackend is every backend's behavior: ORCA per call with the computed
// utilization (busy workers over four), which a slowed backend's full
// workers drive up, for the ORCA columns. The hardware-generations
// scenario's "rate" utilization would not do: calls served over a fixed
// rating gives every backend the same weight, slowed or not.
var nnBackend = fmt.Sprintf(`{"latency":%q,"latencySpread":%g,"capacity":%d,"orca":{"perCall":true}}`, nnMedian, nnSigma, nnWorkers)

// prequal is pickwise_prequal's column, with its defaults.
var prequal = labPolicy{name: "pickwise_prequal", config: lbConfig("pickwise_prequal", "{}")}

// nnPolicies are the scenario's columns: grpc-go's, then pickwise's.
var nnPolicies = []labPolicy{roundRobin, leastRequest, grpcWRR, p2c, peakEWMA, orcaWRR, prequal}

// nnNeighbours are the scenario's slowdowns, drawn as the simulator's
// noisy-neighbours draws its own.
var nnNeighbours = sim.Neighbours{Min: nnSlowMin, Max: nnSlowMax, MinFactor: 2, MaxFactor: 4, Gap: nnSlowGap, MaxSlowed: nnMaxSlowed, Seed: nnSlowSeed}

// nnSlowedTime is the share of backend-time slowed in [from, to).
func nnSlowedTime(slow [][]sim.Window, from, to time.Duration) float64 {
	var in time.Duration
	for _, ws := range slow {
		for _, w := range ws {
			in += max(0, min(w.To, to)-max(w.From, from))
		}
	}
	return in.Seconds() / (to - from).Seconds() / float64(len(slow))
}

// nnOutcome is one column's measured window.
type nnOutcome struct {
	total, failed, onSlowed int
	latencies               []time.Duration // successful calls, sorted
	probes                  int64           // load probes the backends answered
	// conns are the TCP connections each backend accepted during the
	// column, from dialing to the end of its calls.
	conns []int64
	// late is how late a 1 ms timer fired, sorted: the lab's process
	// short of CPU, which makes every backend's service late too.
	late []time.Duration
}

// lateness is the p99 of how late the lab's timers fired.
func (o nnOutcome) lateness() time.Duration { return sim.Quantile(o.late, 0.99) }

// noisyNeighbours runs every column over the same slowdowns and arrivals.
func noisyNeighbours(ctx context.Context, l *lab) (section, error) {
	measured := l.seconds(nnMeasured, nnMeasuredMin)
	// Drawn up to the full scale's end, or further for a longer run, so
	// that a shorter run meets the same windows, fewer of them.
	slow := nnNeighbours.Slowdowns(nnBackends, nnWarmup+max(measured, nnMeasured))
	var rs []result
	var outs []nnOutcome
	for _, p := range l.keep("noisy-neighbours", nnPolicies) {
		var o nnOutcome
		for attempt := 0; attempt < 1+l.calmRetries; attempt++ {
			a, err := l.noisyColumn(ctx, p, slow, measured)
			if err != nil {
				return section{}, fmt.Errorf("%s: %w", p.name, err)
			}
			if attempt == 0 || a.lateness() < o.lateness() {
				o = a
			}
			if o.lateness() <= l.calm {
				break
			}
		}
		outs = append(outs, o)
		rs = append(rs, result{policy: p.name, out: outcome{total: o.total, failed: o.failed, latencies: o.latencies}})
	}
	even := nnSlowedTime(slow, nnWarmup, nnWarmup+measured)
	t := &sim.Table{
		Title: fmt.Sprintf("Noisy neighbours (real gRPC): %d backends of %d workers, lognormal service (%v median, sigma %.1f), each slowed 2-4x about a quarter of the time in 2-8 s windows; %d client channels, %d calls/s (70%% of the healthy fleet's capacity), %v deadline, measured for %v after %v",
			nnBackends, nnWorkers, nnMedian, nnSigma, nnChannels, nnRate, nnDeadline, measured, nnWarmup),
		Columns: names(rs),
	}
	cells := func(f func(nnOutcome) string) []string {
		out := make([]string, len(outs))
		for i, o := range outs {
			out[i] = f(o)
		}
		return out
	}
	for _, q := range []float64{0.5, 0.99, 0.999} {
		t.AddRow(fmt.Sprintf("p%g of successful calls", 100*q), cells(func(o nnOutcome) string { return sim.Ms(sim.Quantile(o.latencies, q)) })...)
	}
	calls := 0
	if len(outs) > 0 {
		calls = outs[0].total
	}
	t.AddRow(fmt.Sprintf("failed calls (deadline), of %d", calls), cells(func(o nnOutcome) string { return fmt.Sprint(o.failed) })...)
	t.AddRow(fmt.Sprintf("calls placed on a slowed backend (even: %s)", sim.Pct(even)), cells(func(o nnOutcome) string {
		return sim.Pct(float64(o.onSlowed) / float64(max(o.total, 1)))
	})...)
	t.AddRow("load probes per call", cells(func(o nnOutcome) string { return fmt.Sprintf("%.2f", float64(o.probes)/float64(max(o.total, 1))) })...)
	t.AddRow("TCP connections each backend accepted", cells(func(o nnOutcome) string {
		lo, hi := slices.Min(o.conns), slices.Max(o.conns)
		if lo == hi {
			return fmt.Sprint(lo)
		}
		return fmt.Sprintf("%d-%d", lo, hi)
	})...)
	t.AddRow("the lab's timers: p99 lateness", cells(func(o nnOutcome) string { return fmt.Sprintf("%.1fms", o.lateness().Seconds()*1000) })...)
	t.AddNote(fmt.Sprintf("slowdowns: each backend's windows last U(2 s, 8 s) and multiply its service times by U(2, 4), with exponential gaps of mean %.0f s, from a fixed seed per backend, less any that would start while %d backends are slowed; the lab sets them through the backends' admin RPC, and they run through the warm-up too. \"even\" is the share of backend-time slowed in the measured window, what a placement blind to speed sends to slowed backends",
		nnSlowGap.Seconds(), nnMaxSlowed))
	t.AddNote(fmt.Sprintf("capacity: %d workers over the lognormal's 45.3 ms mean serve 88 calls/s a backend, 883 the healthy fleet; a backend slowed 3x serves 29, where an even split sends it 62, so its queue grows until its calls reach the deadline. Each call goes to one of the %d channels at random, Poisson arrivals from -seed", nnWorkers, nnChannels))
	t.AddNote("the lab's timers: how late a 1 ms timer fires in the lab's process during the measured window; a few ms is a machine busy with other work, whose backends' service times are late by as much, and whose figures are the machine's as much as the policy's")
	t.AddNote("every backend reports ORCA per call (utilization: busy workers over 4) and runs serverload; the columns differ only in their policy. Load probes are counted at the backends; TCP connections are those each backend accepted while the column ran: one per channel")
	t.AddNote("pickwise_orca_wrr, weighted_round_robin: blackoutPeriod 1s, weightUpdatePeriod 100ms, other fields at their defaults; measuring starts after the warm-up, past the blackout")
	sec := newSection("noisy-neighbours", t, rs)
	sec.Charts = []chart{
		latencyChart(rs),
		errorsChart(rs, "shorter is better: calls that waited out the deadline on a slowed backend's queue"),
	}
	return sec, nil
}

// nnCall is one call of a column's run.
type nnCall struct {
	at      time.Duration // since the run began
	backend int           // index in the fleet; -1 if unknown
	latency time.Duration
	err     error
}

// noisyColumn runs policy p: 16 channels warmed up, then the traffic and
// the slowdowns on one clock, the first nnWarmup of it not measured.
func (l *lab) noisyColumn(ctx context.Context, p labPolicy, slow [][]sim.Window, measured time.Duration) (nnOutcome, error) {
	f := l.fleet
	// Plain backends answer the warming calls at once.
	if err := f.configure(ctx, nil, ""); err != nil {
		return nnOutcome{}, err
	}
	before, err := f.stats(ctx, nnBackends)
	if err != nil {
		return nnOutcome{}, err
	}
	members := make([]int, nnBackends)
	for i := range members {
		members[i] = i
	}
	chs := make([]*channel, 0, nnChannels)
	defer func() {
		for _, ch := range chs {
			ch.conn.Close()
		}
	}()
	for range nnChannels {
		ch, err := dial(f, p.config, members, nil)
		if err != nil {
			return nnOutcome{}, err
		}
		chs = append(chs, ch)
	}
	// One answer a channel: its other connections are up long before the
	// warm-up ends. Waiting for every backend to answer would take
	// pickwise_prequal seconds, as it keeps to the fastest of idle ones.
	var wg sync.WaitGroup
	warmErr := make([]error, len(chs))
	for i, ch := range chs {
		wg.Go(func() { warmErr[i] = ch.warm(ctx, 1) })
	}
	wg.Wait()
	for _, err := range warmErr {
		if err != nil {
			return nnOutcome{}, err
		}
	}
	// The warming calls must not count.
	if err := f.configure(ctx, nil, nnBackend); err != nil {
		return nnOutcome{}, err
	}

	prog := l.progress.start("noisy-neighbours", p.name, int(nnRate*(nnWarmup+measured).Seconds()))
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	began := time.Now()
	played := make(chan error, 1)
	go func() { played <- l.playSlowdowns(runCtx, began, slow) }()
	// The probes of the measured window: the count at its start is taken
	// beside the calls.
	atStart := make(chan []server.Stats, 1)
	go func() {
		time.Sleep(time.Until(began.Add(nnWarmup)))
		st, _ := f.stats(runCtx, nnBackends)
		atStart <- st
	}()
	lateness := make(chan []time.Duration, 1)
	go func() { lateness <- timerLateness(runCtx, began.Add(nnWarmup)) }()
	calls := driveChannels(ctx, chs, nnRate, nnWarmup+measured, l.seed, f, began, prog.update)
	prog.total = len(calls)
	prog.finish()
	stop()
	late := <-lateness
	if err := <-played; err != nil {
		return nnOutcome{}, err
	}
	start := <-atStart
	after, err := f.stats(ctx, nnBackends)
	if err != nil {
		return nnOutcome{}, err
	}
	if start == nil {
		return nnOutcome{}, fmt.Errorf("no stats at the start of the measured window")
	}

	o := nnOutcome{conns: make([]int64, nnBackends), late: late}
	for i := range nnBackends {
		o.probes += after[i].Probes - start[i].Probes
		o.conns[i] = after[i].Connections - before[i].Connections
	}
	for _, c := range calls {
		if c.at < nnWarmup {
			continue
		}
		o.total++
		if c.backend >= 0 && sim.Slowed(slow[c.backend], c.at) {
			o.onSlowed++
		}
		if c.err != nil {
			o.failed++
			continue
		}
		o.latencies = append(o.latencies, c.latency)
	}
	sort.Slice(o.latencies, func(i, j int) bool { return o.latencies[i] < o.latencies[j] })
	return o, nil
}

// timerLateness samples how late a 1 ms timer fires, from from until ctx
// ends, and returns the samples sorted.
func timerLateness(ctx context.Context, from time.Time) []time.Duration {
	time.Sleep(time.Until(from))
	var out []time.Duration
	for ctx.Err() == nil {
		t := time.Now()
		time.Sleep(time.Millisecond)
		out = append(out, time.Since(t)-time.Millisecond)
	}
	slices.Sort(out)
	return out
}

// playSlowdowns sets each backend's slowdown as its windows open and
// close, on the clock that began at began, until ctx ends.
func (l *lab) playSlowdowns(ctx context.Context, began time.Time, slow [][]sim.Window) error {
	type change struct {
		at      time.Duration
		backend int
		factor  float64 // 0: the window closes
	}
	var changes []change
	for i, ws := range slow {
		for _, w := range ws {
			changes = append(changes, change{w.From, i, w.Factor}, change{w.To, i, 0})
		}
	}
	// Closes before opens at one instant, so that back-to-back windows
	// leave the later one in force.
	slices.SortStableFunc(changes, func(a, b change) int {
		return cmp.Or(cmp.Compare(a.at, b.at), cmp.Compare(min(a.factor, 1), min(b.factor, 1)))
	})
	for _, c := range changes {
		t := time.NewTimer(time.Until(began.Add(c.at)))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
		if err := l.set(ctx, c.backend, fmt.Sprintf(`{"slowdown":%g}`, c.factor)); err != nil && ctx.Err() == nil {
			return fmt.Errorf("%s: %w", l.fleet.names[c.backend], err)
		}
	}
	return nil
}

// driveChannels sends Poisson arrivals at rate for run, each call through
// one of chs at random, and returns every call with the backend that took
// it. The arrivals and the channels they go to come from seed, so every
// column of a scenario sees the same ones.
func driveChannels(ctx context.Context, chs []*channel, rate float64, run time.Duration, seed uint64, f *labFleet, began time.Time, progress func(done int)) []nnCall {
	index := map[string]int{}
	for i, n := range f.names {
		index[n] = i
	}
	for i, a := range f.addrs {
		index[a] = i
	}
	var (
		mu    sync.Mutex
		calls []nnCall
		wg    sync.WaitGroup
	)
	draw := rand.New(rand.NewPCG(seed, seed^0x6e6e))
	var at float64 // seconds from began
	for ctx.Err() == nil {
		at += draw.ExpFloat64() / rate
		if at >= run.Seconds() {
			break
		}
		ch := chs[draw.IntN(len(chs))]
		offset := time.Duration(at * float64(time.Second))
		if wait := time.Until(began.Add(offset)); wait > 0 {
			time.Sleep(wait)
		}
		wg.Go(func() {
			cctx, cancel := context.WithTimeout(ctx, nnDeadline)
			defer cancel()
			var p peer.Peer
			start := time.Now()
			b, err := server.Call(cctx, ch.conn, "", grpc.Peer(&p))
			c := nnCall{at: offset, latency: time.Since(start), err: err, backend: -1}
			if i, ok := index[b]; ok {
				c.backend = i
			} else if p.Addr != nil {
				if i, ok := index[p.Addr.String()]; ok {
					c.backend = i
				}
			}
			mu.Lock()
			calls = append(calls, c)
			n := len(calls)
			mu.Unlock()
			progress(n)
		})
	}
	wg.Wait()
	return calls
}

// stats reads the Stats of the fleet's first n backends.
func (f *labFleet) stats(ctx context.Context, n int) ([]server.Stats, error) {
	out := make([]server.Stats, n)
	for i := range n {
		st, err := server.FetchStats(ctx, f.admin[i])
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f.names[i], err)
		}
		out[i] = st
	}
	return out, nil
}
