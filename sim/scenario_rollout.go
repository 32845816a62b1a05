package sim

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/pickwise/pickwise/balancer/shadow"
)

func init() {
	register(Scenario{Name: "rollout", Run: func(s Scale) (*Table, error) {
		r, err := Rollout(s)
		if err != nil {
			return nil, err
		}
		return r.Table, nil
	}})
}

// RolloutResult holds the rollout scenario's numbers, one Stage per
// column: round_robin live, the shadow at two sample rates, a 10% canary,
// then pickwise_p2c live.
type RolloutResult struct {
	Stages []RolloutStage
	Table  *Table
}

// RolloutStage is one column's run.
type RolloutStage struct {
	Name string
	// Placed is each backend's share of the calls, as placed.
	Placed []float64
	// Predicted is each backend's share of the compared picks under the
	// candidate, for the stages that ran a shadow; nil otherwise.
	Predicted []float64
	// Summary is the shadow's, for the stages that ran one.
	Summary *shadow.Summary
	// OldUtil is the old generation's mean utilization; P99 the run's.
	OldUtil float64
	P99     time.Duration
}

// Rollout rate: 60% of the hardware-generations fleet's 10,800 rps, so
// that round robin, which gives each backend 540 rps, keeps the old
// generation (600 rps) below saturation and the stages compare steady
// states.
const rolloutRate = 6480

// Rollout: the rollout of pickwise_p2c over a round_robin fleet of two
// hardware generations (9 backends at 1,000 rps, 3 at 600), one config
// push at a time. The shadow stages run round_robin live with p2c as the
// candidate, asked on every pick and on one in ten; the canary stage sends
// 10% of calls through p2c; the last stage is p2c live. The shadow's
// predicted shares are read against the shares p2c gives when it is live.
func Rollout(scale Scale) (*RolloutResult, error) {
	duration := 20 * time.Second
	if scale == Reduced {
		duration = 4 * time.Second
	}
	const pair = `"live": [{"round_robin": {}}], "candidate": [{"pickwise_p2c": {}}]`
	stages := []struct {
		name, policy, config string
	}{
		{"round_robin (live)", "round_robin", `{}`},
		{"shadow, sampleRate 1", "pickwise_shadow", `{` + pair + `, "sampleRate": 1}`},
		{"shadow, sampleRate 0.1", "pickwise_shadow", `{` + pair + `, "sampleRate": 0.1}`},
		{"canary 10%", "pickwise_shadow", `{` + pair + `, "sampleRate": 0.1, "canaryPercent": 10}`},
		{"pickwise_p2c (live)", "pickwise_p2c", `{}`},
	}
	out := &RolloutResult{}
	var policies []Policy
	for _, st := range stages {
		p := GRPC(st.name, st.policy, st.config)
		policies = append(policies, p)
		var sum *shadow.Summary
		if st.policy == "pickwise_shadow" {
			p = withSummary(p, &sum)
		}
		res, err := hwRunAt(rolloutRate, duration).Execute(p)
		if err != nil {
			return nil, err
		}
		rs := RolloutStage{Name: st.name, Placed: shares(res.Picks), Summary: sum, P99: res.Quantile(0.99)}
		for id := hwNew; id < hwNew+hwOld; id++ {
			rs.OldUtil += res.Utilization[id] / hwOld
		}
		if sum != nil {
			rs.Predicted = make([]float64, len(res.Picks))
			for _, e := range sum.Endpoints {
				id, err := strconv.Atoi(strings.TrimPrefix(e.Addr, "backend-"))
				if err != nil {
					return nil, fmt.Errorf("rollout: endpoint %q", e.Addr)
				}
				_, rs.Predicted[id] = e.Shares(*sum)
			}
		}
		out.Stages = append(out.Stages, rs)
	}

	live := out.Stages[len(out.Stages)-1].Placed
	t := &Table{
		Title: fmt.Sprintf("Rollout of pickwise_p2c over round_robin: 9 backends at 1,000 rps and 3 at 600, %s rps offered (60%% of capacity) for %.0f s",
			thousands(rolloutRate), duration.Seconds()),
	}
	for _, st := range out.Stages {
		t.Columns = append(t.Columns, st.Name)
	}
	cells := func(f func(RolloutStage) string) []string {
		var c []string
		for _, st := range out.Stages {
			c = append(c, f(st))
		}
		return c
	}
	gen := func(xs []float64, g int) float64 {
		from, n := 0, hwNew
		if g == 1 {
			from, n = hwNew, hwOld
		}
		sum := 0.0
		for _, x := range xs[from : from+n] {
			sum += x
		}
		return sum / float64(n)
	}
	t.AddRow("placed: new-gen backend's share", cells(func(s RolloutStage) string { return Pct(gen(s.Placed, 0)) })...)
	t.AddRow("placed: old-gen backend's share", cells(func(s RolloutStage) string { return Pct(gen(s.Placed, 1)) })...)
	t.AddRow("predicted by the shadow: new-gen share", cells(func(s RolloutStage) string {
		if s.Predicted == nil {
			return ""
		}
		return Pct(gen(s.Predicted, 0))
	})...)
	t.AddRow("predicted: old-gen share", cells(func(s RolloutStage) string {
		if s.Predicted == nil {
			return ""
		}
		return Pct(gen(s.Predicted, 1))
	})...)
	t.AddRow("prediction's largest error against p2c live (points)", cells(func(s RolloutStage) string {
		if s.Predicted == nil {
			return ""
		}
		return fmt.Sprintf("%.1f", 100*maxShareError(s.Predicted, live))
	})...)
	t.AddRow("agreement with live", cells(func(s RolloutStage) string {
		if s.Summary == nil {
			return ""
		}
		return Pct(s.Summary.Agreement())
	})...)
	t.AddRow("canary arm / live arm mean latency", cells(func(s RolloutStage) string {
		if s.Summary == nil || s.Summary.CanaryArm.Calls == 0 {
			return ""
		}
		return Ms(s.Summary.CanaryArm.MeanLatency()) + " / " + Ms(s.Summary.LiveArm.MeanLatency())
	})...)
	t.AddRow("old-gen utilization", cells(func(s RolloutStage) string { return Pct(s.OldUtil) })...)
	t.AddRow("p99 latency", cells(func(s RolloutStage) string { return Ms(s.P99) })...)
	t.AddNote("placed: where calls went; predicted: where pickwise_p2c, asked beside round_robin on the sampled picks, would have sent them (shadow.Summary), never sent")
	t.AddNote("the candidate holds each of its sampled choices in flight for as long as calls on that backend last under live, and is fed the outcomes of live's calls; it does not see its own effect on the backends' queues (latency under round_robin's load), and at a lower sample rate its counts are thinner, as a balancer's are among many")
	t.AddNote("during the canary the candidate counts live's calls in flight as its own, so that it places the canary's calls seeing live's load: its predictions then say where it sends calls under that load, not its shares when live")
	t.AddNote("the shadow stages' live child is grpc-go's round_robin, whose starting point comes from the global source: those runs, like the round_robin column, do not repeat exactly")
	notes(t, policies)
	out.Table = t
	return out, nil
}

