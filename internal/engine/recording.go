package engine

import (
	"math"

	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/connectivity"
	estats "google.golang.org/grpc/experimental/stats"
)

// recorder records a balancer's metrics: the gauges a sink collects
// (report), and the pick counts and rare-event counters, flushed at
// collection and once a second while calls flow. metrics.go defines and
// registers the metrics.
//
// Guarded by the balancer's mu.
type recorder struct {
	sink   estats.MetricsRecorder
	policy *Metrics // nil: the policy records none
	target string   // the channel's target, a label
	// locality is the endpoints' xDS locality, if any, a label; labels
	// are target and locality as one slice, passed whole, so that a
	// recording costs no allocation. Replaced, never changed.
	locality string
	labels   []string
	shared   *doneShared
	ej       *ejection
	probes   *loadProbes
	locked   runLocked
	order    *[]*Endpoint // the balancer's endpoints, in resolver order
	// pickers reads the pick counts of the WeightedRR pickers published,
	// which their endpoints do not count.
	pickers pickerCounts
	// retries are doneShared.retries as last recorded.
	retries    [3]uint64
	unregister func() // stops grpc calling the async reporter
}

func newRecorder(cc balancer.ClientConn, target string, m *Metrics, b *engineBalancer) recorder {
	r := recorder{sink: MetricsRecorderOf(cc), policy: m, target: target, shared: &b.shared, ej: &b.ejection,
		probes: b.loadProbes, locked: b.locked, order: &b.order, unregister: func() {}}
	r.labels = []string{target, ""}
	if r.sink == nil {
		r.sink = noMetrics{}
	}
	return r
}

// register makes report the balancer's async reporter.
func (r *recorder) register(cc balancer.ClientConn, report func(estats.AsyncMetricsRecorder) error) {
	if m := r.policy; m != nil && MetricsRecorderOf(cc) != nil {
		gauges := []estats.AsyncMetric{m.ready, m.ramping, m.ejected, m.membership, m.endpoint.ejected, m.endpoint.inFlight, m.endpoint.weight}
		if m.load != nil {
			gauges = append(gauges, m.load.pool)
		}
		r.unregister = r.sink.RegisterAsyncReporter(estats.AsyncMetricReporterFunc(report), gauges...)
		r.shared.work.recordsMetrics = true
	}
}

func (r *recorder) setLocality(loc string) {
	if loc != r.locality {
		r.locality, r.labels = loc, []string{r.target, loc}
	}
}

// report records the gauges of one collection: grpc calls the balancer's
// reporter at each export or scrape. It flushes the pick counts with them
// and samples the picker's costs, so that what a scrape returns is of one
// moment.
func (r *recorder) report(ar estats.AsyncMetricsRecorder, order []*Endpoint, picker balancer.Picker, ramping func(*Endpoint) bool, now int64) {
	m := r.policy
	var ready, ramps, ejected int64
	var picks pickCounts
	for _, e := range order {
		r.takePicks(e, &picks)
		if e.state != connectivity.Ready {
			continue
		}
		ready++
		if ramping(e) {
			ramps++
		}
		if e.ejection.ejected {
			ejected++
		}
	}
	r.recordPicks(&picks)
	r.flushOutcomes()
	m.ready.Record(ar, ready, r.labels...)
	m.ramping.Record(ar, ramps, r.labels...)
	m.ejected.Record(ar, ejected, r.labels...)
	if cr, ok := picker.(CostReporter); ok && m.cost != nil {
		cr.ReportCosts(now, func(c float64) { m.cost.Record(r.sink, c, r.labels...) })
	}
	if l := m.load; l != nil {
		usable := r.probes.poolAnswers(now, func(age float64) { l.age.Record(r.sink, age, r.labels...) })
		l.pool.Record(ar, int64(usable), r.labels...)
	}
}

// reportMembership records the membership gauge.
func (r *recorder) reportMembership(ar estats.AsyncMetricsRecorder, mb *membership) {
	r.policy.membership.Record(ar, int64(mb.count), r.target, FormatFingerprint(mb.endpoints), FormatFingerprint(mb.config), r.locality)
}

