package engine

import (
	"fmt"
	"math"
	"slices"
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
			e.weightedDone(balancer.DoneInfo{ServerLoad: r, BytesSent: true, BytesReceived: true})
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
		e.weightedDone(balancer.DoneInfo{ServerLoad: report(i), BytesSent: true, BytesReceived: true})
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

// TestPerCallReportsFollowTheConfig: an endpoint's per-call reports reach
// its tracker while the config reads them from calls, not while it reads
// them out of band, and again once it switches back.
func TestPerCallReportsFollowTheConfig(t *testing.T) {
	cfg := WeightsConfig{ORCA: orcaweight.Config{HalfLife: 0}, UpdatePeriod: time.Second}
	k := newWeightKeeper(cfg, nil)
	e := newEndpoint("a", &doneShared{}, false)
	e.state = connectivity.Ready
	k.add(e)
	now := time.Unix(1000, 0)
	reportsReach := func() bool {
		t.Helper()
		for range 10 {
			e.weightedDone(balancer.DoneInfo{ServerLoad: &v3orcapb.OrcaLoadReport{RpsFractional: 100, CpuUtilization: 0.5}, BytesSent: true, BytesReceived: true})
		}
		now = now.Add(time.Second)
		k.update(now, []*Endpoint{e}, false)
		return e.weights.status != orcaweight.NoReports
	}
	for _, step := range []struct {
		name string
		oob  bool
	}{{"per call", false}, {"out of band", true}, {"per call again", false}} {
		cfg.OutOfBand = step.oob
		k.reconfigure(cfg, []*Endpoint{e})
		k.connectionReady(e) // a fresh period, no reports yet
		if got := reportsReach(); got == step.oob {
			t.Errorf("%s: per-call reports reach the tracker: %v", step.name, got)
		}
	}
	k.stop([]*Endpoint{e})
	if e.reportTo.Load() != nil {
		t.Error("weights off: per-call reports still have a tracker to go to")
	}
	e.weightedDone(balancer.DoneInfo{ServerLoad: &v3orcapb.OrcaLoadReport{RpsFractional: 100, CpuUtilization: 0.5}})
}

// TestForPickerSharesUnchangedWeights: a picker's weights are the kept
// array itself when the median changes none of them, a run of ones in
// fallback, and otherwise a buffer of the keeper's, filled afresh for
// every picker without allocating; the kept weights stay as read.
func TestForPickerSharesUnchangedWeights(t *testing.T) {
	k := newWeightKeeper(WeightsConfig{UpdatePeriod: time.Second}, nil)
	var ready []Ready
	for i := range 5 { // 40 bytes of weights, in a 48-byte allocation
		ready = append(ready, readyWeighted(float64(10+i), true))
	}
	var kept readyWeights

	ws, fallback := k.forPicker(ready, &kept)
	if fallback || &ws[0] != &kept.ws[0] {
		t.Fatalf("weights within the median's bound: got a copy (fallback %v), want the kept array", fallback)
	}
	if cap(ws) != len(ws) {
		t.Fatalf("shared weights have room past their length (%d > %d)", cap(ws), len(ws))
	}

	// One weight far above the rest: the picker's copy is capped, the
	// kept weights are not.
	ready[1].Stats.weights.weight = 1e6
	kept.drop()
	ws, _ = k.forPicker(ready, &kept)
	if &ws[0] == &kept.ws[0] || ws[1] >= 1e6 || kept.ws[1] != 1e6 {
		t.Fatalf("a weight past the bound: picker's %v, kept %v; want a capped copy", ws, kept.ws)
	}
	if cap(ws) != len(ws) {
		t.Fatalf("filled weights have room past their length (%d > %d)", cap(ws), len(ws))
	}
	if allocs := testing.AllocsPerRun(100, func() { k.forPicker(ready, &kept) }); allocs != 0 {
		t.Errorf("filling the weights for a picker allocated %v times, want 0: the buffer is reused", allocs)
	}

	// Fewer than two usable: ones, shared by every picker in fallback.
	for _, r := range ready[1:] {
		r.Stats.weights.status = orcaweight.NoReports
	}
	kept.drop()
	ws, fallback = k.forPicker(ready, &kept)
	again, _ := k.forPicker(ready[:3], nil)
	if !fallback || len(ws) != len(ready) || len(again) != 3 || &ws[0] != &again[0] {
		t.Fatalf("fallback: weights %v and %v, want shared ones", ws, again)
	}
	for _, w := range ws {
		if w != 1 {
			t.Fatalf("fallback weights %v, want all 1", ws)
		}
	}
	if cap(ws) != len(ws) {
		t.Fatalf("fallback weights have room past their length (%d > %d): an append would write the shared ones", cap(ws), len(ws))
	}
}

// TestForPickerHoldsTheMedian: the median that stands in for an endpoint
// without a usable weight, and bounds the others, is selected once after a
// fill of the kept weights (every weight update) and held while a few
// usable endpoints leave and join the list; the next fill selects it
// anew, and so do edits of more than an eighth of the usable weights. A
// list that is not the balancer's has it selected every time.
func TestForPickerHoldsTheMedian(t *testing.T) {
	k := newWeightKeeper(WeightsConfig{UpdatePeriod: time.Second}, nil)
	// Usable 10, 20, ..., 160 and 5000: the median is 90, and 5000 is
	// capped at 900. The last endpoint has no weight yet.
	var ready []Ready
	for w := 10.0; w <= 160; w += 10 {
		ready = append(ready, readyWeighted(w, true))
	}
	ready = append(ready, readyWeighted(5000, true), readyWeighted(0, false))
	var kept readyWeights
	filled := func(what string, list *readyWeights, wantMedian float64) {
		t.Helper()
		ws, fallback := k.forPicker(ready, list)
		if fallback || len(ws) != len(ready) {
			t.Fatalf("%s: %d weights (fallback %v) for %d endpoints", what, len(ws), fallback, len(ready))
		}
		for i, r := range ready {
			want := min(r.Stats.weights.weight, 10*wantMedian)
			if r.Stats.weights.status != orcaweight.Usable {
				want = wantMedian
			}
			if ws[i] != want {
				t.Fatalf("%s: weights %v, want the median %v standing in and bounding", what, ws, wantMedian)
			}
		}
	}
	filled("first picker", &kept, 90)

	// One usable endpoint (10) leaves and one without a weight joins: the
	// median of what is left would be 95; the selected one is held.
	remove := func(i int) {
		ready = append(ready[:i:i], ready[i+1:]...)
		kept.remove(i)
	}
	remove(0)
	ready = append(ready, readyWeighted(0, false))
	kept.insert(len(ready)-1, ready[len(ready)-1].Stats)
	filled("after one usable endpoint left", &kept, 90)
	filled("a list of its own", nil, 95)

	// A weight update: the next publish fills the kept weights again and
	// selects their median.
	kept.drop()
	filled("after a fill", &kept, 95)

	// Another usable endpoint leaves (20): one of the 15 left, under an
	// eighth, and the median is held; a second (30) makes two of 14, over
	// an eighth, and it is selected again: (100+110)/2.
	remove(0)
	filled("after one more left", &kept, 95)
	remove(0)
	filled("after a second left", &kept, 105)
}

// TestEarlierPickerKeepsItsShares: the weights a picker is built from may
// be the keeper's buffer, which the next picker's fill overwrites, or the
// kept array, which the next edit changes; a picker built earlier keeps
// the shares it was built with (its schedule keeps no weights).
func TestEarlierPickerKeepsItsShares(t *testing.T) {
	k := newWeightKeeper(WeightsConfig{UpdatePeriod: time.Second}, nil)
	var ready []Ready
	for i := range 6 {
		ready = append(ready, readyWeighted(float64(10*(i+1)), true))
	}
	ready[5].Stats.weights.weight = 1e6 // capped: a filled buffer, not the kept array
	var kept readyWeights
	build := func() *WeightedRR {
		ws, _ := k.forPicker(ready, &kept)
		return NewWeightedRR(&Snapshot{Endpoints: ready, Weights: ws, Rand: NewSeededRand(1)})
	}
	shares := func(p *WeightedRR) []float64 {
		var s []float64
		for i := range ready {
			s = append(s, p.Schedule().Share(i))
		}
		return s
	}
	first := build()
	was := shares(first)
	if was[5] >= 0.9 {
		t.Fatalf("the absurd weight was not capped: shares %v", was)
	}
	// New weights, filled into the same buffer for the next picker.
	for i := range ready {
		ready[i].Stats.weights.weight = float64(100 - 10*i)
	}
	kept.drop()
	second := build()
	if got := shares(first); !slices.Equal(got, was) {
		t.Errorf("the first picker's shares changed to %v after the next fill, were %v", got, was)
	}
	// Weights the median leaves as they are: the kept array itself, which
	// the next edit changes.
	was = shares(second)
	kept.remove(0)
	kept.insert(0, ready[5].Stats)
	if got := shares(second); !slices.Equal(got, was) {
		t.Errorf("the second picker's shares changed to %v after an edit, were %v", got, was)
	}
}

// readyWeighted is a READY entry for a new endpoint whose weight as of the
// last update is w, usable or not yet.
func readyWeighted(w float64, usable bool) Ready {
	e := newEndpoint(fmt.Sprint(w), &doneShared{}, false)
	e.weights.weight, e.weights.status = w, orcaweight.NoReports
	if usable {
		e.weights.status = orcaweight.Usable
	}
	return Ready{Stats: e, InvWeight: 1}
}
