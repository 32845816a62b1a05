package sim

import (
	"fmt"
	"slices"
	"time"
)

func init() {
	register(Scenario{Name: "hardware-generations-subsetting", Run: func(s Scale) (*Table, error) {
		r, err := SubsetHardware(s)
		if err != nil {
			return nil, err
		}
		return r.Table, nil
	}})
}

// SubsetHardwareResult holds the subsetted hardware-generations scenario's
// numbers per policy, in column order. Loads are means over a generation's
// backends, measured after the warm-up.
type SubsetHardwareResult struct {
	Policies []string
	// Clients balancers, NewCount and OldCount backends, subsets of
	// SubsetSize.
	Clients, NewCount, OldCount, SubsetSize int
	// NewUtil and OldUtil are the busy share of a generation's workers;
	// OldOffered is an old backend's arrival rate over its capacity.
	NewUtil, OldUtil, OldOffered []float64
	// P99 is the 99th percentile latency.
	P99 []time.Duration
	// ConnMin and ConnMax are the fewest and most balancers a backend has
	// a connection from.
	ConnMin, ConnMax []int
	// InFlight is the mean number of requests one balancer has in flight
	// at one backend it is connected to: what its local counter reads.
	InFlight []float64
	Table    *Table
}

// SubsetHardware is the hardware-generations scenario at fleet scale: 1,000
// balancers over 75 new backends (1,000 rps each) and 25 old ones (600
// rps), the same 3:1 mix and 83% load as HardwareGenerations, each balancer
// running pickwise_p2c over a subset of 20 backends chosen by
// pickwise_subset. It asks whether subsetting, which every large fleet
// needs for its connection count, helps or hurts the load-aware child:
// with 1,000 balancers each sees a thousandth of a backend's load, and a
// subset of 20 concentrates a balancer's traffic on a fifth of the
// backends, so each of its counters reads more (measured: 0.107 requests
// in flight per connection against 0.068 all-to-all, whose longer queues
// narrow the gap from the 5x the traffic alone would give). The signal
// stays thin either way: every column leaves the old generation near
// saturation, where pickwise_orca_wrr's backend-reported load
// (HardwareGenerations) does not thin out. The balanced mode
// gives every backend the same number of clients; without an index
// (rendezvous on a per-client clientId, as gRFC A68's random subsetting
// with a fixed seed) backends get statistically scattered client counts,
// and the old generation's share of a client's subset varies with it.
//
// Reduced scale (CI): 100 balancers over 15 new and 5 old backends,
// subsets of 4, the same ratios.
func SubsetHardware(scale Scale) (*SubsetHardwareResult, error) {
	clients, nNew, nOld, size := 1000, 75, 25, 20
	duration := 10 * time.Second
	if scale == Reduced {
		clients, nNew, nOld, size = 100, 15, 5, 4
		duration = 2 * time.Second
	}
	n := nNew + nOld
	// The same share of capacity as HardwareGenerations: 9,000 of 10,800.
	capacity := float64(nNew*1000 + nOld*600)
	rate := capacity * hwRate / (hwNew*1000 + hwOld*600)
	backends := make([]Backend, n)
	for i := range backends {
		gen := 0
		if i >= nNew {
			gen = 1
		}
		backends[i] = Backend{Servers: hwWorkers, Service: Const(hwService[gen])}
	}
	allToAll := pickwiseP2C()
	allToAll.Name = "pickwise_p2c (all-to-all)"
	policies := []Policy{
		allToAll,
		PickwiseSubset("pickwise_subset (balanced)", subsetBalanced, size, clients, pickwiseP2C()),
		PickwiseSubset("pickwise_subset (no index)", subsetNoIndex, size, clients, pickwiseP2C()),
	}
	out := &SubsetHardwareResult{Policies: columns(policies), Clients: clients, NewCount: nNew, OldCount: nOld, SubsetSize: size}
	for _, p := range policies {
		conns := make([]int, n)
		rec := recordConnections(p, n, conns)
		// pickwise_p2c holds no state that needs an off-peak start, unlike
		// pickwise_orca_wrr in HardwareGenerations; the first second is
		// left out only so that the queues have formed when measuring
		// starts.
		run := Run{Seed: 11, Backends: backends, Clients: clients, Rate: rate, Warmup: time.Second, Duration: time.Second + duration}
		from, to := run.Warmup, run.Duration
		var held time.Duration // request-time in flight within the window
		run.OnDone = func(now time.Duration, _ *Request, _ int, lat time.Duration, _ error) {
			held += max(0, min(now, to)-max(now-lat, from))
		}
		res, err := run.Execute(rec)
		if err != nil {
			return nil, err
		}
		var util, offered [2]float64
		for id := range res.Utilization {
			gen, count := 0, nNew
			if id >= nNew {
				gen, count = 1, nOld
			}
			util[gen] += res.Utilization[id] / float64(count)
			offered[gen] += res.Offered[id] / float64(count)
		}
		pairs := 0
		for _, c := range conns {
			pairs += c
		}
		out.NewUtil = append(out.NewUtil, util[0])
		out.OldUtil = append(out.OldUtil, util[1])
		out.OldOffered = append(out.OldOffered, offered[1])
		out.P99 = append(out.P99, res.Quantile(0.99))
		out.ConnMin = append(out.ConnMin, slices.Min(conns))
		out.ConnMax = append(out.ConnMax, slices.Max(conns))
		out.InFlight = append(out.InFlight, held.Seconds()/(to-from).Seconds()/float64(max(pairs, 1)))
	}

	t := &Table{
		Title: fmt.Sprintf("Hardware generations with subsetting: %s balancers running pickwise_p2c, %d backends at 1,000 rps and %d at 600 rps, %s rps offered (83%% of capacity) for %.0f s; subsets of %d",
			thousands(clients), nNew, nOld, thousands(int(rate)), duration.Seconds(), size),
		Columns: out.Policies,
	}
	k := len(policies)
	newU, oldU, oldO, p99 := make([]string, k), make([]string, k), make([]string, k), make([]string, k)
	connRange, inFlight := make([]string, k), make([]string, k)
	for i := range policies {
		newU[i], oldU[i], oldO[i] = Pct(out.NewUtil[i]), Pct(out.OldUtil[i]), Pct(out.OldOffered[i])
		p99[i] = Ms(out.P99[i])
		connRange[i] = fmt.Sprintf("%d-%d", out.ConnMin[i], out.ConnMax[i])
		inFlight[i] = fmt.Sprintf("%.3f", out.InFlight[i])
	}
	t.AddRow("new-gen utilization (even: 83%)", newU...)
	t.AddRow("old-gen utilization (even: 83%)", oldU...)
	t.AddRow("old-gen offered load (even: 83%)", oldO...)
	t.AddRow("p99 latency", p99...)
	t.AddRow("connections per backend, min-max", connRange...)
	t.AddRow("in flight per connection, one balancer's view", inFlight...)
	t.AddNote(fmt.Sprintf("pickwise_subset (balanced): mode balanced, clientIndex = the balancer's number, clientCount %s, subsetSize %d, child pickwise_p2c", thousands(clients), size))
	t.AddNote(fmt.Sprintf("pickwise_subset (no index): clientId = the balancer's number, subsetSize %d, child pickwise_p2c: rendezvous ranking, gRFC A68's random subsetting with a fixed seed", size))
	t.AddNote("the subsets are pickwise_subset's own functions over the backends' addresses; pickwise_p2c runs over each subset as the simulator runs it everywhere, in virtual time with a seeded source")
	t.AddNote("offered load is arrivals over capacity; above 100% a backend's queue grows for as long as the run lasts, and so does the p99")
	t.AddNote(`"one balancer's view": the mean in-flight count a balancer's local counter reads for one backend it is connected to; a subset carries a balancer's traffic to fewer backends, so its counters read more and its p99 is lower, but with this many balancers no column keeps the old generation below saturation`)
	out.Table = t
	return out, nil
}

// recordConnections wraps p so that every client's connections, read after
// each endpoint update, are counted per backend in counts (n backends).
func recordConnections(p Policy, n int, counts []int) Policy {
	inner := p.newInstance
	p.newInstance = func(e *env) (instance, error) {
		in, err := inner(e)
		if err != nil {
			return nil, err
		}
		return &connRecorder{instance: in, n: n, counts: counts}, nil
	}
	return p
}

// connRecorder keeps its instance's share of the per-backend connection
// counts up to date.
type connRecorder struct {
	instance
	n      int
	counts []int
	conns  []int // the instance's connections, as last counted
}

func (r *connRecorder) setBackends(ids []int) error {
	if err := r.instance.setBackends(ids); err != nil {
		return err
	}
	conns, err := subsetConnections(r.instance, r.n)
	if err != nil {
		return err
	}
	for _, id := range r.conns {
		r.counts[id]--
	}
	for _, id := range conns {
		r.counts[id]++
	}
	r.conns = conns
	return nil
}
