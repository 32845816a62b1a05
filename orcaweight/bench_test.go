package orcaweight

import (
	"sync/atomic"
	"testing"

	v3orcapb "github.com/cncf/xds/go/xds/data/orca/v3"
	"google.golang.org/grpc/balancer"
)

// BenchmarkRecord is the worst case for Record: every goroutine records
// into the same Tracker at once, as when all cores finish calls to one
// endpoint at the same instant.
func BenchmarkRecord(b *testing.B) {
	tr := NewGroup(Config{ErrorUtilizationPenalty: 1}).NewTracker()
	r := &v3orcapb.OrcaLoadReport{RpsFractional: 100, ApplicationUtilization: 0.5}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			tr.Record(r)
		}
	})
}

// BenchmarkRecordUncontended is the usual case: one goroutine, no
// contention, by kind of report.
func BenchmarkRecordUncontended(b *testing.B) {
	tests := []struct {
		name    string
		metrics []string
		r       *v3orcapb.OrcaLoadReport
	}{
		{"application", nil, &v3orcapb.OrcaLoadReport{RpsFractional: 100, ApplicationUtilization: 0.5}},
		{"with-errors", nil, &v3orcapb.OrcaLoadReport{RpsFractional: 100, Eps: 2, CpuUtilization: 0.5}},
		{"named-metrics", []string{"queue", "memory"}, &v3orcapb.OrcaLoadReport{RpsFractional: 100, CpuUtilization: 0.5, Utilization: map[string]float64{"queue": 0.3, "memory": 0.6}}},
		{"rejected", nil, &v3orcapb.OrcaLoadReport{CpuUtilization: 0.5}},
	}
	for _, tc := range tests {
		b.Run(tc.name, func(b *testing.B) {
			tr := NewGroup(Config{UtilizationMetrics: tc.metrics}).NewTracker()
			b.ReportAllocs()
			for b.Loop() {
				tr.Record(tc.r)
			}
		})
	}
}

// BenchmarkDone is the per-call hook as a picker hands it out, with all
// goroutines sharing one endpoint.
func BenchmarkDone(b *testing.B) {
	done := NewGroup(Config{}).NewTracker().Done()
	info := balancer.DoneInfo{ServerLoad: &v3orcapb.OrcaLoadReport{RpsFractional: 100, CpuUtilization: 0.5}}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			done(info)
		}
	})
}

func BenchmarkUpdate(b *testing.B) {
	tr := NewGroup(Config{HalfLife: 1e10, ErrorUtilizationPenalty: 1}).NewTracker()
	r := &v3orcapb.OrcaLoadReport{RpsFractional: 100, Eps: 1, CpuUtilization: 0.5}
	b.ReportAllocs()
	s := 0.0
	for b.Loop() {
		tr.Record(r)
		s++
		tr.Update(at(s))
	}
}

// fixedAccumulators is the design Tracker does not use, kept here to
// measure it against the one it does (see accumulators): sums as
// fixed-point integers with 2^-20 resolution, added with plain atomic
// adds. It has no range checks, so it is only fit for a benchmark.
type fixedAccumulators struct {
	n, qps, eps, util atomic.Uint64
}

const fixedOne = 1 << 20

func (a *fixedAccumulators) add(qps, eps, util float64) {
	a.qps.Add(uint64(qps*fixedOne + 0.5))
	if eps != 0 {
		a.eps.Add(uint64(eps*fixedOne + 0.5))
	}
	a.util.Add(uint64(util*fixedOne + 0.5))
	a.n.Add(1)
}

func (a *accumulators) add(qps, eps, util float64) {
	addFloat(&a.qps, qps)
	if eps != 0 {
		addFloat(&a.eps, eps)
	}
	addFloat(&a.util, util)
	a.n.Add(1)
}

// adder is what BenchmarkAccumulate measures.
type adder interface{ add(qps, eps, util float64) }

// BenchmarkAccumulate compares the two ways of summing a period's reports
// lock-free, alone and with every goroutine adding to the same sums.
func BenchmarkAccumulate(b *testing.B) {
	strategies := []struct {
		name string
		new  func() adder
	}{
		{"float-cas", func() adder { return new(accumulators) }},
		{"fixed-point-add", func() adder { return new(fixedAccumulators) }},
	}
	for _, st := range strategies {
		b.Run(st.name+"/uncontended", func(b *testing.B) {
			a := st.new()
			for b.Loop() {
				a.add(100, 0, 0.5)
			}
		})
		b.Run(st.name+"/shared", func(b *testing.B) {
			a := st.new()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					a.add(100, 0, 0.5)
				}
			})
		})
	}
}
