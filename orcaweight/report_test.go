package orcaweight

import (
	"math"
	"testing"
	"time"

	v3orcapb "github.com/cncf/xds/go/xds/data/orca/v3"
)

// t0 is an arbitrary fixed origin for the fake times the tests pass to
// Update.
var t0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// at returns t0 plus s seconds.
func at(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }

// near reports whether got is within a relative 1e-12 of want.
func near(got, want float64) bool {
	return math.Abs(got-want) <= 1e-12*math.Abs(want)
}

func TestWeightFormula(t *testing.T) {
	type report = v3orcapb.OrcaLoadReport
	tests := []struct {
		name    string
		cfg     Config
		reports []*report
		want    float64
	}{
		{
			name:    "cpu only",
			reports: []*report{{RpsFractional: 100, CpuUtilization: 0.5}},
			want:    200,
		},
		{
			name:    "application over cpu",
			reports: []*report{{RpsFractional: 100, ApplicationUtilization: 0.25, CpuUtilization: 0.5}},
			want:    400,
		},
		{
			name:    "application above 1 is kept",
			reports: []*report{{RpsFractional: 100, ApplicationUtilization: 2, CpuUtilization: 0.5}},
			want:    50,
		},
		{
			name:    "named metrics: max of those listed",
			cfg:     Config{UtilizationMetrics: []string{"a", "b"}},
			reports: []*report{{RpsFractional: 100, ApplicationUtilization: 0.1, Utilization: map[string]float64{"a": 0.2, "b": 0.4, "c": 0.9}}},
			want:    250,
		},
		{
			name:    "named metrics: absent names ignored",
			cfg:     Config{UtilizationMetrics: []string{"a", "x"}},
			reports: []*report{{RpsFractional: 100, CpuUtilization: 0.1, Utilization: map[string]float64{"a": 0.5}}},
			want:    200,
		},
		{
			name:    "named metrics: none present falls through to application",
			cfg:     Config{UtilizationMetrics: []string{"x"}},
			reports: []*report{{RpsFractional: 100, ApplicationUtilization: 0.5, CpuUtilization: 0.1, Utilization: map[string]float64{"a": 0.9}}},
			want:    200,
		},
		{
			name:    "named metrics: none present, no application, falls through to cpu",
			cfg:     Config{UtilizationMetrics: []string{"x"}},
			reports: []*report{{RpsFractional: 100, CpuUtilization: 0.25}},
			want:    400,
		},
		{
			name:    "unlisted named metric is not used",
			reports: []*report{{RpsFractional: 100, CpuUtilization: 0.5, Utilization: map[string]float64{"a": 0.1}}},
			want:    200,
		},
		{
			name:    "errors ignored without penalty",
			reports: []*report{{RpsFractional: 100, Eps: 50, CpuUtilization: 0.5}},
			want:    200,
		},
		{
			name:    "error penalty 1",
			cfg:     Config{ErrorUtilizationPenalty: 1},
			reports: []*report{{RpsFractional: 100, Eps: 10, CpuUtilization: 0.5}},
			want:    100 / (0.5 + 10.0/100*1),
		},
		{
			name:    "error penalty 2.5",
			cfg:     Config{ErrorUtilizationPenalty: 2.5},
			reports: []*report{{RpsFractional: 100, Eps: 10, CpuUtilization: 0.5}},
			want:    100 / (0.5 + 10.0/100*2.5),
		},
		{
			name:    "all errors, fast: penalty dominates",
			cfg:     Config{ErrorUtilizationPenalty: 1},
			reports: []*report{{RpsFractional: 1000, Eps: 1000, CpuUtilization: 0.01}},
			want:    1000 / (0.01 + 1),
		},
		{
			name: "period mean of several reports",
			cfg:  Config{ErrorUtilizationPenalty: 1},
			reports: []*report{
				{RpsFractional: 100, Eps: 10, CpuUtilization: 0.4},
				{RpsFractional: 300, Eps: 30, CpuUtilization: 0.6},
			},
			// Means: qps 200, eps 20, utilization 0.5.
			want: 200 / (0.5 + 20.0/200*1),
		},
		{
			name: "negative penalty is taken as 0",
			cfg:  Config{ErrorUtilizationPenalty: -1},
			reports: []*report{
				{RpsFractional: 100, Eps: 10, CpuUtilization: 0.5},
			},
			want: 200,
		},
		{
			name:    "tiny but valid values",
			reports: []*report{{RpsFractional: 1e-9, CpuUtilization: 1e-9}},
			want:    1,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := NewGroup(tc.cfg)
			tr := l.NewTracker()
			for _, r := range tc.reports {
				if !tr.Record(r) {
					t.Fatalf("Record(%v) = false, want true", r)
				}
			}
			w, st := tr.Update(at(1))
			if st != Usable || !near(w, tc.want) {
				t.Errorf("Update() = %v, %v; want %v, Usable", w, st, tc.want)
			}
			if got := l.BadReports(); got != 0 {
				t.Errorf("BadReports() = %d, want 0", got)
			}
		})
	}
}

