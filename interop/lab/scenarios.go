package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/pickwise/pickwise/interop/server"
	"github.com/pickwise/pickwise/sim"
	"google.golang.org/grpc"

	// The ORCA columns' policies, registered here rather than relied on
	// through another package's imports.
	_ "github.com/pickwise/pickwise/balancer/orcawrr"
	_ "github.com/pickwise/pickwise/balancer/prequal"
	_ "github.com/pickwise/pickwise/balancer/ringhash"
	_ "google.golang.org/grpc/balancer/weightedroundrobin"
)

// labPolicy is one column: a service config.
type labPolicy struct {
	name   string
	config string
	// weighted gives backends endpoint weights proportional to capacity,
	// as an xDS control plane would.
	weighted bool
	// settle sends the scenario's traffic at half its rate for settleFor
	// before the measured calls, not counted: the policy's weights come
	// from ORCA reports and are used only after a blackout, and a
	// scenario measures the steady state a long-lived client is in, not
	// the first second of a new one.
	settle bool
}

func lbConfig(name, cfg string) string {
	return fmt.Sprintf(`{"loadBalancingConfig":[{%q:%s}]}`, name, cfg)
}

var (
	roundRobin   = labPolicy{name: "round_robin", config: lbConfig("round_robin", "{}")}
	leastRequest = labPolicy{name: "least_request", config: lbConfig("least_request_experimental", "{}")}
	p2c          = labPolicy{name: "pickwise_p2c", config: lbConfig("pickwise_p2c", "{}")}
	p2cWeighted  = labPolicy{name: "pickwise_p2c (weights)", config: lbConfig("pickwise_p2c", "{}"), weighted: true}
	peakEWMA     = labPolicy{name: "pickwise_peak_ewma", config: lbConfig("pickwise_peak_ewma", "{}")}
	ringHash     = labPolicy{name: "ring_hash", config: lbConfig("ring_hash_experimental", `{"requestHashHeader":"`+keyHeader+`","minRingSize":1024}`)}
	// The pickwise_ring_hash columns read their key from the same header
	// as ring_hash's, with the default table (ring); the bounded one caps
	// each backend's in-flight calls at 1.25 times the mean.
	pwRingHash        = labPolicy{name: "pickwise_ring_hash", config: lbConfig("pickwise_ring_hash", `{"requestHashHeader":"`+keyHeader+`"}`)}
	pwRingHashBounded = labPolicy{name: "pickwise_ring_hash (bounded 1.25)", config: lbConfig("pickwise_ring_hash", `{"requestHashHeader":"`+keyHeader+`","balanceFactor":1.25}`)}
	orcaWRR           = labPolicy{name: "pickwise_orca_wrr", config: lbConfig("pickwise_orca_wrr", orcaLabConfig), settle: true}
	grpcWRR           = labPolicy{name: "weighted_round_robin", config: lbConfig("weighted_round_robin", orcaLabConfig), settle: true}
)

// orcaLabConfig is the config of both ORCA columns, ours and grpc-go's, so
// that they differ only in how they turn reports into picks. The defaults
// (a 10s blackout, weights recomputed every 1s) are for fleets that run
// for hours; a scenario runs for seconds. The durations are written the
// way grpc-go's parser requires ("0.1s", not "100ms").
const orcaLabConfig = `{"blackoutPeriod":"1s","weightUpdatePeriod":"0.1s"}`

// settleFor is how long the ORCA columns' unmeasured traffic lasts: the
// blackout, which started with the warm-up's reports, and two weight
// updates.
const settleFor = 1200 * time.Millisecond

// orcaNote says how the ORCA columns were run, under their tables.
var orcaNote = fmt.Sprintf("pickwise_orca_wrr, weighted_round_robin: blackoutPeriod 1s, weightUpdatePeriod 100ms, other fields at their defaults (pickwise_orca_wrr's weightHalfLife 5s); each first gets %v of the same traffic at half the rate, not counted, so that measuring starts after the blackout", settleFor)

// loadAware are the columns of the load-aware scenarios. A new policy is
// one entry here.
var loadAware = []labPolicy{roundRobin, leastRequest, p2c, peakEWMA}

// withORCA is loadAware plus the policies that follow backends' ORCA
// reports, for the scenarios whose backends report a load that matters.
func withORCA(ps ...labPolicy) []labPolicy {
	return append(append(append([]labPolicy(nil), loadAware...), ps...), orcaWRR, grpcWRR)
}

