package orcaweight

import (
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	v3orcapb "github.com/cncf/xds/go/xds/data/orca/v3"
	"google.golang.org/grpc/balancer"
	grpcorca "google.golang.org/grpc/orca"
)

// Status says whether an endpoint's weight may be used, and if not, why.
// Policies put the median of the usable weights in place of unusable ones
// (FillMedian) and export the reasons as metrics.
type Status int

const (
	// NoReports: the endpoint has not reported since its tracker was
	// created or reset. Counts toward the "not yet usable" metric.
	NoReports Status = iota
	// Blackout: the endpoint is reporting but has not been for
	// BlackoutPeriod yet. Counts toward the "not yet usable" metric.
	Blackout
	// Stale: the endpoint's last report is WeightExpirationPeriod old or
	// older. Counts toward the "stale" metric.
	Stale
	// Usable: the weight is finite, > 0 and may be used.
	Usable
)

// String returns the constant's name.
func (s Status) String() string {
	switch s {
	case NoReports:
		return "NoReports"
	case Blackout:
		return "Blackout"
	case Stale:
		return "Stale"
	case Usable:
		return "Usable"
	}
	return "Status(" + strconv.Itoa(int(s)) + ")"
}

// Tracker is one endpoint's ORCA state: the reports of the current update
// period, and the smoothed weight built from the periods before. Create it
// with Group.NewTracker.
//
// Record, RecordN, OnLoadReport and the Done hook are lock-free and
// allocation-free, and may run on any number of goroutines. Update must be
// called by one goroutine at a time; Reset and Group.SetConfig may run
// concurrently with all of them.
type Tracker struct {
	// Immutable after NewTracker; read by every Record.
	g    *Group
	done func(balancer.DoneInfo)

	// The period's sums get a cache line of their own: every RPC of the
	// endpoint writes them, and they must not invalidate the line that
	// holds l for other goroutines, nor a neighbouring object's.
	_   [cacheLine]byte
	acc accumulators // atomic
	_   [cacheLine]byte

	// Guarded by mu: written by Update and Reset only.
	mu       sync.Mutex
	reported bool // a period with reports has been folded since creation or Reset
	averaged bool // avgQPS and avgCost hold a weight (false after NoReports, Stale, Reset)
	avgQPS   float64
	avgCost  float64
	// lastReport is the now of the last Update that folded reports;
	// nonEmptySince the now of the Update that started the current averages.
	lastReport    time.Time
	nonEmptySince time.Time
}

// accumulators are a period's sums, each float64 kept as its bits in an
// atomic word and added to with a compare-and-swap loop.
//
// The alternative, fixed-point integers and plain atomic adds, costs the
// same uncontended (about 7 ns for the four words, BenchmarkAccumulate)
// and up to half as much when every core adds to one tracker at the same
// instant (on a 2-vCPU machine both ranged from about 7 to 40 ns per add
// from run to run, fixed point ahead in most runs). It was not chosen
// because fixed point needs a scale: values below its resolution (a
// backend at 1e-7 rps) vanish, and a sum of large values wraps around
// silently, so reports above some bound would have to be rejected by a
// rule ORCA does not have. Floats take any finite report, and their
// overflow (+Inf) is detected by Update. Contention that heavy is rare in
// practice: an endpoint's Records come from calls that end microseconds
// apart, while one Record lasts nanoseconds.
type accumulators struct {
	n    atomic.Uint64 // reports added
	qps  atomic.Uint64 // float64 bits: sum of rps_fractional
	eps  atomic.Uint64 // float64 bits: sum of eps
	util atomic.Uint64 // float64 bits: sum of the chosen utilization
}

// addFloat adds v to the float64 whose bits a holds.
func addFloat(a *atomic.Uint64, v float64) {
	for {
		old := a.Load()
		if a.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+v)) {
			return
		}
	}
}

