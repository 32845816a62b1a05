package engine

import (
	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/connectivity"
	estats "google.golang.org/grpc/experimental/stats"
)

// This file is the balancer's side of metrics: the async reporter grpc
// calls when the sink collects, and the flush of the pick counts and
// rare-event counters. metrics.go defines and registers the metrics.

// reportMetrics is the balancer's async reporter: grpc calls it whenever
// the metrics sink collects (grpc's OpenTelemetry plugin: at each export or
// scrape). Besides the gauges, it flushes the pick counts the endpoints
// have gathered since the last flush and samples the endpoints' costs, so
// that the gauges, the costs and the counts a scrape returns are of one
// moment. The counts are also flushed once a second while calls flow
// (flushTick), for sinks that never call this.
func (b *engineBalancer) reportMetrics(r estats.AsyncMetricsRecorder) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil
	}
	m := b.policyMetrics
	now := b.clock.Nanotime()
	var ready, ramping, ejected int64
	var picks pickCounts
	for _, e := range b.order {
		b.takePicksLocked(e, &picks)
		if e.state != connectivity.Ready {
			continue
		}
		ready++
		if b.slowStart.end(e, now) != 0 {
			ramping++
		}
		if e.ejection.ejected {
			ejected++
		}
	}
	b.recordPicksLocked(&picks)
	b.flushOutcomesLocked()
	m.ready.Record(r, ready, b.labels...)
	m.ramping.Record(r, ramping, b.labels...)
	m.ejected.Record(r, ejected, b.labels...)
	if cr, ok := b.picker.(CostReporter); ok && m.cost != nil {
		cr.ReportCosts(now, func(c float64) { m.cost.Record(b.metrics, c, b.labels...) })
	}
	return nil
}

// flushTick records the pick counts. It does not rearm itself: the next
// Done does (doneWork.armFlush), so an idle balancer has no timer.
func (b *engineBalancer) flushTick() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return
	}
	b.flushPicksLocked()
	b.flushOutcomesLocked()
}

// flushOutcomesLocked records the ejections, readmissions, probes and
// retries placed elsewhere since the last flush.
func (b *engineBalancer) flushOutcomesLocked() {
	m := b.policyMetrics
	if m == nil {
		return
	}
	record := func(h *estats.Int64CountHandle, n uint64) {
		if n != 0 {
			h.Record(b.metrics, int64(n), b.labels...)
		}
	}
	record(m.ejections, b.ejections)
	record(m.readmissions, b.readmissions)
	b.ejections, b.readmissions = 0, 0
	if n := b.shared.probes.Swap(0); n != 0 {
		m.probes.Record(b.metrics, int64(n), b.labels...)
		m.picks.Record(b.metrics, int64(n), b.target, "probe", b.locality)
	}
	record(m.elsewhere, b.shared.avoidedRetry.Swap(0))
}

// pickCounts is the picks of some endpoints since their last flush, by
// reason. A flush sums them and records one count per reason, not one per
// endpoint and reason: the metric has no endpoint label, and over a large
// fleet the records were most of what a flush, and Close, cost.
type pickCounts [MaxPickReasons]uint64

// takePicksLocked adds the picks counted on e since its last flush to c
// and marks them flushed. The per-endpoint counters are 32 bits wide and
// wrap; a difference of two readings is right as long as fewer than 2^32
// picks of one endpoint fall between collections.
func (b *engineBalancer) takePicksLocked(e *Endpoint, c *pickCounts) {
	if b.policyMetrics == nil {
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

// recordPicksLocked records c, with the WeightedRR pickers' picks added.
func (b *engineBalancer) recordPicksLocked(c *pickCounts) {
	m := b.policyMetrics
	if m == nil {
		return
	}
	b.pickerPicks.add(c)
	for i, d := range c {
		if d != 0 {
			m.picks.Record(b.metrics, int64(d), b.target, m.reasons[i], b.locality)
		}
	}
}

// flushPicksLocked records the picks counted on every endpoint since the
// last flush.
func (b *engineBalancer) flushPicksLocked() {
	var c pickCounts
	for _, e := range b.order {
		b.takePicksLocked(e, &c)
	}
	b.recordPicksLocked(&c)
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