// labScenario is a small, real-gRPC version of a simulated scenario.
type labScenario struct {
	name string
	// backends is how many the scenario uses (the first ones of the fleet).
	backends int
	// local marks a scenario that stops and restarts the servers, which
	// only the lab's own fleet lets it do: -target skips it.
	local bool
	run   func(ctx context.Context, l *lab) (section, error)
}

var labScenarios = []labScenario{
	{name: "black-hole", backends: 10, run: blackHole},
	{name: "transient-failure", backends: 4, run: transientFailure},
	{name: "flapping-backend", backends: 10, run: flappingBackend},
	{name: "retry-storm", backends: 10, run: retryStorm},
	{name: "warm-rejoin", backends: 12, run: warmRejoin},
	{name: "slow-backend", backends: 10, run: slowBackend},
	{name: "hardware-generations", backends: 12, run: hardwareGenerations},
	{name: "noisy-neighbours", backends: nnBackends, run: noisyNeighbours},
	{name: "hot-key", backends: 10, run: hotKey},
	{name: "hash-black-hole", backends: 10, run: hashBlackHole},
	{name: "remap-storm", backends: 11, run: remapStorm},
	{name: "flapping-cache", backends: 10, run: flappingCache},
	{name: "rollout", backends: 12, run: rollout},
	{name: "drain", backends: drainBackends, local: true, run: drainScenario},
}

// result is one policy's run of a scenario.
type result struct {
	policy string
	out    outcome
}

// run drives tr through ch, reporting progress under scenario/policy.
func (l *lab) run(ctx context.Context, scenario, policy string, ch *channel, tr traffic) outcome {
	tr.seed = l.seed
	prog := l.progress.start(scenario, policy, tr.calls)
	o := drive(ctx, ch, tr, prog.update)
	prog.total = o.total
	prog.finish()
	return o
}

// open configures the fleet's first n backends with base and patches,
// dials them with p's config (and weights, if not nil) and warms the
// channel.
func (l *lab) open(ctx context.Context, scenario string, n int, p labPolicy, base string, patches map[int]string, weights map[int]uint32, opts ...grpc.DialOption) (*channel, error) {
	if err := l.fleet.configure(ctx, patches, base); err != nil {
		return nil, err
	}
	members := make([]int, n)
	for i := range members {
		members[i] = i
	}
	ch, err := dial(l.fleet, p.config, members, weights, opts...)
	if err != nil {
		return nil, err
	}
	if err := ch.warm(ctx, n); err != nil {
		ch.conn.Close()
		return nil, fmt.Errorf("%s/%s: %w", scenario, p.name, err)
	}
	return ch, nil
}

// set patches backend i's behavior.
func (l *lab) set(ctx context.Context, i int, patch string) error {
	_, err := server.SetBehavior(ctx, l.fleet.admin[i], patch)
	return err
}

// runPolicies runs tr once per policy over the first n backends, each with
// the fleet configured by patches (backend index -> behavior JSON).
func (l *lab) runPolicies(ctx context.Context, scenario string, n int, policies []labPolicy, base string, patches map[int]string, weights map[int]uint32, tr traffic) ([]result, error) {
	var out []result
	for _, p := range l.keep(scenario, policies) {
		var w map[int]uint32
		if p.weighted {
			w = weights
		}
		ch, err := l.open(ctx, scenario, n, p, base, patches, w)
		if err != nil {
			return nil, err
		}
		if p.settle {
			if tr.rate <= 0 {
				ch.conn.Close()
				return nil, fmt.Errorf("%s/%s: settling needs open-loop traffic (a rate)", scenario, p.name)
			}
			l.run(ctx, scenario, p.name+" (settle)", ch, traffic{calls: int(tr.rate / 2 * settleFor.Seconds()), rate: tr.rate / 2, deadline: tr.deadline})
		}
		// Warm-up calls must not count, and backends start the run cold
		// only if the scenario says so.
		if err := l.fleet.configure(ctx, patches, base); err != nil {
			ch.conn.Close()
			return nil, err
		}
		o := l.run(ctx, scenario, p.name, ch, tr)
		ch.conn.Close()
		out = append(out, result{policy: p.name, out: o})
	}
	return out, nil
}

