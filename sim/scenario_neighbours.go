package sim

import (
	"fmt"
	"slices"
	"time"
)

func init() {
	register(Scenario{Name: "noisy-neighbours", Run: func(s Scale) (*Table, error) {
		r, err := NoisyNeighbours(s)
		if err != nil {
			return nil, err
		}
		return r.Table, nil
	}})
}

// NeighboursResult holds the noisy-neighbours scenario's numbers: one
// NeighboursRun per number of balancers (1, 50, 200).
type NeighboursResult struct {
	Policies []string
	Runs     []NeighboursRun
	Table    *Table
}

// NeighboursRun is one balancer count's numbers per policy, in column
// order, over the measured window.
type NeighboursRun struct {
	Clients int
	// P50, P99 and P999 are quantiles of the latency of successful calls.
	P50, P99, P999 []time.Duration
	// Failed is the share of calls that failed: with healthy backends and
	// a 1 s deadline, those that waited 1 s.
	Failed []float64
	// OnSlowed is the share of calls placed on a backend while it was
	// slowed down; spreading calls evenly gives SlowedTime.
	OnSlowed []float64
	// Busiest is the highest utilization of any backend.
	Busiest []float64
	// Probes is the load probes sent per call (pickwise_prequal's; 0 for
	// the policies that send none).
	Probes []float64
	// SlowedTime is the share of backend-time spent slowed down in the
	// measured window: the same for every policy.
	SlowedTime float64
}

// Noisy-neighbours parameters: a fleet of equal backends, each slowed now
// and then by something it shares a machine with.
const (
	nbBackends = 12
	nbWorkers  = 10
	nbMedian   = 10 * time.Millisecond
	// nbSigma spreads service times: lognormal, p99 3.2x the median.
	nbSigma = 0.5
	// nbRate is 70% of what the healthy fleet serves: 12 x 10 workers
	// over the lognormal's mean, 10 ms x e^(0.5^2/2) = 11.3 ms, make 10,590
	// rps. Capacity at the median (12,000 rps) overstates it by 13%: 70%
	// of that, 8,400 rps, is 95% of what the fleet serves on average with
	// a quarter of its backend-time slowed 2-4x, and the table would say
	// more about the fleet's overload than about placement.
	nbRate = 7400
	// Slowdowns: windows of U(nbSlowMin, nbSlowMax), each multiplying
	// service times by U(2, 4), separated by exponential gaps of mean
	// nbSlowGap, so that a backend is slowed about a quarter of the time
	// once nbMaxSlowed has dropped some.
	nbSlowMin = 2 * time.Second
	nbSlowMax = 8 * time.Second
	nbSlowGap = 10 * time.Second
	// nbMaxSlowed is the most backends slowed at once: a window that would
	// start while as many are slowed is dropped. Independent slowdowns
	// would now and then slow half the fleet, and the fleet, offered more
	// than it can serve, would queue whatever the placement: the table
	// would measure that spell rather than placement. Four slowed 4x
	// leave 93% of the fleet's capacity offered.
	nbMaxSlowed = 4
	// nbSlowSeed seeds each backend's slowdowns, with the backend's index:
	// every column and every balancer count meets the same ones.
	nbSlowSeed = 0x6e6f697379
	// Every run warms up for nbWarmup at a quarter of the rate, as
	// hardware-generations does: pickwise_orca_wrr sits out its 10 s
	// blackout as round robin, and at the full rate it would carry that
	// start-up's backlog into the measured window.
	nbWarmup     = 15 * time.Second
	nbWarmupRate = nbRate / 4
	nbDeadline   = time.Second
)

// nbClients are the balancer counts, one block of rows each.
var nbClients = []int{1, 50, 200}

// nbMeasured is how long each run is measured after the warm-up.
func nbMeasured(scale Scale) time.Duration {
	if scale == Reduced {
		return 5 * time.Second
	}
	return 30 * time.Second
}

// nbNeighbours are the scenario's slowdowns.
var nbNeighbours = Neighbours{Min: nbSlowMin, Max: nbSlowMax, MinFactor: 2, MaxFactor: 4, Gap: nbSlowGap, MaxSlowed: nbMaxSlowed, Seed: nbSlowSeed}

// nbRun is the scenario's run for clients balancers, measured for measured
// after the warm-up. The slowdowns are drawn up to the full scale's end
// whatever the scale, so a reduced run meets the same ones, fewer of them.
func nbRun(clients int, measured time.Duration) Run {
	slow := nbNeighbours.Slowdowns(nbBackends, nbWarmup+nbMeasured(Full))
	backends := make([]Backend, nbBackends)
	for i := range backends {
		backends[i] = Backend{Servers: nbWorkers, Service: LogNormal(nbMedian, nbSigma), Slow: slow[i]}
	}
	return Run{
		Seed:       19,
		Backends:   backends,
		Clients:    clients,
		Rate:       nbRate,
		Warmup:     nbWarmup,
		WarmupRate: nbWarmupRate,
		Duration:   nbWarmup + measured,
		Deadline:   nbDeadline,
	}
}

