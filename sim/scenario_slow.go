package sim

import (
	"fmt"
	"slices"
	"time"
)

func init() {
	register(Scenario{Name: "slow-backend", Run: func(s Scale) (*Table, error) {
		r, err := SlowBackend(s)
		if err != nil {
			return nil, err
		}
		return r.Table, nil
	}})
}

// SlowBackendResult holds the slow-backend scenario's numbers per policy,
// in column order.
type SlowBackendResult struct {
	Policies []string
	// P50, P99 and P999 are quantiles of the latency of successful
	// requests.
	P50, P99, P999 []time.Duration
	// CallerP99 and CallerP999 are quantiles over every request as its
	// caller saw it: a request that timed out counts at the deadline.
	CallerP99, CallerP999 []time.Duration
	// Success is the share of requests that succeeded within the deadline.
	Success []float64
	// SlowShare is the slow backend's share of the requests placed while
	// it was slow (fair: 1/11).
	SlowShare []float64
	// RecoveredShare is its share of the requests placed in the 10 s after
	// it recovered: a policy that stopped sending it requests must send
	// some to see that it is fast again.
	RecoveredShare []float64
	Table          *Table
}

// SlowBackend: 11 backends with a 167 ms median service time (lognormal,
// sigma 0.3), 1,000 requests per second for 60 s with a 1 s deadline; from
// 15 s to 45 s one backend takes 2 s. This is the experiment Linkerd
// published for Peak EWMA. Backends serve without a concurrency limit, so
// the slow one is slow for every request without queueing: the case where
// in-flight counts rise only because requests stay longer (Little's law).
// The reduced run keeps the shape: 35 s, slow from 15 s to 25 s. In both,
// the slowdown starts after pickwise_orca_wrr's 10 s blackout.
//
// Backends report their load through ORCA as 32-core machines: a healthy
// one, with about 16 requests in service, reports about 50% utilization.
// Slowed down, it holds 12 times as many, so it reports 12 times the
// utilization per query, and most of its answers come after their
// client's deadline, which it counts as errors.
//
// With the deadline, almost every request placed on the slow backend fails
// at 1 s (its median is twice the deadline), so the latency of successful
// requests barely shows the damage; the failures, and the caller's latency
// with a timeout counted at the deadline, do.
func SlowBackend(scale Scale) (*SlowBackendResult, error) {
	run, from, to := slowRun(scale)
	policies := append(loadAwarePolicies(),
		GRPC("pickwise_orca_wrr (raw)", "pickwise_orca_wrr", `{"weightHalfLife":"0s"}`))
	out := &SlowBackendResult{Policies: columns(policies)}
	for _, p := range policies {
		m, err := slowMeasure(run, p, from, to)
		if err != nil {
			return nil, err
		}
		out.P50 = append(out.P50, m.p50)
		out.P99 = append(out.P99, m.p99)
		out.P999 = append(out.P999, m.p999)
		out.CallerP99 = append(out.CallerP99, m.callerP99)
		out.CallerP999 = append(out.CallerP999, m.callerP999)
		out.Success = append(out.Success, m.success)
		out.SlowShare = append(out.SlowShare, m.slowShare)
		out.RecoveredShare = append(out.RecoveredShare, m.recoveredShare)
	}
	t := &Table{
		Title: fmt.Sprintf("Slow backend: 11 backends, 167 ms median service, 1,000 rps for %.0f s, 1 s deadline; backend-0 takes 2 s from %.0f s to %.0f s",
			run.Duration.Seconds(), from.Seconds(), to.Seconds()),
		Columns: out.Policies,
	}
	t.AddRow("p50, successful requests", msCells(out.P50)...)
	t.AddRow("p99, successful requests", msCells(out.P99)...)
	t.AddRow("p99.9, successful requests", msCells(out.P999)...)
	t.AddRow("p99, caller's view (timeout = 1 s)", msCells(out.CallerP99)...)
	t.AddRow("p99.9, caller's view (timeout = 1 s)", msCells(out.CallerP999)...)
	t.AddRow("success within the deadline", pctCells(out.Success)...)
	t.AddRow("share to backend-0 while slow (fair: 9.1%)", pctCells(out.SlowShare)...)
	t.AddRow(fmt.Sprintf("share to backend-0, %.0f s after it recovered", slowRecovery.Seconds()), pctCells(out.RecoveredShare)...)
	t.AddNote("a request placed on the slow backend almost always times out (its median is twice the deadline), so it leaves the successful latencies and shows up in the success rate and the caller's view")
	t.AddNote("pickwise_orca_wrr: most of the slow backend's calls end in DeadlineExceeded, a server-side failure, so its default failure penalty cuts its weight as soon as the first timeouts arrive, 1 s into the slowdown, and holds it down until the failures decay after the recovery (half-life 5 s). Its reports say the same later: backends report ORCA load as 32-core machines, a healthy one about 50% utilization. Slowed down, backend-0 reports 12 times the utilization per query and, as most of its answers come after their client's deadline, almost as many errors as queries: its weight falls about 13-fold once its first slow reports arrive (3 s into the slowdown: a 2 s answer, then a report window), then further with its own qps, as a black hole's does. Reports reach a client only in answers that beat the deadline, about 1% of the slow backend's, so at a 1% share a new one comes every several seconds and the smoothed weight moves in steps")
	t.AddNote(`pickwise_orca_wrr (raw): weightHalfLife "0s", as grpc-go's weighted_round_robin weighs reports: the first slow report cuts the slow backend's weight at once, and the first reports after it recovered restore it within about 5 s. The default 5 s half-life averages the cost per query over several half-lives, and a cost that fell 60-fold at the recovery takes about half a minute to average out: smoothing trades this reaction for steadiness under noisy reports (noisy-reports)`)
	notes(t, policies)
	addWallClockColumn(t)
	out.Table = t
	return out, nil
}