// newSection is a scenario's report section: its table, with the policies
// in column order and no charts yet.
func newSection(name string, t *sim.Table, rs []result) section {
	return section{Name: name, Table: t, Order: names(rs)}
}

// latencyChart is the distribution of rs' successful calls' latencies.
func latencyChart(rs []result) chart {
	c := chart{Kind: latencyCDF, Title: "Latency of successful calls",
		Reading:   "further left is faster; the top of the plot is the tail (p99, p99.9)",
		Latencies: map[string][]time.Duration{}}
	for _, r := range rs {
		c.Latencies[r.policy] = r.out.latencies
	}
	return c
}

// sharesChart is each policy's share of calls per backend, over the
// backends up to the last one any policy used. target is the good share:
// one for every backend, or one per backend of the fleet.
func (l *lab) sharesChart(rs []result, reading string, target []float64, targetLabel string) chart {
	c := chart{Kind: backendShares, Title: "Share of calls per backend", Reading: reading,
		Shares: map[string][]float64{}, Target: target, TargetLabel: targetLabel}
	used := 0
	for _, r := range rs {
		sh := r.out.shares(l.fleet)
		c.Shares[r.policy] = sh
		for i, v := range sh {
			if v > 0 {
				used = max(used, i+1)
			}
		}
	}
	if len(target) > 1 {
		used = max(used, min(len(target), len(l.fleet.names)))
		c.Target = target[:used]
	}
	c.Backends = l.fleet.names[:used]
	for p, sh := range c.Shares {
		c.Shares[p] = sh[:used]
	}
	return c
}

// errorsChart is each policy's share of calls that failed.
func errorsChart(rs []result, reading string) chart {
	c := chart{Kind: policyValues, Title: "Calls that failed", Reading: reading,
		Values: map[string]float64{}, Percent: true, Axis: "failed calls, share of all calls"}
	for _, r := range rs {
		c.Values[r.policy] = float64(r.out.failed) / float64(max(r.out.total, 1))
	}
	return c
}

// evenShare is a backend's share of calls when n share them equally.
func evenShare(n int) float64 { return 1 / float64(n) }

func names(rs []result) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.policy
	}
	return out
}

func row(rs []result, f func(outcome) string) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = f(r.out)
	}
	return out
}

func share(o outcome, backend string) float64 {
	if o.total == 0 {
		return 0
	}
	return float64(o.perBackend[backend]) / float64(o.total)
}

// blackHole: one backend fails every call at once; the rest take 20 ms.
//
// Every backend reports ORCA per call, rated for 100 calls/s: utilization
// is calls answered per second / 100 ("rate"), so a healthy backend at
// its fair 50 calls/s reports 50%, and the broken one reports its errors
// per second as well. Its failures count as calls answered, which gives it
// a utilization above 0: a report of 0 is discarded by both ORCA policies
// (no finite weight), and with it the error rate the scenario is about.
// The server's "computed" utilization would report exactly that 0, since a
// failing call never takes a slot.
func blackHole(ctx context.Context, l *lab) (section, error) {
	n := 10
	rs, err := l.runPolicies(ctx, "black-hole", n, withORCA(),
		`{"latency":"20ms","latencySpread":0.2,"orca":{"perCall":true,"utilization":"rate","ratedQps":100}}`,
		map[int]string{0: `{"errorRate":1,"errorCode":"UNAVAILABLE","errorLatency":"0s"}`}, nil,
		traffic{calls: l.calls(1500), rate: 500})
	if err != nil {
		return section{}, err
	}
	broken := l.fleet.names[0]
	t := &sim.Table{Title: fmt.Sprintf("Black hole (real gRPC): %d backends at 20 ms, %s fails every call at once; 500 calls/s", n, broken), Columns: names(rs)}
	t.AddRow("share to the broken backend (fair: 10%)", row(rs, func(o outcome) string { return sim.Pct(share(o, broken)) })...)
	t.AddRow("errors seen by clients", row(rs, func(o outcome) string { return sim.Pct(float64(o.failed) / float64(max(o.total, 1))) })...)
	t.AddRow("p50 of successful calls", row(rs, func(o outcome) string { return sim.Ms(sim.Quantile(o.latencies, 0.5)) })...)
	t.AddRow("p99 of successful calls", row(rs, func(o outcome) string { return sim.Ms(sim.Quantile(o.latencies, 0.99)) })...)
	t.AddNote("every backend reports ORCA per call: utilization = calls answered per second / 100, and errors per second; the broken backend's failures count as calls answered, so its reports carry its error rate rather than a utilization of 0, which both ORCA policies would discard")
	t.AddNote(orcaNote)
	// The failing backend's share is the result; the latency of the calls
	// that succeed is the same 20 ms under every policy.
	sec := newSection("black-hole", t, rs)
	goal := make([]float64, n)
	for i := 1; i < n; i++ {
		goal[i] = evenShare(n - 1)
	}
	sec.Charts = []chart{
		l.sharesChart(rs, fmt.Sprintf("the failing %s should get almost nothing, the %d others %s each", broken, n-1, sim.Pct(evenShare(n-1))),
			goal, fmt.Sprintf("goal: none to %s, an even split of the rest", broken)),
		errorsChart(rs, fmt.Sprintf("shorter is better: the calls that fail are those sent to %s", broken)),
	}
	return sec, nil
}