// swapFloat returns the float64 whose bits a holds and sets it to 0.
func swapFloat(a *atomic.Uint64) float64 {
	return math.Float64frombits(a.Swap(0))
}

// Tracker is an out-of-band listener for grpc-go's ORCA producer.
var _ grpcorca.OOBListener = (*Tracker)(nil)

// Record folds one report into the current period. It returns false, and
// counts a bad report on the Group, when the report cannot yield a
// weight: it is nil; rps_fractional is NaN, ±Inf, negative or 0; eps is
// NaN, ±Inf or negative; or the chosen utilization (see Config's
// UtilizationMetrics, then application_utilization unless 0, then
// cpu_utilization) is NaN, ±Inf, negative, or 0 while qps is not (which
// would be an infinite weight). A rejected report leaves the Tracker as it
// was.
func (t *Tracker) Record(r *v3orcapb.OrcaLoadReport) bool {
	return t.RecordN(r, 1)
}

// RecordN folds r into the current period as n reports of the same load,
// for a caller that records one per-call report in n and wants the
// period's means to stay those of all of them (each recorded report
// weighted by how many it stands for). Writing the period's sums is the
// costly part of a report when many goroutines finish calls to one
// endpoint at once; a caller that samples them writes them less often. n
// of 0 records nothing and returns false, without counting a bad report.
// Otherwise RecordN is Record with r's values multiplied by n, and a
// rejected report counts as n bad ones on the Group, so that the count of
// a sampled stream stands for all of it. A report whose values times n
// are not finite (an n in the billions) is rejected too.
func (t *Tracker) RecordN(r *v3orcapb.OrcaLoadReport, n uint64) bool {
	if n == 0 {
		return false
	}
	if r == nil {
		t.g.bad.Add(n)
		return false
	}
	// Scaled before the check, so that one check also rejects values that
	// n makes infinite (multiplying by n >= 1 keeps NaN, sign and 0).
	w := float64(n)
	qps, eps := r.RpsFractional*w, r.Eps*w
	util := t.g.settings.Load().utilization(r) * w
	if !positive(qps) || !nonNegative(eps) || !positive(util) {
		t.g.bad.Add(n)
		return false
	}
	// The count goes last and Update swaps it first: a report counted in a
	// period therefore has its sums in that period or an earlier one,
	// never a later one (see Update).
	addFloat(&t.acc.qps, qps)
	if eps != 0 { // the usual case; saves an atomic
		addFloat(&t.acc.eps, eps)
	}
	addFloat(&t.acc.util, util)
	t.acc.n.Add(n)
	return true
}

// OnLoadReport records an out-of-band report; it implements
// google.golang.org/grpc/orca.OOBListener, for orca.RegisterOOBListener.
func (t *Tracker) OnLoadReport(r *v3orcapb.OrcaLoadReport) {
	t.Record(r)
}

// Done returns the per-call hook, for balancer.PickResult.Done: it records
// info.ServerLoad when that is a non-nil *v3orcapb.OrcaLoadReport, and
// ignores anything else without counting it as bad, since most calls to a
// backend that sends no ORCA trailer carry a nil report. The function is
// built once per Tracker, so a pick that returns it allocates nothing.
func (t *Tracker) Done() func(balancer.DoneInfo) {
	return t.done
}

func (t *Tracker) onDone(info balancer.DoneInfo) {
	if r, ok := info.ServerLoad.(*v3orcapb.OrcaLoadReport); ok && r != nil {
		t.Record(r)
	}
}