// nbSlowedTime is the share of backend-time that run's backends spend
// slowed down in its measured window.
func nbSlowedTime(run Run) float64 {
	var in time.Duration
	for _, b := range run.Backends {
		for _, w := range b.Slow {
			in += max(0, min(w.To, run.Duration)-max(w.From, run.Warmup))
		}
	}
	return in.Seconds() / (run.Duration - run.Warmup).Seconds() / float64(len(run.Backends))
}

// nbFleetLoad measures the fleet's load in run's measured window: the
// offered rate over the rate its backends serve at the speeds in force
// (workers over the mean service time, slowdowns included). It returns
// its time-weighted mean, its peak and the most backends slowed at once
// then, and how long it exceeds 1.
func nbFleetLoad(run Run) (mean, peak float64, slowedAtPeak int, over time.Duration) {
	// The load is constant between window edges.
	edges := []time.Duration{run.Warmup, run.Duration}
	for _, b := range run.Backends {
		for _, w := range b.Slow {
			edges = append(edges, w.From, w.To)
		}
	}
	slices.Sort(edges)
	edges = slices.Compact(edges)
	for i := 0; i+1 < len(edges); i++ {
		from, to := edges[i], edges[i+1]
		if from < run.Warmup || to > run.Duration {
			continue
		}
		capacity, n := 0.0, 0
		for _, b := range run.Backends {
			f := 1.0
			for _, w := range b.Slow {
				if from >= w.From && from < w.To {
					f *= w.Factor
				}
			}
			if f > 1 {
				n++
			}
			capacity += float64(b.Servers) / (b.Service.Mean().Seconds() * f)
		}
		load := run.Rate / capacity
		mean += load * (to - from).Seconds()
		if load > peak {
			peak, slowedAtPeak = load, n
		}
		if load > 1 {
			over += to - from
		}
	}
	return mean / (run.Duration - run.Warmup).Seconds(), peak, slowedAtPeak, over
}

// nbMeasurement is one policy's run reduced to the scenario's numbers.
type nbMeasurement struct {
	p50, p99, p999                    time.Duration
	failed, onSlowed, busiest, probes float64
}

// nbMeasure executes run with p and counts the calls placed on a slowed
// backend after the warm-up.
func nbMeasure(run Run, p Policy) (nbMeasurement, error) {
	var placed, onSlowed int
	run.OnPick = func(now time.Duration, _ *Request, backend int, _ time.Duration) {
		if now < run.Warmup {
			return
		}
		placed++
		if Slowed(run.Backends[backend].Slow, now) {
			onSlowed++
		}
	}
	res, err := run.Execute(p)
	if err != nil {
		return nbMeasurement{}, err
	}
	m := nbMeasurement{
		p50:     res.Quantile(0.5),
		p99:     res.Quantile(0.99),
		p999:    res.Quantile(0.999),
		failed:  res.ErrorRate(),
		busiest: slices.Max(res.Utilization),
	}
	if res.Total > 0 {
		m.probes = float64(res.Probes) / float64(res.Total)
	}
	if placed > 0 {
		m.onSlowed = float64(onSlowed) / float64(placed)
	}
	return m, nil
}