// slowBackend: one backend of ten takes 20x longer; calls have a deadline.
func slowBackend(ctx context.Context, l *lab) (section, error) {
	n := 10
	deadline := 250 * time.Millisecond
	rs, err := l.runPolicies(ctx, "slow-backend", n, loadAware,
		`{"latency":"20ms","latencySpread":0.3}`,
		map[int]string{0: `{"latency":"400ms"}`}, nil,
		traffic{calls: l.calls(2000), rate: 400, deadline: deadline})
	if err != nil {
		return section{}, err
	}
	slow := l.fleet.names[0]
	t := &sim.Table{Title: fmt.Sprintf("One slow backend (real gRPC): %d backends at 20 ms, %s at 400 ms; 400 calls/s, %v deadline", n, slow, deadline), Columns: names(rs)}
	t.AddRow("share to the slow backend (fair: 10%)", row(rs, func(o outcome) string { return sim.Pct(share(o, slow)) })...)
	for _, q := range []float64{0.5, 0.99, 0.999} {
		t.AddRow(fmt.Sprintf("p%g of successful calls", 100*q), row(rs, func(o outcome) string { return sim.Ms(sim.Quantile(o.latencies, q)) })...)
	}
	t.AddRow("success within the deadline", row(rs, func(o outcome) string { return sim.Pct(1 - float64(o.failed)/float64(max(o.total, 1))) })...)
	sec := newSection("slow-backend", t, rs)
	sec.Charts = []chart{
		latencyChart(rs),
		l.sharesChart(rs, fmt.Sprintf("%s is 20x slower: the less it gets the better; the rest share evenly", slow),
			[]float64{evenShare(n)}, fmt.Sprintf("even share, %s", sim.Pct(evenShare(n)))),
	}
	return sec, nil
}

