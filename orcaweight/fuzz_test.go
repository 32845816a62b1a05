package orcaweight

import (
	"math"
	"testing"
	"time"

	v3orcapb "github.com/cncf/xds/go/xds/data/orca/v3"
	"google.golang.org/grpc/balancer"
	"google.golang.org/protobuf/proto"
)

// FuzzRecord feeds arbitrary wire bytes, decoded as a backend's report,
// through Record, the Done hook and Update: nothing may panic, a rejected
// report is counted exactly once, and a Usable weight is finite and > 0.
func FuzzRecord(f *testing.F) {
	nan, inf := math.NaN(), math.Inf(1)
	seeds := []*v3orcapb.OrcaLoadReport{
		{RpsFractional: 100, CpuUtilization: 0.5},
		{RpsFractional: 100, Eps: 10, ApplicationUtilization: 0.7, CpuUtilization: 0.2},
		{RpsFractional: 3.5, Utilization: map[string]float64{"a": 0.1, "b": 0.9, "c": 2}},
		{RpsFractional: 1e308, CpuUtilization: 1e-308},         // weight overflows
		{RpsFractional: 1e-300, Eps: 1e300, CpuUtilization: 1}, // cost overflows
		{RpsFractional: 5e-324, CpuUtilization: 5e-324},
		{},
		{RpsFractional: nan, CpuUtilization: 0.5},
		{RpsFractional: 100, Eps: -1, CpuUtilization: 0.5},
		{RpsFractional: 100, CpuUtilization: inf},
		{RpsFractional: 100, ApplicationUtilization: -0.5, CpuUtilization: 0.5},
		{RpsFractional: 100, Utilization: map[string]float64{"a": nan}},
		{RpsFractional: 100, Utilization: map[string]float64{"b": 0}},
	}
	for _, r := range seeds {
		b, err := proto.Marshal(r)
		if err != nil {
			f.Fatalf("proto.Marshal(%v): %v", r, err)
		}
		f.Add(b)
	}
	f.Add([]byte{0xff, 0xff, 0xff})       // not a message
	f.Add([]byte{0x31, 0, 0, 0, 0, 0, 0}) // truncated fixed64
	f.Fuzz(func(t *testing.T, data []byte) {
		r := new(v3orcapb.OrcaLoadReport)
		if err := proto.Unmarshal(data, r); err != nil {
			return
		}
		l := NewGroup(Config{
			ErrorUtilizationPenalty: 1,
			HalfLife:                10 * time.Second,
			UtilizationMetrics:      []string{"a", "b"},
		})
		tr := l.NewTracker()
		check := func(step string, w float64, st Status) {
			if st == Usable && !positive(w) {
				t.Fatalf("%s: Update() = %v, Usable: want a finite weight > 0 (report %v)", step, w, r)
			}
			if st != Usable && w != 0 {
				t.Fatalf("%s: Update() = %v, %v: want 0 when not usable (report %v)", step, w, st, r)
			}
		}

		ok := tr.Record(r)
		wantBad := uint64(0)
		if !ok {
			wantBad = 1
		}
		if got := l.BadReports(); got != wantBad {
			t.Fatalf("Record() = %v, BadReports() = %d; want %d", ok, got, wantBad)
		}
		w, st := tr.Update(at(1))
		check("first period", w, st)
		if ok && st != Usable {
			// Only a weight beyond float64's range may keep an accepted
			// report from giving a usable weight.
			s := l.settings.Load()
			if _, _, valid := periodMeans(1, r.RpsFractional, r.Eps, s.utilization(r), 1); valid {
				t.Fatalf("accepted report %v gave status %v", r, st)
			}
		}

		// Accumulate several copies, through both entry points.
		tr.Done()(balancer.DoneInfo{ServerLoad: r})
		tr.Record(r)
		tr.OnLoadReport(r)
		w, st = tr.Update(at(2))
		check("second period", w, st)
		w, st = tr.Update(at(3))
		check("empty period", w, st)
	})
}
