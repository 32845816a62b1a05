package sim

import (
	"math"
	"slices"
	"testing"
	"time"

	v3orcapb "github.com/cncf/xds/go/xds/data/orca/v3"
	"google.golang.org/grpc/codes"
)

// reportRecorder is a policy that rotates over the backends and keeps
// every outcome's load report, per backend, in arrival order of the
// outcomes.
type reportRecorder struct {
	ids     []int
	next    int
	reports map[int][]*v3orcapb.OrcaLoadReport
	// nils counts outcomes without a report, by whether the call failed.
	nilOK, nilFailed int
}

func (r *reportRecorder) policy() Policy {
	return Policy{Name: "recorder", newInstance: func(*env) (instance, error) { return r, nil }}
}

func (r *reportRecorder) setBackends(ids []int) error { r.ids = slices.Clone(ids); return nil }
func (r *reportRecorder) close()                      {}
func (r *reportRecorder) pick(*Request) (int, finishFunc, error) {
	id := r.ids[r.next%len(r.ids)]
	r.next++
	return id, func(err error, load *v3orcapb.OrcaLoadReport) {
		switch {
		case load != nil:
			r.reports[id] = append(r.reports[id], load)
		case err != nil:
			r.nilFailed++
		default:
			r.nilOK++
		}
	}, nil
}

func newRecorder() *reportRecorder {
	return &reportRecorder{reports: map[int][]*v3orcapb.OrcaLoadReport{}}
}

// within reports whether got is want within a relative tolerance.
func within(got, want, tol float64) bool { return math.Abs(got-want) <= tol*want }

// TestLoadReports checks what a backend reports against what it does:
// 10 workers at 10 ms serve 1,000 rps; offered 500 rps they are half busy;
// a backend that fails 40% of its requests reports eps at 40% of its qps.
func TestLoadReports(t *testing.T) {
	bs := []Backend{
		{Servers: 10, Service: Const(10 * time.Millisecond)},
		{Servers: 10, Service: Const(10 * time.Millisecond), FailRate: 0.4, FailAfter: time.Millisecond},
	}
	rec := newRecorder()
	res, err := Run{Seed: 21, Backends: bs, Rate: 1000, Duration: 20 * time.Second}.Execute(rec.policy())
	if err != nil {
		t.Fatal(err)
	}
	if res.Failed == 0 {
		t.Fatal("no request failed; the failing backend is not modelled")
	}
	// Only calls that end before a backend's first window closes (at most
	// 2 s in) carry no report.
	if rec.nilOK+rec.nilFailed > 2*1000 {
		t.Errorf("%d calls carried no report, want only those of the first window", rec.nilOK+rec.nilFailed)
	}
	for id, want := range []struct{ qps, eps, util float64 }{
		{qps: 500, eps: 0, util: 0.5},
		// Failures hold a worker for 1 ms and do no service.
		{qps: 500, eps: 200, util: (300*0.010 + 200*0.001) / 10},
	} {
		reps := rec.reports[id]
		if len(reps) < 15_000/2 {
			t.Fatalf("backend %d: %d reports, want one per call", id, len(reps))
		}
		// One set of figures per window, carried by every call of the
		// next (each call's report adds serverload's figures of its own).
		distinct := slices.CompactFunc(slices.Clone(reps), func(a, b *v3orcapb.OrcaLoadReport) bool {
			return a.CpuUtilization == b.CpuUtilization && a.RpsFractional == b.RpsFractional && a.Eps == b.Eps
		})
		if n := len(distinct); n < 17 || n > 20 {
			t.Errorf("backend %d: %d distinct reports in 20 s, want one per 1 s window", id, n)
		}
		var qps, eps, util float64
		for _, r := range distinct {
			qps += r.RpsFractional / float64(len(distinct))
			eps += r.Eps / float64(len(distinct))
			util += r.CpuUtilization / float64(len(distinct))
			if r.ApplicationUtilization != 0 || len(r.Utilization) != 0 {
				t.Errorf("backend %d: report %v sets more than cpu_utilization", id, r)
			}
		}
		if !within(qps, want.qps, 0.05) || !within(util, want.util, 0.05) || math.Abs(eps-want.eps) > 0.05*want.qps {
			t.Errorf("backend %d: mean report qps %.1f eps %.1f utilization %.3f, want %.0f, %.0f, %.3f within 5%%",
				id, qps, eps, util, want.qps, want.eps, want.util)
		}
	}
}