// NoisyNeighbours: 12 equal backends of 10 workers, lognormal service
// times with a 10 ms median (sigma 0.5), offered 7,400 requests per
// second, 70% of what they serve when healthy, with a 1 s deadline. Each
// backend spends about a quarter of the time slowed down 2-4x, in windows
// of 2-8 s at random times: a neighbour on its machine taking the CPU, the
// cache or the disk. No backend is broken and none is slow for long, so
// the question is how fast a policy moves calls off a backend that just
// slowed and back onto one that just recovered, with 1, 50 and 200
// balancers sharing the fleet: the more balancers, the thinner each one's
// view of every backend. The oracle column, which reads the backends'
// true state, is the bound.
func NoisyNeighbours(scale Scale) (*NeighboursResult, error) {
	measured := nbMeasured(scale)
	policies := []Policy{
		GRPC("round_robin", "round_robin", `{}`),
		GRPC("least_request", "least_request_experimental", `{}`),
		GRPC("pickwise_p2c", "pickwise_p2c", `{}`),
		GRPC("pickwise_peak_ewma", "pickwise_peak_ewma", `{}`),
		GRPC("pickwise_orca_wrr", "pickwise_orca_wrr", `{}`),
		GRPC("pickwise_prequal", "pickwise_prequal", `{}`),
		Oracle(),
	}
	out := &NeighboursResult{Policies: columns(policies)}
	for _, clients := range nbClients {
		run := nbRun(clients, measured)
		nr := NeighboursRun{Clients: clients, SlowedTime: nbSlowedTime(run)}
		for _, p := range policies {
			m, err := nbMeasure(run, p)
			if err != nil {
				return nil, err
			}
			nr.P50 = append(nr.P50, m.p50)
			nr.P99 = append(nr.P99, m.p99)
			nr.P999 = append(nr.P999, m.p999)
			nr.Failed = append(nr.Failed, m.failed)
			nr.OnSlowed = append(nr.OnSlowed, m.onSlowed)
			nr.Busiest = append(nr.Busiest, m.busiest)
			nr.Probes = append(nr.Probes, m.probes)
		}
		out.Runs = append(out.Runs, nr)
	}

	t := &Table{
		Title: fmt.Sprintf("Noisy neighbours: 12 backends of 10 workers, lognormal service (10 ms median, sigma %.1f), each slowed 2-4x a quarter of the time in 2-8 s windows; %s rps offered (70%% of the healthy fleet's capacity), 1 s deadline, for %.0f s after %.0f s at %s rps",
			nbSigma, thousands(nbRate), measured.Seconds(), nbWarmup.Seconds(), thousands(nbWarmupRate)),
		Columns: out.Policies,
	}
	for _, nr := range out.Runs {
		who := "1 balancer"
		if nr.Clients > 1 {
			who = fmt.Sprintf("%d balancers", nr.Clients)
		}
		t.AddRow(who+": p50, successful calls", msCells(nr.P50)...)
		t.AddRow(who+": p99, successful calls", msCells(nr.P99)...)
		t.AddRow(who+": p99.9, successful calls", msCells(nr.P999)...)
		t.AddRow(who+": failed (deadline)", pctCells(nr.Failed)...)
		t.AddRow(fmt.Sprintf("%s: calls placed on a slowed backend (even: %s)", who, Pct(nr.SlowedTime)), pctCells(nr.OnSlowed)...)
		t.AddRow(who+": busiest backend's utilization", pctCells(nr.Busiest)...)
		probes := make([]string, len(nr.Probes))
		for i, x := range nr.Probes {
			probes[i] = fmt.Sprintf("%.2f", x)
		}
		t.AddRow(who+": load probes per call", probes...)
	}
	t.AddNote(fmt.Sprintf("slowdowns: each backend's windows last U(2 s, 8 s) and multiply its service times by U(2, 4), with exponential gaps of mean %.0f s between them, drawn from a fixed seed per backend, less any that would start while %d backends are slowed: every column and every balancer count meets the same ones. \"even\" is the share of backend-time spent slowed in the measured window, what a placement blind to speed sends to slowed backends", nbSlowGap.Seconds(), nbMaxSlowed))
	t.AddNote("capacity: 10 workers over the lognormal's 11.3 ms mean serve 883 rps a backend, 10,590 rps the healthy fleet, of which 7,400 is 70%. A backend slowed 3x serves 294 rps, where an even split sends it 617, so its queue grows until its calls reach the deadline")
	mean, peak, n, over := nbFleetLoad(nbRun(1, measured))
	load := fmt.Sprintf("fleet load, the offered rate over what the backends serve at the speeds in force: %s on average over the measured window", Pct(mean))
	if over > 0 {
		load += fmt.Sprintf(", above 100%% for %.1f s of it, up to %s when %d backends are slowed at once. The slowdowns are independent, so such spells are common over half a minute; every policy queues in them, the oracle too", over.Seconds(), Pct(peak), n)
	} else {
		load += fmt.Sprintf(", at most %s: the fleet can always serve the load, if placement follows the speeds", Pct(peak))
	}
	t.AddNote(load)
	t.AddNote("measured after a 15 s warm-up at a quarter of the load, in which pickwise_orca_wrr sits out its 10 s blackout as round robin; slowdowns run through the warm-up too")
	t.AddNote("pickwise_orca_wrr: a backend's weight follows its reports, one per 1 s window, averaged with a 5 s half-life, and a slowed backend's queue would reach the deadline within about a second, before its reports have moved its weight far; a pick whose backend holds more of the balancer's calls than its weight and latency lead it to expect goes to a second candidate drawn by weight that holds fewer, so the calls in flight move calls off it at once")
	notes(t, policies)
	t.AddNote("the oracle's figures are the same for every number of balancers: it is one global view, whoever asks")
	addWallClockColumn(t)
	out.Table = t
	return out, nil
}