// hwRunAt is the hardware-generations fleet at rate for duration, one
// balancer, no warm-up.
func hwRunAt(rate float64, duration time.Duration) Run {
	return Run{Seed: 11, Backends: hwBackends(false), Clients: 1, Rate: rate, Duration: duration}
}

// shares is each count's share of the total.
func shares(counts []int) []float64 {
	total := 0
	for _, c := range counts {
		total += c
	}
	out := make([]float64, len(counts))
	for i, c := range counts {
		if total > 0 {
			out[i] = float64(c) / float64(total)
		}
	}
	return out
}

// maxShareError is the largest |a[i] - b[i]|.
func maxShareError(a, b []float64) float64 {
	worst := 0.0
	for i := range a {
		worst = math.Max(worst, math.Abs(a[i]-b[i]))
	}
	return worst
}

// withSummary wraps p, a pickwise_shadow column, so that each instance's
// summary is stored in *out when the instance closes.
func withSummary(p Policy, out **shadow.Summary) Policy {
	build := p.newInstance
	p.newInstance = func(e *env) (instance, error) {
		in, err := build(e)
		if err != nil {
			return nil, err
		}
		return &summarized{instance: in, out: out}, nil
	}
	return p
}

// summarized is a shadow instance that keeps its balancer's summary.
type summarized struct {
	instance
	out **shadow.Summary
}

func (s *summarized) close() {
	if g, ok := s.instance.(*grpcInstance); ok {
		for _, sum := range shadow.Summaries() {
			if sum.Target == g.target {
				sum := sum
				*s.out = &sum
			}
		}
	}
	s.instance.close()
}
