package sim

import (
	"fmt"
	"time"
)

func init() {
	register(Scenario{Name: "hardware-generations", Run: func(s Scale) (*Table, error) {
		r, err := HardwareGenerations(s)
		if err != nil {
			return nil, err
		}
		return r.Table, nil
	}})
}

// HardwareResult holds the hardware-generations scenario's numbers: one
// HardwareRun per number of balancers (1, then 20).
type HardwareResult struct {
	Policies []string
	Runs     []HardwareRun
	Table    *Table
}

// HardwareRun is one balancer count's numbers per policy, in column order.
// Loads are means over a generation's backends, measured over the arrival
// window.
type HardwareRun struct {
	Clients int
	// NewUtil and OldUtil are the busy share of a new- and an
	// old-generation backend's workers.
	NewUtil, OldUtil []float64
	// NewOffered and OldOffered are a backend's arrival rate over its
	// capacity: above 1, its queue grows without bound.
	NewOffered, OldOffered []float64
	// P99 is the 99th percentile latency.
	P99 []time.Duration
	// InFlight is the mean number of requests one balancer has in flight
	// at one backend: the whole of the signal a local load counter reads.
	InFlight []float64
}

// Hardware generations, the classic worked example of round robin
// overloading older machines.
const (
	hwNew     = 9    // new-generation backends, 1,000 rps each
	hwOld     = 3    // old-generation backends, 600 rps each
	hwWorkers = 10   // concurrent requests per backend, both generations
	hwRate    = 9000 // offered requests per second: 83% of 10,800
	// Every run warms up off-peak for hwWarmup at hwWarmupRate (a quarter
	// of peak, which even round robin serves without queueing) before the
	// measured window at hwRate. pickwise_orca_wrr ignores reports for
	// its first 10 s (blackout) and places as round robin meanwhile; at
	// peak that would leave the old generation a backlog to carry into the
	// measured window, and the table would show its start-up rather than
	// its steady state. The other policies hold no state that needs it.
	hwWarmup     = 15 * time.Second
	hwWarmupRate = hwRate / 4
)

// hwService is each generation's service time. Both generations run the
// same number of workers and the old one runs each request slower: an
// older CPU generation is slower per request rather than narrower, so its
// latency is higher even when idle, and its service rate (600/s against
// 1,000/s) is what the textbook M/M/1 arithmetic uses. It also means a
// backend's in-flight count, by Little's law, rises on the old generation
// at the same arrival rate, which is the signal least-request balancing
// works from. Service times are constant so that capacity is exactly
// workers / service time.
var hwService = [2]time.Duration{10 * time.Millisecond, time.Second / 60}

// hwBackends returns the fleet, new generation first. With weighted, each
// backend carries the weight an xDS control plane would publish for it,
// proportional to capacity.
func hwBackends(weighted bool) []Backend {
	out := make([]Backend, hwNew+hwOld)
	for i := range out {
		gen := 0
		if i >= hwNew {
			gen = 1
		}
		out[i] = Backend{Servers: hwWorkers, Service: Const(hwService[gen])}
		if weighted {
			out[i].Weight = [2]uint32{10, 6}[gen]
		}
	}
	return out
}

