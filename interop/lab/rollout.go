package main

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/pickwise/pickwise/balancer/shadow"
	"github.com/pickwise/pickwise/sim"
)

// rollout: the rollout of pickwise_p2c over round_robin on two hardware
// generations (9 backends at 10 ms, 3 at 16.7 ms, one call at a time
// each), one config at a time: round_robin live; round_robin live with
// p2c asked on every pick (pickwise_shadow); a 10% canary; p2c live. The
// shadow's predicted shares are read against the shares p2c gives live.
func rollout(ctx context.Context, l *lab) (section, error) {
	const n, rate = 12, 650.0 // 60% of the 1,080 calls/s the fleet serves
	const newLatency, oldLatency = 10 * time.Millisecond, 16700 * time.Microsecond
	base := fmt.Sprintf(`{"latency":%q,"capacity":1}`, newLatency)
	patches := map[int]string{}
	for i := 9; i < n; i++ {
		patches[i] = fmt.Sprintf(`{"latency":%q,"capacity":1}`, oldLatency)
	}
	const pair = `"live": [{"round_robin": {}}], "candidate": [{"pickwise_p2c": {}}]`
	policies := l.keep("rollout", []labPolicy{
		roundRobin,
		{name: "shadow, sampleRate 1", config: lbConfig("pickwise_shadow", `{`+pair+`, "sampleRate": 1}`)},
		{name: "canary 10%", config: lbConfig("pickwise_shadow", `{`+pair+`, "sampleRate": 0.1, "canaryPercent": 10}`)},
		p2c,
	})
	// At least 1,500 calls a stage at any scale: the prediction moves the
	// old generation's share about a point below the even 8.3%, and over
	// fewer calls a share's noise is as large (with 300, one standard
	// error of the three backends' mean is near a point).
	tr := traffic{calls: max(l.calls(3000), 1500), rate: rate}
	var rs []result
	summaries := map[string]shadow.Summary{}
	for _, p := range policies {
		ch, err := l.open(ctx, "rollout", n, p, base, patches, nil)
		if err != nil {
			return section{}, err
		}
		target := ch.conn.Target()
		var before shadow.Summary
		for _, s := range shadow.Summaries() {
			if s.Target == target {
				before = s
			}
		}
		o := l.run(ctx, "rollout", p.name, ch, tr)
		for _, s := range shadow.Summaries() {
			if s.Target == target {
				summaries[p.name] = minus(s, before)
			}
		}
		ch.conn.Close()
		rs = append(rs, result{policy: p.name, out: o})
	}
	placed := func(o outcome, idx []int) float64 {
		calls := 0
		for _, i := range idx {
			calls += o.perBackend[l.fleet.names[i]]
		}
		return float64(calls) / float64(max(o.total, 1)) / float64(len(idx))
	}
	predicted := func(s shadow.Summary, idx []int) float64 {
		sum := 0.0
		for _, i := range idx {
			for _, e := range s.Endpoints {
				if e.Addr == l.fleet.addrs[i] {
					_, c := e.Shares(s)
					sum += c
				}
			}
		}
		return sum / float64(len(idx))
	}
	newGen, oldGen := []int{0, 1, 2, 3, 4, 5, 6, 7, 8}, []int{9, 10, 11}
	var live *outcome
	for i := range rs {
		if rs[i].policy == p2c.name {
			live = &rs[i].out
		}
	}
	t := &sim.Table{Title: fmt.Sprintf("Rollout of pickwise_p2c over round_robin (real gRPC): 9 backends at %v and 3 at %v, one call at a time each; %.0f calls/s offered (60%% of capacity)", newLatency, oldLatency, rate), Columns: names(rs)}
	t.AddRow("placed: new-gen backend's share", row(rs, func(o outcome) string { return sim.Pct(placed(o, newGen)) })...)
	t.AddRow("placed: old-gen backend's share", row(rs, func(o outcome) string { return sim.Pct(placed(o, oldGen)) })...)
	cellFor := func(f func(s shadow.Summary) string) []string {
		var c []string
		for _, r := range rs {
			s, ok := summaries[r.policy]
			if !ok || s.Compared == 0 {
				c = append(c, "")
				continue
			}
			c = append(c, f(s))
		}
		return c
	}
	t.AddRow("predicted: old-gen share", cellFor(func(s shadow.Summary) string { return sim.Pct(predicted(s, oldGen)) })...)
	t.AddRow("prediction's largest error against p2c live (points)", cellFor(func(s shadow.Summary) string {
		if live == nil {
			return ""
		}
		worst := 0.0
		for i := range n {
			worst = math.Max(worst, math.Abs(predicted(s, []int{i})-placed(*live, []int{i})))
		}
		return fmt.Sprintf("%.1f", 100*worst)
	})...)
	t.AddRow("canary arm / live arm mean latency", cellFor(func(s shadow.Summary) string {
		if s.CanaryArm.Calls == 0 {
			return ""
		}
		return msTenths(s.CanaryArm.MeanLatency()) + " / " + msTenths(s.LiveArm.MeanLatency())
	})...)
	t.AddRow("mean of successful calls", row(rs, func(o outcome) string { return msTenths(mean(o.latencies)) })...)
	t.AddRow("p99 of successful calls", row(rs, func(o outcome) string { return sim.Ms(sim.Quantile(o.latencies, 0.99)) })...)
	t.AddNote("predicted: where pickwise_p2c, asked beside round_robin on the sampled picks, would have sent them (shadow.Summary), never sent")
	sec := newSection("rollout", t, rs)
	return sec, nil
}

// msTenths formats d in milliseconds to a tenth: the arms' and the
// stages' means differ by less than a millisecond.
func msTenths(d time.Duration) string { return fmt.Sprintf("%.1fms", 1000*d.Seconds()) }

// mean is the mean of ds, 0 if there are none.
func mean(ds []time.Duration) time.Duration {
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	return sum / time.Duration(max(len(ds), 1))
}

// minus is s's counts since before, for one run of a balancer that lives
// on; s and before list the same endpoints.
func minus(s, before shadow.Summary) shadow.Summary {
	s.Compared -= before.Compared
	s.Agreed -= before.Agreed
	s.NoPrediction -= before.NoPrediction
	s.CanaryFallbacks -= before.CanaryFallbacks
	s.LiveArm.Calls -= before.LiveArm.Calls
	s.LiveArm.Failed -= before.LiveArm.Failed
	s.LiveArm.Timed -= before.LiveArm.Timed
	s.LiveArm.TotalLatency -= before.LiveArm.TotalLatency
	s.CanaryArm.Calls -= before.CanaryArm.Calls
	s.CanaryArm.Failed -= before.CanaryArm.Failed
	s.CanaryArm.Timed -= before.CanaryArm.Timed
	s.CanaryArm.TotalLatency -= before.CanaryArm.TotalLatency
	eps := make([]shadow.EndpointPicks, len(s.Endpoints))
	copy(eps, s.Endpoints)
	for i := range eps {
		for _, b := range before.Endpoints {
			if b.Addr == eps[i].Addr {
				eps[i].Live -= b.Live
				eps[i].Candidate -= b.Candidate
			}
		}
	}
	s.Endpoints = eps
	return s
}