// reportEndpoints records the per-endpoint metrics of order, whose rows
// (rowsLocked) are rows: the counters' growth since the last collection,
// and the gauges.
func (r *recorder) reportEndpoints(ar estats.AsyncMetricsRecorder, order []*Endpoint, rows []EndpointInfo) {
	em := &r.policy.endpoint
	for k, e := range order {
		row := &rows[k]
		labels := []string{r.target, e.addr, r.locality}
		if n := totalPicks(e); em.picks != nil && n != e.collected.picks {
			em.picks.Record(r.sink, int64(n-e.collected.picks), labels...)
			e.collected.picks = n
		}
		if n := e.failures.Load(); n != e.collected.failures {
			em.failures.Record(r.sink, int64(n-e.collected.failures), labels...)
			e.collected.failures = n
		}
		var ejected int64
		if row.Ejected {
			ejected = 1
		}
		em.ejected.Record(ar, ejected, labels...)
		em.inFlight.Record(ar, row.InFlight, labels...)
		em.weight.Record(ar, int64(math.Round(1000*row.EffectiveWeight)), labels...)
	}
}

// flushTick is the flush a Done asks for while calls flow, for sinks that
// never collect. It does not rearm itself: the next Done does.
func (r *recorder) flushTick() {
	r.locked(func() { r.flush(*r.order) })
}

// flush records the pick counts and the rare-event counters.
func (r *recorder) flush(order []*Endpoint) {
	var c pickCounts
	for _, e := range order {
		r.takePicks(e, &c)
	}
	r.recordPicks(&c)
	r.flushOutcomes()
}

// flushOutcomes records the ejections, readmissions, probes and retries
// placed elsewhere since the last flush.
func (r *recorder) flushOutcomes() {
	m := r.policy
	if m == nil {
		return
	}
	record := func(h *estats.Int64CountHandle, n uint64) {
		if n != 0 {
			h.Record(r.sink, int64(n), r.labels...)
		}
	}
	ejections, readmissions := r.ej.counts()
	record(m.ejections, ejections)
	record(m.readmissions, readmissions)
	if n := r.shared.probes.Swap(0); n != 0 {
		m.probes.Record(r.sink, int64(n), r.labels...)
		m.picks.Record(r.sink, int64(n), r.target, "probe", r.locality)
	}
	record(m.elsewhere, r.shared.avoidedRetry.Swap(0))
	for i := range r.shared.retries {
		if n := r.shared.retries[i].Load(); n != r.retries[i] {
			m.retries.Record(r.sink, int64(n-r.retries[i]), r.target, attemptNames[i], r.locality)
			r.retries[i] = n
		}
	}
	if l := m.load; l != nil {
		for _, c := range []struct {
			result string
			n      uint64
		}{
			{probeAnswered, r.probes.answers.Swap(0)},
			{probeFailed, r.probes.failures.Swap(0)},
			{probeUnimplemented, r.probes.unimplemented.Swap(0)},
		} {
			if c.n != 0 {
				l.probes.Record(r.sink, int64(c.n), r.target, c.result, r.locality)
			}
		}
	}
}

// pickCounts is the picks of some endpoints since their last flush, by
// reason. A flush records one count per reason, not one per endpoint and
// reason: the metric has no endpoint label.
type pickCounts [MaxPickReasons]uint64

// takePicks adds the picks counted on e since its last flush to c and
// marks them flushed. The per-endpoint counters are 32 bits wide and
// wrap; a difference of two readings is right while fewer than 2^32 picks
// of one endpoint fall between collections.
func (r *recorder) takePicks(e *Endpoint, c *pickCounts) {
	if r.policy == nil {
		return
	}
	for i := range e.picks {
		n := e.picks[i].Load()
		if d := n - e.flushedPicks[i]; d != 0 {
			e.flushedPicks[i] = n
			c[i] += uint64(d)
		}
	}
}

// recordPicks records c, with the WeightedRR pickers' picks added.
func (r *recorder) recordPicks(c *pickCounts) {
	m := r.policy
	if m == nil {
		return
	}
	r.pickers.add(c)
	for i, d := range c {
		if d != 0 {
			m.picks.Record(r.sink, int64(d), r.target, m.reasons[i], r.locality)
		}
	}
}