// HardwareGenerations: 9 backends sustaining 1,000 requests per second and
// 3 older ones sustaining 600, 9,000 requests per second offered (83% of
// the fleet's capacity), with 1 balancer and with 20. Round robin and
// random give every backend 750 rps, 125% of an old one's capacity, so
// those queues grow for as long as the run lasts. Least-request balancing
// shifts load to the new generation, as far as its local counters can see:
// with 20 balancers each one sees a twentieth of every backend's load and
// the signal thins. "pickwise_p2c (weights)" is told the capacity ratio
// through xDS-style endpoint weights (10 and 6). pickwise_orca_wrr learns
// it from the backends' ORCA reports (qps over busy share is a backend's
// capacity), which every balancer receives in full however many there
// are. Each run warms up off-peak first (hwWarmup).
func HardwareGenerations(scale Scale) (*HardwareResult, error) {
	duration := 20 * time.Second
	if scale == Reduced {
		duration = 3 * time.Second
	}
	type column struct {
		policy   Policy
		weighted bool
	}
	var cols []column
	for _, p := range loadAwarePolicies() {
		cols = append(cols, column{policy: p})
	}
	cols = append(cols, column{policy: GRPC("pickwise_p2c (weights)", "pickwise_p2c", `{}`), weighted: true},
		column{policy: GRPC("pickwise_prequal", "pickwise_prequal", `{}`)},
		column{policy: Oracle()})
	policies := make([]Policy, len(cols))
	for i, c := range cols {
		policies[i] = c.policy
	}
	out := &HardwareResult{Policies: columns(policies)}

	for _, clients := range []int{1, 20} {
		hr := HardwareRun{Clients: clients}
		for _, c := range cols {
			m, err := hwMeasure(hwRun(c.weighted, clients, duration), c.policy)
			if err != nil {
				return nil, err
			}
			hr.NewUtil = append(hr.NewUtil, m.util[0])
			hr.OldUtil = append(hr.OldUtil, m.util[1])
			hr.NewOffered = append(hr.NewOffered, m.offered[0])
			hr.OldOffered = append(hr.OldOffered, m.offered[1])
			hr.P99 = append(hr.P99, m.p99)
			hr.InFlight = append(hr.InFlight, m.inFlight)
		}
		out.Runs = append(out.Runs, hr)
	}

	t := &Table{
		Title: fmt.Sprintf("Hardware generations: 9 backends at 1,000 rps and 3 at 600 rps, 9,000 rps offered (83%% of capacity) for %.0f s, after %.0f s at %s rps",
			duration.Seconds(), hwWarmup.Seconds(), thousands(hwWarmupRate)),
		Columns: out.Policies,
	}
	for _, hr := range out.Runs {
		who := "1 balancer"
		if hr.Clients > 1 {
			who = fmt.Sprintf("%d balancers", hr.Clients)
		}
		p99 := make([]string, len(hr.P99))
		inFlight := make([]string, len(hr.InFlight))
		for i := range hr.P99 {
			p99[i] = Ms(hr.P99[i])
			inFlight[i] = fmt.Sprintf("%.2f", hr.InFlight[i])
		}
		t.AddRow(who+": new-gen utilization (even: 83%)", pctCells(hr.NewUtil)...)
		t.AddRow(who+": old-gen utilization (even: 83%)", pctCells(hr.OldUtil)...)
		t.AddRow(who+": old-gen offered load (even: 83%)", pctCells(hr.OldOffered)...)
		t.AddRow(who+": p99 latency", p99...)
		t.AddRow(who+": in flight per backend, one balancer's view", inFlight...)
	}
	t.AddNote("offered load is arrivals over capacity; above 100% a backend's queue grows for as long as the run lasts, and so does the p99 of a policy that overloads it")
	t.AddNote("pickwise_p2c (weights): endpoints carry weights 10 (new) and 6 (old), as an xDS control plane would publish them")
	t.AddNote("pickwise_p2c (weights) with 1 balancer overshoots, leaving the old generation well below 83%: its cost, (in flight + 1) / weight, counts the slower service twice, in the weight and in the longer in-flight count it causes (Little's law); with 20 balancers the counts carry little and the weight alone lands nearer the even split")
	t.AddNote(`"one balancer's view": the mean count a balancer's local counter for one backend reads; with 20 balancers it is a twentieth of the load and rarely tells an overloaded backend from a busy one`)
	t.AddNote("measured after the warm-up only: every run first spends 15 s off-peak (a quarter of the load), in which pickwise_orca_wrr sits out its 10 s blackout as round robin; at peak that start-up would leave the old generation a backlog")
	t.AddNote("pickwise_orca_wrr reads each call's ORCA report: the backend's completions per second and busy share of its workers over its last 1 s window, so qps / utilization is the backend's capacity, 1,000 or 600, and the weights put every backend near 83%. The reports are the backends' own counts, the same for every balancer, so the split holds with 20 balancers, where in-flight counts thin out")
	t.AddNote("pickwise_peak_ewma, unweighted, moves load off the old generation about as far with 20 balancers as with 1: it reads each request's latency, which every balancer sees in full, where in-flight counts thin out; old-generation requests take 17 ms against 10 ms even when nothing queues. With 1 balancer it overshoots as the weighted column does, since (in flight + 1) counts the slower service a second time")
	notes(t, policies)
	t.AddNote("oracle: with constant service times it fills the new generation first: a call waits for a new-generation worker while that is expected sooner than an old-generation backend's 17 ms service, so the old generation takes only the overflow. It minimizes each call's expected completion, not the tail: a call queued behind a few others on a new-generation backend can end a little after 17 ms, so its p99 can be a millisecond above the best policies'")
	addWallClockColumn(t)
	out.Table = t
	return out, nil
}

// hwRun is the scenario's run for clients balancers, measured for
// duration after the warm-up.
func hwRun(weighted bool, clients int, duration time.Duration) Run {
	return Run{
		Seed:       7,
		Backends:   hwBackends(weighted),
		Clients:    clients,
		Rate:       hwRate,
		Warmup:     hwWarmup,
		WarmupRate: hwWarmupRate,
		Duration:   hwWarmup + duration,
	}
}

// hwMeasurement is one policy's run reduced to the scenario's numbers;
// index 0 is the new generation, 1 the old.
type hwMeasurement struct {
	util, offered [2]float64
	p99           time.Duration
	inFlight      float64
}

// hwMeasure executes run with p and averages each generation's
// utilization and offered load, which the simulator measures over the
// arrival window after the warm-up. It also measures how many requests one
// balancer sees in flight per backend over that window.
func hwMeasure(run Run, p Policy) (hwMeasurement, error) {
	from, to := run.Warmup, run.Duration
	window := to - from
	var held time.Duration // request-time in flight within the window
	run.OnDone = func(now time.Duration, _ *Request, _ int, lat time.Duration, _ error) {
		held += max(0, min(now, to)-max(now-lat, from))
	}
	res, err := run.Execute(p)
	if err != nil {
		return hwMeasurement{}, err
	}
	var m hwMeasurement
	counts := [2]int{hwNew, hwOld}
	for id := range res.Utilization {
		gen := hwGen(id)
		m.util[gen] += res.Utilization[id] / float64(counts[gen])
		m.offered[gen] += res.Offered[id] / float64(counts[gen])
	}
	m.p99 = res.Quantile(0.99)
	// Little's law over the window: mean in flight is held request-time
	// over elapsed time, spread over backends and balancers.
	m.inFlight = held.Seconds() / window.Seconds() / float64((hwNew+hwOld)*max(run.Clients, 1))
	return m, nil
}

// hwGen is backend id's generation: 0 new, 1 old.
func hwGen(id int) int {
	if id >= hwNew {
		return 1
	}
	return 0
}