// hardwareGenerations: 9 backends serve 100 calls/s, 3 older ones 60;
// 900 calls/s offered. An even split gives the old ones 75: 125% load.
//
// A backend is one slot with a fixed service time, so its capacity is
// 1/latency. Every backend reports ORCA per call with utilization = calls
// served per second / that capacity ("rate"): with one slot and a fixed
// service time this is exactly the fraction of the last second the slot
// was busy, what a CPU meter shows. The server's "computed" utilization,
// busy slots / capacity at the moment a call finishes, would read 100% on
// every report here, because the finishing call holds the only slot.
func hardwareGenerations(ctx context.Context, l *lab) (section, error) {
	n := 12
	const newLatency, oldLatency = 10 * time.Millisecond, 16700 * time.Microsecond
	orcaReport := func(latency time.Duration) string {
		return fmt.Sprintf(`"orca":{"perCall":true,"utilization":"rate","ratedQps":%.2f}`, 1/latency.Seconds())
	}
	patches, weights := map[int]string{}, map[int]uint32{}
	for i := 0; i < n; i++ {
		weights[i] = 10
		if i >= 9 {
			patches[i] = fmt.Sprintf(`{"latency":%q,%s}`, oldLatency, orcaReport(oldLatency))
			weights[i] = 6
		}
	}
	policies := withORCA(p2cWeighted)
	rate := 900.0
	rs, err := l.runPolicies(ctx, "hardware-generations", n, policies,
		fmt.Sprintf(`{"latency":%q,"capacity":1,%s}`, newLatency, orcaReport(newLatency)), patches, weights,
		traffic{calls: l.calls(2250), rate: rate})
	if err != nil {
		return section{}, err
	}
	t := &sim.Table{Title: "Two hardware generations (real gRPC): 9 backends of 100 calls/s, 3 of 60; 900 calls/s offered", Columns: names(rs)}
	offered := func(o outcome, idx []int, capacity float64) string {
		calls := 0
		for _, i := range idx {
			calls += o.perBackend[l.fleet.names[i]]
		}
		return sim.Pct(float64(calls) / float64(max(o.total, 1)) * rate / float64(len(idx)) / capacity)
	}
	t.AddRow("offered load, new generation", row(rs, func(o outcome) string { return offered(o, []int{0, 1, 2, 3, 4, 5, 6, 7, 8}, 100) })...)
	t.AddRow("offered load, old generation", row(rs, func(o outcome) string { return offered(o, []int{9, 10, 11}, 60) })...)
	t.AddRow("p50 of successful calls", row(rs, func(o outcome) string { return sim.Ms(sim.Quantile(o.latencies, 0.5)) })...)
	t.AddRow("p99 of successful calls", row(rs, func(o outcome) string { return sim.Ms(sim.Quantile(o.latencies, 0.99)) })...)
	t.AddNote("every backend reports ORCA per call: utilization = calls served per second / its capacity (100 or 60), the busy fraction of its one slot")
	t.AddNote(orcaNote)
	// A backend's fair share is its part of the fleet's capacity.
	capacity := make([]float64, n)
	sum := 0.0
	for i := range capacity {
		capacity[i] = 1 / newLatency.Seconds()
		if _, old := patches[i]; old {
			capacity[i] = 1 / oldLatency.Seconds()
		}
		sum += capacity[i]
	}
	for i := range capacity {
		capacity[i] /= sum
	}
	sec := newSection("hardware-generations", t, rs)
	sec.Charts = []chart{
		l.sharesChart(rs, fmt.Sprintf("best at the dashed marks, shares by capacity: %s for 0-8, %s for 9-11", sim.Pct(capacity[0]), sim.Pct(capacity[n-1])),
			capacity, fmt.Sprintf("share by capacity (an even split: %s)", sim.Pct(evenShare(n)))),
		latencyChart(rs),
	}
	return sec, nil
}

// zipfKeys returns a seeded Zipf key sequence over nKeys keys.
func zipfKeys(calls, nKeys int) []string {
	z := rand.NewZipf(rand.New(rand.NewPCG(7, 7)), 1.1, 1, uint64(nKeys-1))
	keys := make([]string, calls)
	for i := range keys {
		keys[i] = "key-" + strconv.FormatUint(z.Uint64(), 10)
	}
	return keys
}

// hotKey: Zipf-popular keys hashed onto 10 backends.
func hotKey(ctx context.Context, l *lab) (section, error) {
	n := 10
	keys := zipfKeys(l.calls(3000), 1000)
	rs, err := l.runPolicies(ctx, "hot-key", n, []labPolicy{roundRobin, ringHash, pwRingHash, pwRingHashBounded}, `{"latency":"2ms"}`, nil, nil,
		traffic{calls: len(keys), workers: 16, key: func(i int) string { return keys[i] }})
	if err != nil {
		return section{}, err
	}
	t := &sim.Table{Title: "Hot key (real gRPC): 1,000 keys with Zipf(1.1) popularity over 10 backends", Columns: names(rs)}
	t.AddRow("max / mean calls per backend", row(rs, func(o outcome) string {
		top := 0
		for _, c := range o.perBackend {
			top = max(top, c)
		}
		return fmt.Sprintf("%.2f", float64(top)/(float64(o.total)/float64(n)))
	})...)
	t.AddRow("keys always on one backend", row(rs, func(o outcome) string {
		return sim.Pct(1 - float64(len(o.keySplit))/float64(max(len(o.keyBackend), 1)))
	})...)
	t.AddNote("pickwise_ring_hash (bounded 1.25): a backend is skipped while its in-flight calls would exceed ceil(1.25 x (in flight + 1) / 10); with 16 calls in flight the cap is 2, so a popular key's calls spill to the next backends and fewer keys stay on one")
	sec := newSection("hot-key", t, rs)
	sec.Charts = []chart{
		l.sharesChart(rs, fmt.Sprintf("closer to the dashed even share (%s) is better: a hot key's backend peaks", sim.Pct(evenShare(n))),
			[]float64{evenShare(n)}, fmt.Sprintf("even share, %s", sim.Pct(evenShare(n)))),
	}
	return sec, nil
}

