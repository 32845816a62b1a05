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
		// One report in each run of reportStride after the full ones:
		// what the recorded ones stand for is n to within one run.
		if diff := int64(standsFor) - int64(n); diff >= reportStride || diff <= -reportStride {
			t.Errorf("%d reports: the recorded ones stand for %d", n, standsFor)
		}
	}
}
