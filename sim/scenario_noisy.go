package sim

import (
	"fmt"
	"math"
	"time"
)

func init() {
	register(Scenario{Name: "noisy-reports", Run: func(s Scale) (*Table, error) {
		r, err := NoisyReports(s)
		if err != nil {
			return nil, err
		}
		return r.Table, nil
	}})
}

// NoisyResult holds the noisy-reports scenario's numbers per policy, in
// column order.
type NoisyResult struct {
	Policies []string
	// Spread is how much a backend's share of each second's requests moves
	// from second to second: its standard deviation over its mean, averaged
	// over the backends. With exact weights it is only the arrivals' own
	// noise.
	Spread []float64
	// Low and High are backend-0's lowest and highest share of a second's
	// requests (steady: noisyShare0).
	Low, High []float64
	// Overloaded is the share of backend-seconds in which a backend was
	// offered more requests than it can serve in a second.
	Overloaded []float64
	// NewUtil and OldUtil are the mean utilization of a new- and an
	// old-generation backend.
	NewUtil, OldUtil []float64
	// P99 and P999 are latency quantiles of successful requests.
	P99, P999 []time.Duration
	Table     *Table
}

// Noisy-reports parameters: two hardware generations, as in
// hardware-generations, on a smaller fleet, and the fleet's load spread
// over several balancers.
const (
	noisyNew     = 4 // new-generation backends, 1,000 rps each
	noisyOld     = 2 // old-generation backends, 600 rps each
	noisyClients = 10
	// noisyRate is 80% of the fleet's 5,200 rps.
	noisyRate = 4160
	// noisyNoise is the reported utilization's multiplicative noise:
	// x (1 + U(-0.4, 0.4)).
	noisyNoise = 0.4
	// noisyWarmup lets pickwise_orca_wrr leave its 10 s blackout off-peak,
	// as in hardware-generations.
	noisyWarmup     = 15 * time.Second
	noisyWarmupRate = noisyRate / 4
)

// noisyShare0 is backend-0's share of the traffic when weights follow
// capacity exactly: 1,000 / 5,200.
const noisyShare0 = 1000.0 / 5200

// noisyBackends returns the fleet, new generation first, reporting its
// utilization with the given noise.
func noisyBackends(noise float64) []Backend {
	out := make([]Backend, noisyNew+noisyOld)
	for i := range out {
		gen := 0
		if i >= noisyNew {
			gen = 1
		}
		out[i] = Backend{Servers: hwWorkers, Service: Const(hwService[gen]), ReportNoise: noise}
	}
	return out
}

// NoisyReports: 6 backends, 4 sustaining 1,000 requests per second and 2
// sustaining 600, offered 80% of their capacity by 10 balancers running
// pickwise_orca_wrr. The backends' true capacities never change, but each
// report's utilization is off by up to 40% either way (a gauge sampled at
// an unlucky instant, a noisy neighbour), fresh every report window. The
// weight, qps / utilization, inherits the noise: taken raw from each
// update's reports, as grpc-go's weighted_round_robin takes the last one,
// it moves a backend's traffic by as much from one second to the next;
// averaged with a half-life, the noise cancels and the traffic holds
// still. The noise is per report window, not per call: a period's reports
// are averaged before they become a weight, so noise drawn per call would
// cancel within a period whatever the half-life, while a gauge's error
// persists until the gauge is next sampled.
//
// A column with exact reports shows the floor: how much the shares move
// when only the arrivals are random.
func NoisyReports(scale Scale) (*NoisyResult, error) {
	measured := 120 * time.Second
	if scale == Reduced {
		measured = 20 * time.Second
	}
	type column struct {
		policy Policy
		noise  float64
	}
	cols := []column{
		{GRPC("pickwise_orca_wrr (raw)", "pickwise_orca_wrr", `{"weightHalfLife":"0s"}`), noisyNoise},
		{GRPC("pickwise_orca_wrr", "pickwise_orca_wrr", `{}`), noisyNoise},
		{GRPC("pickwise_orca_wrr (10s)", "pickwise_orca_wrr", `{"weightHalfLife":"10s"}`), noisyNoise},
		{GRPC("pickwise_orca_wrr, exact reports", "pickwise_orca_wrr", `{}`), 0},
	}
	policies := make([]Policy, len(cols))
	for i, c := range cols {
		policies[i] = c.policy
	}
	out := &NoisyResult{Policies: columns(policies)}
	for _, c := range cols {
		m, err := noisyMeasure(noisyRun(c.noise, measured), c.policy)
		if err != nil {
			return nil, err
		}
		out.Spread = append(out.Spread, m.spread)
		out.Low = append(out.Low, m.low)
		out.High = append(out.High, m.high)
		out.Overloaded = append(out.Overloaded, m.overloaded)
		out.NewUtil = append(out.NewUtil, m.util[0])
		out.OldUtil = append(out.OldUtil, m.util[1])
		out.P99 = append(out.P99, m.p99)
		out.P999 = append(out.P999, m.p999)
	}

	t := &Table{
		Title: fmt.Sprintf("Noisy reports: 4 backends at 1,000 rps and 2 at 600 rps, %s rps offered (80%%) by %d balancers for %.0f s after %.0f s at %s rps; each report's utilization x (1 + U(-%.1f, %.1f))",
			thousands(noisyRate), noisyClients, measured.Seconds(), noisyWarmup.Seconds(), thousands(noisyWarmupRate), noisyNoise, noisyNoise),
		Columns: out.Policies,
	}
	n := len(cols)
	spread, rng, over := make([]string, n), make([]string, n), make([]string, n)
	newU, oldU, p99, p999 := make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	for i := range cols {
		spread[i] = Pct(out.Spread[i])
		rng[i] = fmt.Sprintf("%.1f-%.1f%%", 100*out.Low[i], 100*out.High[i])
		over[i] = Pct(out.Overloaded[i])
		newU[i], oldU[i] = Pct(out.NewUtil[i]), Pct(out.OldUtil[i])
		p99[i], p999[i] = Ms(out.P99[i]), Ms(out.P999[i])
	}
	t.AddRow("per-second traffic share, stddev / mean (mean over backends)", spread...)
	t.AddRow(fmt.Sprintf("backend-0's per-second share, lowest-highest (steady: %.1f%%)", 100*noisyShare0), rng...)
	t.AddRow("backend-seconds offered more than capacity", over...)
	t.AddRow("new-gen utilization (even: 80%)", newU...)
	t.AddRow("old-gen utilization (even: 80%)", oldU...)
	t.AddRow("p99 latency", p99...)
	t.AddRow("p99.9 latency", p999...)
	t.AddNote(`pickwise_orca_wrr (raw): weightHalfLife "0s", each weight update's reports alone, which is how grpc-go's weighted_round_robin weighs them (it uses the last report; a one-second period's reports here carry one or two gauge readings). pickwise_orca_wrr is the default config, a 5 s half-life; (10s) doubles it`)
	t.AddNote("each backend publishes one report per 1 s window of its own (completions/s, errors/s, busy share of its workers) and every response carries the last one; the noise is drawn once per report from the run's seed, so every column sees the same readings. The backends' capacities and service times never change")
	t.AddNote("exact reports: the default config with noiseless reports, the floor: with exact weights the smooth schedule splits every second's requests in the same proportions, and what is left is rounding and the jitter of 1 s windows")
	t.AddNote("measured after a 15 s warm-up at a quarter of the load, in which pickwise_orca_wrr sits out its 10 s blackout as round robin")
	addWallClockColumn(t)
	out.Table = t
	return out, nil
}