// published notes the balancer's new picker (nil: none).
func (r *recorder) published(p balancer.Picker) {
	if r.policy != nil {
		r.pickers.published(p)
	}
}

// weightMetrics are the backend-reported weights' metrics, nil if none.
func (r *recorder) weightMetrics() *weightMetrics {
	if r.policy == nil {
		return nil
	}
	return r.policy.weights
}

// weights records one weight update's metrics.
func (r *recorder) weights(u weightUpdate) {
	wm := r.weightMetrics()
	if wm == nil {
		return
	}
	for _, w := range u.usable {
		wm.weight.Record(r.sink, w, r.labels...)
	}
	wm.notYetUsable.Record(r.sink, u.notYet, r.labels...)
	wm.stale.Record(r.sink, u.stale, r.labels...)
	if u.bad != 0 {
		wm.badReports.Record(r.sink, u.bad, r.labels...)
	}
}

// fallback counts a picker built in round-robin fallback.
func (r *recorder) fallback() {
	if wm := r.weightMetrics(); wm != nil {
		wm.rrFallback.Record(r.sink, 1, r.labels...)
	}
}

// stop flushes what is left, at Close.
func (r *recorder) stop(order []*Endpoint) {
	r.flush(order)
	r.pickers.stop()
}

// pickerCounts counts the picks of WeightedRR pickers, which count them
// themselves rather than on their endpoints (WeightedRR.Pick says why),
// for the reason each picker places by: ReasonWeighted, or
// ReasonRoundRobinFallback. A picker's count is read at every publish and
// every record while it is the balancer's picker, and at the next
// pickerRetiredReads of them after it is replaced, so that the picks of
// calls that took it just before are counted too; then it is let go, so
// that an idle channel whose weights update keeps no old snapshots. A call
// that took a picker and was descheduled past those reads goes uncounted.
type pickerCounts struct {
	pickers []countedPicker
	// owed is the picks read but not yet recorded, by reason. Signed: a
	// read may come between a pick's count and its taking back (a probe,
	// a child's error), and the next read then finds one fewer.
	owed [MaxPickReasons]int64
}

type countedPicker struct {
	p     *WeightedRR
	taken uint32 // its count as of the last read
	left  int    // reads left once replaced; -1 while current
}

// published follows a new picker (nil: none, while no endpoint is READY):
// it replaces every one kept, and is kept if it is a WeightedRR.
func (f *pickerCounts) published(p balancer.Picker) {
	f.read()
	for i := range f.pickers {
		if f.pickers[i].left < 0 {
			f.pickers[i].left = pickerRetiredReads
		}
	}
	if w, ok := p.(*WeightedRR); ok {
		f.pickers = append(f.pickers, countedPicker{p: w, taken: w.picks(), left: -1})
	}
}

// pickerRetiredReads is how many publishes or records read a picker's
// count after it is replaced.
const pickerRetiredReads = 2

// read adds the picks the pickers placed since the last read to owed, and
// lets go of the pickers replaced pickerRetiredReads reads ago. Counts
// are 32 bits and wrap; as a signed difference, two readings are right
// while fewer than 2^31 picks fall between them.
func (f *pickerCounts) read() {
	kept := f.pickers[:0]
	for _, k := range f.pickers {
		n := k.p.picks()
		f.owed[k.p.reason()] += int64(int32(n - k.taken))
		k.taken = n
		if k.left > 0 {
			k.left--
		}
		if k.left != 0 {
			kept = append(kept, k)
		}
	}
	clear(f.pickers[len(kept):])
	f.pickers = kept
}

// add reads the pickers' counts and adds what they owe to c. A reason
// owed less than nothing (picks taken back after the read that counted
// them) waits for the next picks to make up for it.
func (f *pickerCounts) add(c *pickCounts) {
	f.read()
	for i, n := range f.owed {
		if n > 0 {
			c[i] += uint64(n)
			f.owed[i] = 0
		}
	}
}

// stop lets go of every picker, for Close.
func (f *pickerCounts) stop() {
	clear(f.pickers)
	f.pickers = nil
}