// Update ends the current period at now, folds its reports into the
// smoothed weight, and returns the weight and whether it is usable. The
// weight is 0 unless status is Usable, and then it is finite and > 0.
//
// now comes from the caller's clock and must not go backwards; the
// package never reads the time itself. Update must not be called by two
// goroutines at once.
//
// The period's mean qps, eps and utilization give its cost, utilization +
// eps/qps*ErrorUtilizationPenalty. Mean qps and mean cost are folded into
// exponentially weighted averages with alpha = 1 - 2^(-elapsed/HalfLife),
// elapsed being the time since the previous period that had reports, and
// the weight is avgQPS / avgCost. The first period after NoReports, Stale
// or Reset sets the averages to its own means, and starts the blackout.
//
// A Record running while Update swaps the sums out may land in the ending
// period or in the next, and may even be split between them (its qps in
// one, its utilization in the other), because the sums are separate words.
// That is harmless: each addition lands in exactly one period, so nothing
// is lost or counted twice; the skew is at most the reports of each
// Record or RecordN running at that instant, against a period that at
// per-call rates holds many; and a period left with a count but no utilization is dropped
// rather than turned into an infinite weight.
func (t *Tracker) Update(now time.Time) (weight float64, status Status) {
	s := t.g.settings.Load()
	t.mu.Lock()
	defer t.mu.Unlock()

	n := t.acc.n.Swap(0)
	sumQPS := swapFloat(&t.acc.qps)
	sumEPS := swapFloat(&t.acc.eps)
	sumUtil := swapFloat(&t.acc.util)

	expiry := s.cfg.WeightExpirationPeriod
	if qps, c, ok := periodMeans(n, sumQPS, sumEPS, sumUtil, s.cfg.ErrorUtilizationPenalty); ok {
		// Reports resuming after a gap longer than the expiry period start
		// over, even if no Update saw the weight go stale in between.
		if t.averaged && expiry > 0 && now.Sub(t.lastReport) >= expiry {
			t.averaged = false
		}
		if !t.averaged {
			t.avgQPS, t.avgCost = qps, c
			t.averaged = true
			t.nonEmptySince = now
		} else {
			a := alpha(now.Sub(t.lastReport), s.cfg.HalfLife)
			t.avgQPS += a * (qps - t.avgQPS)
			t.avgCost += a * (c - t.avgCost)
		}
		t.reported = true
		t.lastReport = now
	}

	switch {
	case !t.averaged && !t.reported:
		return 0, NoReports
	case !t.averaged:
		return 0, Stale
	case expiry > 0 && now.Sub(t.lastReport) >= expiry:
		t.averaged = false
		t.nonEmptySince = time.Time{}
		return 0, Stale
	case s.cfg.BlackoutPeriod > 0 && now.Sub(t.nonEmptySince) < s.cfg.BlackoutPeriod:
		return 0, Blackout
	}
	return finitePositive(t.avgQPS / t.avgCost), Usable
}

// alpha is the share of a new period in the averages after elapsed.
func alpha(elapsed, halfLife time.Duration) float64 {
	switch {
	case halfLife <= 0:
		return 1
	case elapsed <= 0:
		return 0
	}
	// 1 - 2^-x, accurate for small x (frequent updates, long half-life).
	return -math.Expm1(-math.Ln2 * float64(elapsed) / float64(halfLife))
}

// finitePositive clamps w into (0, MaxFloat64]. Each period's weight is
// checked to be finite and > 0, and the ratio of two averages taken with
// the same coefficients lies between the smallest and the largest of those
// ratios, so this only catches rounding at the very ends of the range.
func finitePositive(w float64) float64 {
	switch {
	case w > math.MaxFloat64:
		return math.MaxFloat64
	case !(w > 0):
		return math.SmallestNonzeroFloat64
	}
	return w
}

// Reset forgets the endpoint's reports and weight, as when its connection
// changes (a new connection may be a new backend process): the tracker is
// back to NoReports, and the next reports start a new blackout. Reports
// recorded concurrently with Reset may or may not survive it.
func (t *Tracker) Reset() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.acc.n.Store(0)
	t.acc.qps.Store(0)
	t.acc.eps.Store(0)
	t.acc.util.Store(0)
	t.reported = false
	t.averaged = false
	t.avgQPS, t.avgCost = 0, 0
	t.lastReport = time.Time{}
	t.nonEmptySince = time.Time{}
}