// remapStorm: add an 11th backend behind a key-affine policy and count keys
// whose backend changed.
func remapStorm(ctx context.Context, l *lab) (section, error) {
	nKeys := l.calls(500)
	keys := make([]string, nKeys)
	for i := range keys {
		keys[i] = "key-" + strconv.Itoa(i)
	}
	tr := traffic{calls: nKeys, workers: 16, key: func(i int) string { return keys[i] }}
	before := make([]int, 10)
	for i := range before {
		before[i] = i
	}
	after := append(append([]int(nil), before...), 10)
	var moved, toNewcomer []string
	movedShare := map[string]float64{}
	newcomer := l.fleet.names[10]
	policies := l.keep("remap-storm", []labPolicy{ringHash, pwRingHash, pwRingHashBounded})
	for _, p := range policies {
		if err := l.fleet.configure(ctx, nil, `{"latency":"1ms"}`); err != nil {
			return section{}, err
		}
		ch, err := dial(l.fleet, p.config, before, nil)
		if err != nil {
			return section{}, err
		}
		if err := ch.warm(ctx, 1); err != nil {
			ch.conn.Close()
			return section{}, err
		}
		tr := tr
		if p == pwRingHashBounded {
			// One call at a time, so that no backend is ever over its cap
			// and every key goes to its first choice: the column measures
			// what its table moves, not which calls spilled.
			tr.workers = 1
		}
		prog := l.progress.start("remap-storm", p.name+" (10 backends)", nKeys)
		o1 := drive(ctx, ch, tr, prog.update)
		prog.finish()
		ch.setMembers(l.fleet, after)
		if err := ch.warm(ctx, 1); err != nil {
			ch.conn.Close()
			return section{}, err
		}
		// Let the new endpoint connect before measuring.
		time.Sleep(200 * time.Millisecond)
		prog = l.progress.start("remap-storm", p.name+" (11 backends)", nKeys)
		o2 := drive(ctx, ch, tr, prog.update)
		prog.finish()
		ch.conn.Close()
		n, toNew := 0, 0
		for k, b := range o1.keyBackend {
			if b2, ok := o2.keyBackend[k]; ok && b2 != b {
				n++
				if b2 == newcomer {
					toNew++
				}
			}
		}
		movedShare[p.name] = float64(n) / float64(max(len(o1.keyBackend), 1))
		moved = append(moved, sim.Pct(movedShare[p.name]))
		toNewcomer = append(toNewcomer, sim.Pct(float64(toNew)/float64(max(n, 1))))
	}
	t := &sim.Table{Title: fmt.Sprintf("Remap storm (real gRPC): %d keys, 10 -> 11 backends", nKeys), Columns: nil}
	for _, p := range policies {
		t.Columns = append(t.Columns, p.name)
	}
	t.AddRow("keys moved (ideal: 1/11 = 9.1%; modulo hashing: 90.9%)", moved...)
	t.AddRow("of those, keys moved to the newcomer (ideal: all)", toNewcomer...)
	t.AddNote("ring_hash: its ring keeps about minRingSize (1024) entries, so the newcomer takes entries from every old backend; pickwise_ring_hash gives each endpoint at least 128 entries below its memory budget, so it moves only the newcomer's keys")
	t.AddNote("pickwise_ring_hash (bounded 1.25): its keys are sent one call at a time, so none spills: it moves what its table moves")
	sec := section{Name: "remap-storm", Table: t, Order: t.Columns}
	ideal := 1 / float64(len(after))
	sec.Charts = []chart{{
		Kind: policyValues, Title: fmt.Sprintf("Keys that moved, %d -> %d backends", len(before), len(after)),
		Reading: fmt.Sprintf("shorter is better, down to the ideal %s: the newcomer's keys (modulo: %s)", sim.Pct(ideal), sim.Pct(1-ideal)),
		Values:  movedShare, Percent: true, Axis: "keys whose backend changed",
		Target: []float64{ideal}, TargetLabel: fmt.Sprintf("ideal: the newcomer's 1/%d of the keys", len(after)),
	}}
	return sec, nil
}