// TestLoadReportsNoise checks the noise's bounds and that it is a function
// of the seed and the window, not of what the policy does.
func TestLoadReportsNoise(t *testing.T) {
	run := func() []float64 {
		bs := []Backend{{Servers: 10, Service: Const(10 * time.Millisecond), ReportNoise: 0.4}}
		rec := newRecorder()
		if _, err := (Run{Seed: 22, Backends: bs, Rate: 500, Duration: 60 * time.Second}).Execute(rec.policy()); err != nil {
			t.Fatal(err)
		}
		var utils []float64
		for _, r := range slices.CompactFunc(rec.reports[0], func(a, b *v3orcapb.OrcaLoadReport) bool { return a == b }) {
			utils = append(utils, r.CpuUtilization)
		}
		return utils
	}
	a, b := run(), run()
	if !slices.Equal(a, b) {
		t.Fatal("two runs with the same seed reported different utilizations")
	}
	// True utilization 0.5, which Poisson arrivals move by about 5% from
	// window to window (500 a second); noise +-40% on top.
	lo, hi := slices.Min(a), slices.Max(a)
	if lo < 0.5*0.6*0.85 || hi > 0.5*1.4*1.15 {
		t.Errorf("noisy utilization in [%.3f, %.3f], want within 0.5 x (1 +- 0.4)", lo, hi)
	}
	if lo > 0.5*0.75 || hi < 0.5*1.25 {
		t.Errorf("noisy utilization in [%.3f, %.3f] over %d windows, want it to use most of 0.5 x (1 +- 0.4)", lo, hi, len(a))
	}
	mean, sd := meanStddev(a)
	// U(-0.4, 0.4) has standard deviation 0.4/sqrt(3) = 0.23.
	if !within(mean, 0.5, 0.05) || !within(sd/mean, 0.4/math.Sqrt(3), 0.25) {
		t.Errorf("noisy utilization mean %.3f, relative stddev %.3f; want 0.5 and 0.23", mean, sd/mean)
	}
}

// TestLoadReportsDeadline: a call the client gave up on carries no
// report, and the backend counts the late answer as an error.
func TestLoadReportsDeadline(t *testing.T) {
	// One worker at 30 ms, offered 50 rps: 150% load, so the queue grows
	// until most calls miss their 200 ms deadline.
	bs := []Backend{{Servers: 1, Service: Const(30 * time.Millisecond)}}
	rec := newRecorder()
	res, err := Run{Seed: 23, Backends: bs, Rate: 50, Duration: 20 * time.Second, Deadline: 200 * time.Millisecond}.Execute(rec.policy())
	if err != nil {
		t.Fatal(err)
	}
	if rec.nilFailed != res.Failed {
		t.Errorf("%d failed calls carried no report, want all %d", rec.nilFailed, res.Failed)
	}
	last := rec.reports[0][len(rec.reports[0])-1]
	if last.Eps <= 0 || last.Eps > last.RpsFractional {
		t.Errorf("last report eps %.1f with qps %.1f, want the late answers counted as errors", last.Eps, last.RpsFractional)
	}
}

// TestNoReportsWithoutCores: a backend with neither Servers nor Cores has
// no notion of busy, and reports nothing.
func TestNoReportsWithoutCores(t *testing.T) {
	rec := newRecorder()
	bs := []Backend{{Service: Const(10 * time.Millisecond)}, {Service: Const(10 * time.Millisecond), Cores: 4}}
	if _, err := (Run{Seed: 24, Backends: bs, Rate: 200, Duration: 5 * time.Second}).Execute(rec.policy()); err != nil {
		t.Fatal(err)
	}
	if len(rec.reports[0]) != 0 || len(rec.reports[1]) == 0 {
		t.Errorf("%d reports from the backend without cores, %d from the one with; want none and some", len(rec.reports[0]), len(rec.reports[1]))
	}
}

