package sim

import (
	"time"

	v3orcapb "github.com/cncf/xds/go/xds/data/orca/v3"
	"github.com/pickwise/pickwise/internal/mix"
)

// ORCA load reports from the simulated backends.
//
// A backend that reports its load through ORCA does not measure anything
// per call: it keeps rate counters and a utilization gauge, refreshes its
// figures on a timer (grpc-go's ServerMetricsRecorder is set "from a loop
// that measures the backend, e.g. once a second"), and every response
// carries the figures current when it is sent. The simulated backends do
// the same in virtual time. Each has a window of reportWindow, at its own
// phase; when a window closes the backend publishes one report for it:
//
//   - rps_fractional: the requests it finished in the window (answered or
//     failed) per second;
//   - eps: the requests it failed in the window per second: those that
//     failed fast (Backend.FailRate), and those it finished after their
//     client had given up (a deadline), which a grpc server ends with
//     DeadlineExceeded;
//   - cpu_utilization: the mean, over the window, of the requests holding
//     a worker (in service, failing, or an open stream) divided by
//     Backend.Cores (default Servers): the busy share of its workers.
//
// The gauge is the busy share rather than the served rate over capacity
// because the busy share is what a CPU gauge measures (busy time over wall
// time) and what a backend can know: capacity is the figure a balancer
// would like to learn, not one a server has to hand. The two agree for a
// backend that is not saturated and whose service time does not drift; they
// part when it slows (a slow or cold backend is busier per request, so its
// weight, qps / utilization, falls) and when it fails fast (almost no busy
// time, which the error penalty has to make up for). It can exceed 1 when
// more requests are in progress than Cores, as on a backend without a
// worker limit; ORCA allows that ("usage exceeds the reporter dependent
// notion of soft limits").
//
// A response carries the last published report, so reports lag the load by
// up to a window, as real ones do, and a call that ends before a backend's
// first window closes carries none. A call that fails at the client
// (deadline, no backend) carries none either: no trailer reached it.
//
// One report is published per backend per window and never changed after;
// each response carries a copy of it with the backend's serverload figures
// added (probes.go), so a policy may keep what it is given. Backends with
// no Cores and no Servers (no notion of busy) report nothing.

// reportWindow is the backends' measuring period, that of a typical
// server-side rate counter.
const reportWindow = time.Second

// loadGauge is one backend's ORCA counters and its published report.
type loadGauge struct {
	// Immutable after newLoadGauge.
	cores float64 // the utilization's denominator; 0: no reports
	noise float64 // Backend.ReportNoise
	seed  uint64  // the noise stream: a hash of the run's seed and the backend

	// The window being measured ends at end; it began reportWindow earlier,
	// or at 0 for the first, partial window, which is not published.
	end                   time.Duration
	index                 uint64 // windows published
	partial               bool
	completions, failures int
	// work integrates level over the window, up to last, in
	// request-nanoseconds.
	work  float64
	last  time.Duration
	level int // requests holding a worker now

	report *v3orcapb.OrcaLoadReport // last published; nil before the first
}

func newLoadGauge(b Backend, runSeed uint64, id int) *loadGauge {
	cores := b.Cores
	if cores == 0 {
		cores = b.Servers
	}
	seed := mix64(runSeed ^ mix64(uint64(id)+1))
	return &loadGauge{
		cores: float64(cores),
		noise: b.ReportNoise,
		seed:  seed,
		// Independent servers do not tick in step: each backend's windows
		// start at a phase of its own, fixed by the seed.
		end:     time.Duration(seed % uint64(reportWindow)),
		partial: true,
	}
}

// advance closes the windows that ended by now, publishing the last full
// one.
func (g *loadGauge) advance(now time.Duration) {
	if now < g.end {
		return
	}
	g.integrate(g.end)
	if !g.partial {
		g.publish(g.completions, g.failures, g.work)
	}
	g.partial = false
	g.completions, g.failures, g.work = 0, 0, 0
	g.end += reportWindow
	if now < g.end {
		return
	}
	// Whole windows went by without an event: the last of them saw no
	// request finish and a constant level.
	skipped := (now - g.end) / reportWindow
	g.index += uint64(skipped)
	g.last = g.end + skipped*reportWindow
	g.end = g.last + reportWindow
	g.publish(0, 0, float64(g.level)*float64(reportWindow))
}

// integrate adds the level's area up to t.
func (g *loadGauge) integrate(t time.Duration) {
	g.work += float64(g.level) * float64(t-g.last)
	g.last = t
}

// publish makes the report for a closed window.
func (g *loadGauge) publish(completions, failures int, work float64) {
	g.index++
	util := work / float64(reportWindow) / g.cores
	if g.noise > 0 {
		// A uniform draw in [-1, 1) from the window's index, so that every
		// column of a scenario sees the same noise whatever its picks.
		u := float64(mix64(g.seed^g.index)>>11)/(1<<53)*2 - 1
		util *= 1 + g.noise*u
	}
	perSecond := 1 / reportWindow.Seconds()
	g.report = &v3orcapb.OrcaLoadReport{
		CpuUtilization: util,
		RpsFractional:  float64(completions) * perSecond,
		Eps:            float64(failures) * perSecond,
	}
}

// change records that delta more requests hold a worker from now on.
func (g *loadGauge) change(now time.Duration, delta int) {
	if g.cores == 0 {
		return
	}
	g.advance(now)
	g.integrate(now)
	g.level += delta
}

// complete counts a request the backend finished now.
func (g *loadGauge) complete(now time.Duration, failed bool) {
	if g.cores == 0 {
		return
	}
	g.advance(now)
	g.completions++
	if failed {
		g.failures++
	}
}

// current is the report a response sent now carries (nil: none yet).
func (g *loadGauge) current(now time.Duration) *v3orcapb.OrcaLoadReport {
	if g.cores == 0 {
		return nil
	}
	g.advance(now)
	return g.report
}

// mix64 is one SplitMix64 step from state x (the Weyl increment, then the
// finalizer): a cheap, well-mixed hash of x, and a bijection, so distinct
// inputs stay distinct. The increment makes 0 hash to a non-zero value,
// which the bare finalizer does not.
func mix64(x uint64) uint64 { return mix.Mix64(x + mix.Golden) }
