package engine

import (
	"math"
	"testing"
	"time"

	v3orcapb "github.com/cncf/xds/go/xds/data/orca/v3"
	"github.com/pickwise/pickwise/orcaweight"
	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/connectivity"
)

// TestSampledReportsKeepThePeriodsMeans feeds per-call reports through an
// endpoint's weight Done, which records only a sample of a busy period's,
// and checks each period's weight against a tracker that recorded every
// report. The loads drift within a period (throughput falls, utilization
// rises), so a sample that did not weigh each report by how many it stands
// for would give the period's first reports, all recorded, far too much
// say.
func TestSampledReportsKeepThePeriodsMeans(t *testing.T) {
	// Each period's weight is its own means; errors cost utilization.
	cfg := orcaweight.Config{HalfLife: 0, ErrorUtilizationPenalty: 1}
	k := newWeightKeeper(WeightsConfig{ORCA: cfg, UpdatePeriod: time.Second}, nil)
	e := newEndpoint("a", &doneShared{}, false)
	e.state = connectivity.Ready
	k.add(e)
	every := orcaweight.NewGroup(cfg).NewTracker()

	report := func(i int) *v3orcapb.OrcaLoadReport {
		return &v3orcapb.OrcaLoadReport{
			RpsFractional:  1000 - 0.1*float64(i),
			CpuUtilization: 0.1 + 0.0008*float64(i),
			Eps:            float64(i % 7),
		}
	}
	now := time.Unix(1000, 0)
	period := func(name string, calls int) {
		t.Helper()
		for i := range calls {
			r := report(i)
			e.weights.done(balancer.DoneInfo{ServerLoad: r, BytesSent: true, BytesReceived: true})
			every.Record(r)
		}
		now = now.Add(time.Second)
		k.update(now, []*Endpoint{e}, false)
		want, status := every.Update(now)
		if status != orcaweight.Usable || e.weights.status != orcaweight.Usable {
			t.Fatalf("%s: status %v, reference %v; want both Usable", name, e.weights.status, status)
		}
		if got := e.weights.weight; math.Abs(got-want) > 0.005*want {
			t.Errorf("%s, %d calls: weight %.4f from the sampled reports, %.4f from all of them", name, calls, got, want)
		}
	}
	period("busy period", 5000)
	period("the next busy period", 3000)
	// A quiet period after busy ones: every report is recorded, as the
	// count starts over at each update.
	period("quiet period", 40)

	// A new connection starts the count over too: its first reports, all
	// recorded, start its weight.
	for i := range 1000 {
		e.weights.done(balancer.DoneInfo{ServerLoad: report(i), BytesSent: true, BytesReceived: true})
	}
	k.connectionReady(e)
	every.Reset()
	period("after a new connection", 20)
}

// TestSampleReport checks the sampling's arithmetic: over any number of
// reports, those recorded stand for all of them, to within one stride,
// and past the first ones only one in a stride is recorded.
func TestSampleReport(t *testing.T) {
	for _, n := range []uint32{1, 63, 64, 65, 71, 72, 1000, 5000, 1 << 20} {
		var recorded, standsFor uint64
		for i := uint32(1); i <= n; i++ {
			if w := sampleReport(i); w > 0 {
				recorded++
				standsFor += w
			}
		}
		full := uint64(min(n, reportsInFull))
		if n <= reportsInFull && (recorded != full || standsFor != full) {
			t.Errorf("%d reports: %d recorded, standing for %d, want every one", n, recorded, standsFor)
		}
		// The sequence samples one in reportStride of the rest, give or
		// take a few: what the recorded ones stand for is off by a few
		// strides at most.
		if diff := int64(standsFor) - int64(n); diff > 4*reportStride || diff < -4*reportStride {
			t.Errorf("%d reports: the recorded ones stand for %d", n, standsFor)
		}
	}
}

// TestSampleReportCyclicCalls: calls that come in a cycle (a client
// alternating methods of different cost) bring reports whose values
// repeat with the cycle. Over a busy period (5,000 reports and more), the
// sampled mean stays within 5% of the mean of all of them, for every
// cycle length up to 32 (a period of 1,000 has too few samples for that:
// its error is the sample's, not the cycle's). A fixed stride of 8 recorded one phase only of a cycle of 2,
// 4 or 8 (alternating utilizations 0.2 and 0.8 gave a mean of 0.2 or 0.8
// where all reports gave 0.5).
func TestSampleReportCyclicCalls(t *testing.T) {
	worst := 0.0
	for cycle := uint32(2); cycle <= 32; cycle++ {
		for _, n := range []uint32{5000, 50000} {
			var all, sampled, weight float64
			for i := uint32(1); i <= n; i++ {
				v := 0.2
				if i%cycle == 0 {
					v = 0.8 // one costly call per cycle
				}
				all += v
				if w := sampleReport(i); w > 0 {
					sampled += v * float64(w)
					weight += float64(w)
				}
			}
			want, got := all/float64(n), sampled/weight
			if rel := math.Abs(got-want) / want; rel > worst {
				worst = rel
			}
			if rel := math.Abs(got-want) / want; rel > 0.05 {
				t.Errorf("cycle %d, %d reports: sampled mean %.4f, all %.4f", cycle, n, got, want)
			}
		}
	}
	t.Logf("worst relative error %.4f", worst)
}