// TestWarmup: requests arriving before Warmup are served but not counted,
// and load is measured after it.
func TestWarmup(t *testing.T) {
	bs := []Backend{{Servers: 10, Service: Const(10 * time.Millisecond)}}
	var all int
	run := Run{Seed: 25, Backends: bs, Rate: 800, Warmup: 10 * time.Second, WarmupRate: 100, Duration: 20 * time.Second,
		OnDone: func(time.Duration, *Request, int, time.Duration, error) { all++ }}
	res, err := run.Execute(Random())
	if err != nil {
		t.Fatal(err)
	}
	// 10 s at 100 rps, then 10 s at 800.
	if !within(float64(res.Total), 8000, 0.05) || !within(float64(all), 9000, 0.05) {
		t.Errorf("measured %d requests of %d, want about 8,000 of 9,000", res.Total, all)
	}
	if res.Picks[0] != res.Total || len(res.Latency) != res.Total {
		t.Errorf("%d picks, %d latencies for %d measured requests", res.Picks[0], len(res.Latency), res.Total)
	}
	if u := res.Utilization[0]; !within(u, 0.8, 0.05) {
		t.Errorf("utilization after the warm-up %.3f, want 0.8", u)
	}
	if o := res.Offered[0]; !within(o, 0.8, 0.05) {
		t.Errorf("offered load after the warm-up %.3f, want 0.8", o)
	}
}

// TestRunAllIgnoresDaemonTimers: a balancer's periodic timer does not keep
// the run going once no request is left, and it fires while they are.
func TestRunAllIgnoresDaemonTimers(t *testing.T) {
	l := &Loop{}
	ticks := 0
	var tick func()
	tick = func() { ticks++; l.clock().AfterFunc(time.Second, tick) }
	l.clock().AfterFunc(time.Second, tick)
	l.At(5500*time.Millisecond, func() {})
	l.RunAll()
	if ticks != 5 || l.Now() != 5500*time.Millisecond {
		t.Errorf("RunAll stopped at %v after %d ticks, want 5.5s and 5", l.Now(), ticks)
	}
}

// TestOrcaWRRReadsReports: pickwise_orca_wrr, built through grpc's
// registry, follows the reports: with one backend three times another's
// capacity, both are equally busy once its weights are in use.
func TestOrcaWRRReadsReports(t *testing.T) {
	bs := []Backend{
		{Servers: 12, Service: Const(10 * time.Millisecond)}, // 1,200 rps
		{Servers: 4, Service: Const(10 * time.Millisecond)},  // 400 rps
	}
	run := Run{Seed: 26, Backends: bs, Rate: 1000, Warmup: 13 * time.Second, WarmupRate: 200, Duration: 23 * time.Second}
	res, err := run.Execute(GRPC("pickwise_orca_wrr", "pickwise_orca_wrr", `{}`))
	if err != nil {
		t.Fatal(err)
	}
	for id, u := range res.Utilization {
		if !within(u, 1000.0/1600, 0.05) {
			t.Errorf("backend %d utilization %.3f, want %.3f", id, u, 1000.0/1600)
		}
	}
}

// TestWeightedRoundRobinRuns: grpc-go's weighted_round_robin builds and
// places requests in the simulator, reading the same reports. Its weights
// follow its own wall clock, so what it places where is not asserted:
// the scenarios show its column as n/a (wallClockNote).
func TestWeightedRoundRobinRuns(t *testing.T) {
	bs := []Backend{
		{Servers: 10, Service: Const(10 * time.Millisecond)},
		{Servers: 10, Service: Const(10 * time.Millisecond), FailRate: 0.1, FailAfter: time.Millisecond, FailCode: codes.Unavailable},
	}
	res, err := Run{Seed: 27, Backends: bs, Rate: 500, Clients: 2, Duration: 5 * time.Second}.Execute(GRPC(wrrName, wrrName, `{}`))
	if err != nil {
		t.Fatal(err)
	}
	if res.Picks[0] == 0 || res.Picks[1] == 0 || res.Picks[0]+res.Picks[1] != res.Total {
		t.Errorf("placed %v of %d requests, want all, on both backends", res.Picks, res.Total)
	}
}