// slowBackendID is the backend that turns slow.
const slowBackendID = 0

// slowRecovery is how long after the slowdown the recovered backend's
// share is measured.
const slowRecovery = 10 * time.Second

// slowCores makes a healthy backend, 91 rps x 175 ms (the lognormal's
// mean) = 16 requests in service, report about 50% utilization.
const slowCores = 32

// slowRun returns the scenario's run and its slow window.
func slowRun(scale Scale) (run Run, from, to time.Duration) {
	const (
		n      = 11
		median = 167 * time.Millisecond
		slow   = 2 * time.Second
	)
	duration := 60 * time.Second
	from, to = 15*time.Second, 45*time.Second
	if scale == Reduced {
		duration, from, to = 35*time.Second, 15*time.Second, 25*time.Second
	}
	backends := make([]Backend, n)
	for i := range backends {
		backends[i] = Backend{Service: LogNormal(median, 0.3), Cores: slowCores}
	}
	backends[slowBackendID].Slow = []Window{{From: from, To: to, Factor: float64(slow) / float64(median)}}
	return Run{Seed: 3, Backends: backends, Rate: 1000, Duration: duration, Deadline: time.Second}, from, to
}

// slowMeasurement is one policy's run reduced to the scenario's numbers.
type slowMeasurement struct {
	p50, p99, p999        time.Duration
	callerP99, callerP999 time.Duration
	success, slowShare    float64
	recoveredShare        float64
}

// slowMeasure executes run with p. The slow backend's share counts
// requests by when they were placed, so a request placed just before the
// window that finished inside it does not count.
func slowMeasure(run Run, p Policy, from, to time.Duration) (slowMeasurement, error) {
	var (
		caller             []time.Duration
		inWindow, onSlow   int
		after, onRecovered int
	)
	run.OnDone = func(now time.Duration, _ *Request, backend int, lat time.Duration, _ error) {
		caller = append(caller, lat)
		if start := now - lat; backend >= 0 && start >= from && start < to {
			inWindow++
			if backend == slowBackendID {
				onSlow++
			}
		}
		if start := now - lat; backend >= 0 && start >= to && start < to+slowRecovery {
			after++
			if backend == slowBackendID {
				onRecovered++
			}
		}
	}
	res, err := run.Execute(p)
	if err != nil {
		return slowMeasurement{}, err
	}
	slices.Sort(caller)
	// Result.Quantile reads only Latency, so a Result over the caller's
	// latencies gives both views the same quantile definition.
	callerView := &Result{Latency: caller}
	m := slowMeasurement{
		p50:        res.Quantile(0.5),
		p99:        res.Quantile(0.99),
		p999:       res.Quantile(0.999),
		callerP99:  callerView.Quantile(0.99),
		callerP999: callerView.Quantile(0.999),
		success:    1 - res.ErrorRate(),
	}
	if after > 0 {
		m.recoveredShare = float64(onRecovered) / float64(after)
	}
	if inWindow > 0 {
		m.slowShare = float64(onSlow) / float64(inWindow)
	}
	return m, nil
}
