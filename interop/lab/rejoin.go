package main

import (
	"context"
	"fmt"
	"time"

	"github.com/pickwise/pickwise/sim"
)

// The lab's warm rejoin: the simulator's warm-rejoin over real gRPC, at a
// smaller scale. Twelve backends serve one call at a time in 10 ms, 100
// calls a second each, and get 900 a second; four of them leave the
// endpoint list for half a second and come back as they were.
const (
	rejoinAway    = 4
	rejoinRate    = 900.0
	rejoinBefore  = time.Second
	rejoinOut     = 500 * time.Millisecond
	rejoinWindow  = 250 * time.Millisecond
	rejoinBackend = `{"latency":"10ms","capacity":1}`
)

// warmRejoin sends open-loop calls while backends 0-3 drop out of the
// endpoint list and come back warm, and reports their share of the calls
// once back and the latency of the whole run.
func warmRejoin(ctx context.Context, l *lab) (section, error) {
	const n = 12
	after := l.seconds(4*time.Second, 2*time.Second)
	run := rejoinBefore + rejoinOut + after
	all := make([]int, n)
	for i := range all {
		all[i] = i
	}
	policies := l.keep("warm-rejoin", []labPolicy{roundRobin, leastRequest, p2c,
		{name: "pickwise_p2c (timeOnly)", config: lbConfig("pickwise_p2c", `{"slowStart":{"timeOnly":true},"removalGrace":"0s"}`)}, peakEWMA})
	var rs []result
	for _, p := range policies {
		ch, err := l.open(ctx, "warm-rejoin", n, p, rejoinBackend, nil, nil)
		if err != nil {
			return section{}, err
		}
		// The membership changes run beside the calls, on the run's clock.
		changed := make(chan struct{})
		stop := make(chan struct{})
		go func() {
			defer close(changed)
			for _, step := range []struct {
				wait    time.Duration
				members []int
			}{{rejoinBefore, all[rejoinAway:]}, {rejoinOut, all}} {
				select {
				case <-time.After(step.wait):
					ch.setMembers(l.fleet, step.members)
				case <-stop:
					return
				}
			}
		}()
		o := l.run(ctx, "warm-rejoin", p.name, ch, traffic{calls: int(rejoinRate * run.Seconds()), rate: rejoinRate, window: rejoinWindow})
		close(stop)
		<-changed
		ch.conn.Close()
		rs = append(rs, result{policy: p.name, out: o})
	}

	back := int((rejoinBefore + rejoinOut) / rejoinWindow) // the first window after the return
	returning := func(o outcome, from, to int) string {
		from, to = min(from, len(o.windows)), min(to, len(o.windows))
		calls, total := 0, 0
		for _, w := range o.windows[from:to] {
			for i := range rejoinAway {
				calls += w.perBackend[l.fleet.names[i]]
			}
			total += w.total
		}
		return sim.Pct(float64(calls) / float64(max(total, 1)))
	}
	t := &sim.Table{Title: fmt.Sprintf("Warm rejoin (real gRPC): %d backends of 100 calls/s, %.0f calls/s offered; %d leave the endpoint list for %v, %v in, and come back warm",
		n, rejoinRate, rejoinAway, rejoinOut, rejoinBefore), Columns: names(rs)}
	t.AddRow("returning backends' share, first 0.5 s back (fair 33.3%)", row(rs, func(o outcome) string { return returning(o, back, back+2) })...)
	t.AddRow(fmt.Sprintf("returning backends' share, the %v after", after-2*rejoinWindow), row(rs, func(o outcome) string { return returning(o, back+2, len(o.windows)) })...)
	t.AddRow("p99 of successful calls, whole run", row(rs, func(o outcome) string { return sim.Ms(sim.Quantile(o.latencies, 0.99)) })...)
	t.AddRow("p99.9 of successful calls, whole run", row(rs, func(o outcome) string { return sim.Ms(sim.Quantile(o.latencies, 0.999)) })...)
	t.AddRow("failed calls", row(rs, func(o outcome) string { return fmt.Sprint(o.failed) })...)
	t.AddNote("while the four are out the other eight get 112% of their capacity, and queue")
	t.AddNote("pickwise policies keep a removed backend's connection for removalGrace (10 s by default): the four come back on the connections they left with, the same processes, and are not ramped")
	t.AddNote("(timeOnly): removalGrace \"0s\" and a ramp by time alone: the four reconnect, and slow start ramps them for the whole 30 s window, the rest of the run, while the other eight run over capacity")
	sec := newSection("warm-rejoin", t, rs)
	sec.Charts = []chart{latencyChart(rs)}
	return sec, nil
}