func TestBadReports(t *testing.T) {
	type report = v3orcapb.OrcaLoadReport
	nan, inf := math.NaN(), math.Inf(1)
	named := func(m map[string]float64) *report {
		return &report{RpsFractional: 100, CpuUtilization: 0.5, Utilization: m}
	}
	tests := []struct {
		name string
		r    *report
	}{
		{"nil", nil},
		{"empty", &report{}},
		{"rps NaN", &report{RpsFractional: nan, CpuUtilization: 0.5}},
		{"rps +Inf", &report{RpsFractional: inf, CpuUtilization: 0.5}},
		{"rps -Inf", &report{RpsFractional: -inf, CpuUtilization: 0.5}},
		{"rps negative", &report{RpsFractional: -1, CpuUtilization: 0.5}},
		{"rps zero", &report{RpsFractional: 0, CpuUtilization: 0.5}},
		{"eps NaN", &report{RpsFractional: 100, Eps: nan, CpuUtilization: 0.5}},
		{"eps +Inf", &report{RpsFractional: 100, Eps: inf, CpuUtilization: 0.5}},
		{"eps negative", &report{RpsFractional: 100, Eps: -1, CpuUtilization: 0.5}},
		{"cpu NaN", &report{RpsFractional: 100, CpuUtilization: nan}},
		{"cpu +Inf", &report{RpsFractional: 100, CpuUtilization: inf}},
		{"cpu negative", &report{RpsFractional: 100, CpuUtilization: -0.5}},
		{"utilization zero with qps", &report{RpsFractional: 100}},
		// grpc-go chooses application_utilization whenever it is not 0;
		// an invalid one is rejected, not replaced by cpu_utilization.
		{"application NaN", &report{RpsFractional: 100, ApplicationUtilization: nan, CpuUtilization: 0.5}},
		{"application -Inf", &report{RpsFractional: 100, ApplicationUtilization: -inf, CpuUtilization: 0.5}},
		{"application negative", &report{RpsFractional: 100, ApplicationUtilization: -0.5, CpuUtilization: 0.5}},
		{"named NaN", named(map[string]float64{"a": nan, "b": 0.5})},
		{"named +Inf", named(map[string]float64{"b": inf})},
		{"named negative", named(map[string]float64{"a": 0.5, "b": -1})},
		{"named present and zero", named(map[string]float64{"a": 0})},
	}
	cfg := Config{UtilizationMetrics: []string{"a", "b"}, ErrorUtilizationPenalty: 1}
	good := &report{RpsFractional: 100, CpuUtilization: 0.5}        // weight 200
	other := &report{RpsFractional: 100, ApplicationUtilization: 1} // weight 100
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := NewGroup(cfg)
			tr := l.NewTracker()
			tr.Record(good)
			if w, st := tr.Update(at(1)); st != Usable || w != 200 {
				t.Fatalf("setup: Update() = %v, %v; want 200, Usable", w, st)
			}

			if tr.Record(tc.r) {
				t.Fatalf("Record(%v) = true, want false", tc.r)
			}
			if got := l.BadReports(); got != 1 {
				t.Errorf("BadReports() = %d, want 1", got)
			}
			// A period with only the bad report keeps the weight.
			if w, st := tr.Update(at(2)); st != Usable || w != 200 {
				t.Errorf("after bad report: Update() = %v, %v; want 200, Usable", w, st)
			}
			// A bad report does not contaminate a good one's period.
			tr.Record(tc.r)
			tr.Record(other)
			if w, st := tr.Update(at(3)); st != Usable || w != 100 {
				t.Errorf("bad and good report: Update() = %v, %v; want 100, Usable", w, st)
			}
			if got := l.BadReports(); got != 2 {
				t.Errorf("BadReports() = %d, want 2", got)
			}
		})
	}
}

func TestPeriodMeansRejectsOverflow(t *testing.T) {
	tests := []struct {
		name                   string
		n                      uint64
		sumQPS, sumEPS, sumUtl float64
		penalty                float64
		ok                     bool
	}{
		{"valid", 2, 200, 20, 1, 1, true},
		{"empty", 0, 0, 0, 0, 1, false},
		{"split report: count without utilization", 1, 100, 0, 0, 1, false},
		{"split report: count without qps", 1, 0, 0, 0.5, 1, false},
		{"qps sum overflowed", 2, math.Inf(1), 0, 1, 1, false},
		{"weight overflows", 1, 1e300, 0, 1e-300, 1, false},
		{"cost overflows", 1, 1e-300, 1e300, 0.5, 1, false},
		{"mean underflows", 3, 5e-324, 0, 1, 1, false},
		{"huge error rate without penalty", 1, 1e-300, 1e300, 0.5, 0, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			qps, c, ok := periodMeans(tc.n, tc.sumQPS, tc.sumEPS, tc.sumUtl, tc.penalty)
			if ok != tc.ok {
				t.Fatalf("periodMeans() = %v, %v, %v; want ok %v", qps, c, ok, tc.ok)
			}
			if ok && !(positive(qps) && positive(c) && positive(qps/c)) {
				t.Errorf("periodMeans() = %v, %v: want finite positive qps, cost and weight", qps, c)
			}
		})
	}
}