// noisyRun is the scenario's run, measured for measured after the warm-up.
func noisyRun(noise float64, measured time.Duration) Run {
	return Run{
		Seed:       13,
		Backends:   noisyBackends(noise),
		Clients:    noisyClients,
		Rate:       noisyRate,
		Warmup:     noisyWarmup,
		WarmupRate: noisyWarmupRate,
		Duration:   noisyWarmup + measured,
	}
}

// noisyMeasurement is one policy's run reduced to the scenario's numbers.
type noisyMeasurement struct {
	spread, low, high, overloaded float64
	util                          [2]float64 // new, old generation
	p99, p999                     time.Duration
}

// noisyMeasure executes run with p and counts each backend's arrivals per
// second of the measured window.
func noisyMeasure(run Run, p Policy) (noisyMeasurement, error) {
	seconds := int((run.Duration - run.Warmup) / time.Second)
	n := len(run.Backends)
	counts := make([][]int, seconds)
	for i := range counts {
		counts[i] = make([]int, n)
	}
	run.OnPick = func(now time.Duration, _ *Request, backend int, _ time.Duration) {
		if now < run.Warmup {
			return
		}
		if s := int((now - run.Warmup) / time.Second); s < seconds {
			counts[s][backend]++
		}
	}
	res, err := run.Execute(p)
	if err != nil {
		return noisyMeasurement{}, err
	}
	m := noisyMeasurement{p99: res.Quantile(0.99), p999: res.Quantile(0.999), low: 1}
	shares := make([][]float64, n) // shares[b][s]
	overloaded := 0
	for s := range counts {
		total := 0
		for _, c := range counts[s] {
			total += c
		}
		for b, c := range counts[s] {
			shares[b] = append(shares[b], float64(c)/float64(max(total, 1)))
			if capacity := float64(run.Backends[b].Servers) / run.Backends[b].Service.Median.Seconds(); float64(c) > capacity {
				overloaded++
			}
		}
	}
	for b := range shares {
		mean, sd := meanStddev(shares[b])
		if mean > 0 {
			m.spread += sd / mean / float64(n)
		}
	}
	for _, x := range shares[0] {
		m.low, m.high = min(m.low, x), max(m.high, x)
	}
	m.overloaded = float64(overloaded) / float64(seconds*n)
	counted := [2]int{noisyNew, noisyOld}
	for b, u := range res.Utilization {
		gen := 0
		if b >= noisyNew {
			gen = 1
		}
		m.util[gen] += u / float64(counted[gen])
	}
	return m, nil
}

// meanStddev returns the mean and the population standard deviation of xs.
func meanStddev(xs []float64) (mean, sd float64) {
	if len(xs) == 0 {
		return 0, 0
	}
	for _, x := range xs {
		mean += x
	}
	mean /= float64(len(xs))
	for _, x := range xs {
		sd += (x - mean) * (x - mean)
	}
	return mean, math.Sqrt(sd / float64(len(xs)))
}
