package orcaweight

import (
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	v3orcapb "github.com/cncf/xds/go/xds/data/orca/v3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/balancer"
)

// cpuReport is a report of qps queries per second at utilization util.
func cpuReport(qps, util float64) *v3orcapb.OrcaLoadReport {
	return &v3orcapb.OrcaLoadReport{RpsFractional: qps, CpuUtilization: util}
}

func TestBlackoutAndExpiry(t *testing.T) {
	// Each row runs Update once a second from `from` to `to` (inclusive),
	// with one report before each Update if report is set, and expects
	// status from every one of them. Gaps between rows have no Update.
	type row struct {
		from, to int
		report   bool
		want     Status
	}
	tests := []struct {
		name string
		cfg  Config
		rows []row
	}{
		{
			name: "blackout then expiry then blackout again",
			cfg:  Config{BlackoutPeriod: 10 * time.Second, WeightExpirationPeriod: 3 * time.Minute},
			rows: []row{
				{0, 0, false, NoReports},
				{1, 10, true, Blackout}, // reporting since 1: 9s < 10s at 10
				{11, 20, true, Usable},  // 10s of reports at 11
				{21, 199, false, Usable},
				{200, 210, false, Stale}, // last report at 20: 180s at 200
				{250, 259, true, Blackout},
				{260, 270, true, Usable},
				// No Update sees the weight go stale: reports resuming after
				// the expiry period start a new blackout all the same.
				{500, 509, true, Blackout},
				{510, 511, true, Usable},
			},
		},
		{
			name: "no blackout",
			cfg:  Config{WeightExpirationPeriod: 5 * time.Second},
			rows: []row{
				{0, 2, false, NoReports},
				{3, 3, true, Usable},
				{4, 7, false, Usable},
				{8, 9, false, Stale},
				{10, 10, true, Usable},
			},
		},
		{
			name: "no expiry",
			cfg:  Config{BlackoutPeriod: 2 * time.Second},
			rows: []row{
				{1, 2, true, Blackout},
				{3, 3, true, Usable},
				{4, 100000, false, Usable},
			},
		},
		{
			name: "sparse reports count as continuous",
			cfg:  Config{BlackoutPeriod: 10 * time.Second, WeightExpirationPeriod: 30 * time.Second},
			rows: []row{
				{0, 0, true, Blackout},
				{1, 9, false, Blackout},
				{10, 10, true, Usable},
				{11, 39, false, Usable},
				{40, 40, false, Stale},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr := NewGroup(tc.cfg).NewTracker()
			for _, r := range tc.rows {
				for s := r.from; s <= r.to; s++ {
					if r.report {
						tr.Record(cpuReport(100, 0.5))
					}
					w, st := tr.Update(at(float64(s)))
					if st != r.want {
						t.Fatalf("t=%ds: status %v, want %v", s, st, r.want)
					}
					if (st == Usable) != (w == 200) || (st != Usable && w != 0) {
						t.Fatalf("t=%ds: weight %v with status %v", s, w, st)
					}
				}
			}
		})
	}
}

func TestReset(t *testing.T) {
	tr := NewGroup(Config{BlackoutPeriod: 2 * time.Second, WeightExpirationPeriod: time.Minute, HalfLife: time.Hour}).NewTracker()
	for s := range 5 {
		tr.Record(cpuReport(100, 0.5))
		tr.Update(at(float64(s)))
	}
	if w, st := tr.Update(at(5)); st != Usable || w != 200 {
		t.Fatalf("before Reset: Update() = %v, %v; want 200, Usable", w, st)
	}
	tr.Record(cpuReport(100, 0.5)) // pending when Reset comes: dropped
	tr.Reset()
	if w, st := tr.Update(at(6)); st != NoReports || w != 0 {
		t.Fatalf("after Reset: Update() = %v, %v; want 0, NoReports", w, st)
	}
	// The averages start over (an hour's half-life would otherwise keep
	// the old weight), and so does the blackout.
	tr.Record(cpuReport(100, 0.25))
	if _, st := tr.Update(at(7)); st != Blackout {
		t.Fatalf("first report after Reset: status %v, want Blackout", st)
	}
	tr.Record(cpuReport(100, 0.25))
	if w, st := tr.Update(at(9)); st != Usable || w != 400 {
		t.Fatalf("after blackout: Update() = %v, %v; want 400, Usable", w, st)
	}
}

func TestHalfLifeZeroIsRaw(t *testing.T) {
	const penalty = 1.5
	rng := rand.New(rand.NewPCG(7, 7))
	tr := NewGroup(Config{ErrorUtilizationPenalty: penalty}).NewTracker()
	for s := 1; s <= 200; s++ {
		var sumQ, sumE, sumU float64
		n := 1 + rng.IntN(5)
		for range n {
			q := 10 + 990*rng.Float64()
			e := q * 0.2 * rng.Float64()
			u := 0.05 + rng.Float64()
			tr.Record(&v3orcapb.OrcaLoadReport{RpsFractional: q, Eps: e, CpuUtilization: u})
			sumQ, sumE, sumU = sumQ+q, sumE+e, sumU+u
		}
		mq, me, mu := sumQ/float64(n), sumE/float64(n), sumU/float64(n)
		want := mq / (mu + me/mq*penalty)
		if w, st := tr.Update(at(float64(s))); st != Usable || !near(w, want) {
			t.Fatalf("t=%ds: Update() = %v, %v; want %v, Usable", s, w, st, want)
		}
	}
}

func TestSmoothingIsTimeWeighted(t *testing.T) {
	// Out-of-band reports every 10s, Updates every second: the averages
	// move by 1 - 2^(-10s/HalfLife) per report, not per Update.
	tests := []struct {
		name     string
		halfLife time.Duration
		share    float64 // of the second report in the averages
	}{
		{"half-life equal to the gap", 10 * time.Second, 0.5},
		{"half-life half the gap", 5 * time.Second, 0.75},
		{"half-life twice the gap", 20 * time.Second, 1 - math.Sqrt(0.5)},
		{"no smoothing", 0, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr := NewGroup(Config{HalfLife: tc.halfLife}).NewTracker()
			tr.Record(cpuReport(100, 0.5))
			tr.Update(at(0))
			for s := 1; s < 10; s++ {
				if w, _ := tr.Update(at(float64(s))); w != 200 {
					t.Fatalf("t=%ds: weight %v moved without reports", s, w)
				}
			}
			tr.Record(cpuReport(100, 0.25))
			w, st := tr.Update(at(10))
			want := 100 / (0.5 + tc.share*(0.25-0.5))
			if st != Usable || !near(w, want) {
				t.Errorf("Update() = %v, %v; want %v, Usable", w, st, want)
			}
		})
	}
}

func TestSmoothingRestartsAfterExpiry(t *testing.T) {
	tr := NewGroup(Config{WeightExpirationPeriod: 30 * time.Second, HalfLife: time.Hour}).NewTracker()
	tr.Record(cpuReport(100, 0.5))
	tr.Update(at(0))
	if _, st := tr.Update(at(30)); st != Stale {
		t.Fatalf("status %v, want Stale", st)
	}
	// With an hour's half-life, mixing would keep the weight near 200.
	tr.Record(cpuReport(100, 0.25))
	if w, st := tr.Update(at(31)); st != Usable || w != 400 {
		t.Errorf("after expiry: Update() = %v, %v; want 400, Usable", w, st)
	}
}

// spread returns the mean and the relative spread (stddev / mean) of xs.
func spread(xs []float64) (mean, rel float64) {
	for _, x := range xs {
		mean += x
	}
	mean /= float64(len(xs))
	var ss float64
	for _, x := range xs {
		ss += (x - mean) * (x - mean)
	}
	return mean, math.Sqrt(ss/float64(len(xs))) / mean
}

func TestSmoothingNoise(t *testing.T) {
	// A backend at a steady 100 qps whose utilization reads 0.5 ± 40%
	// (uniform): its true weight is 100 / 0.5 = 200.
	rng := rand.New(rand.NewPCG(1, 2))
	raw := NewGroup(Config{}).NewTracker()
	smooth := NewGroup(Config{HalfLife: 10 * time.Second}).NewTracker()
	var rawW, smoothW []float64
	for s := 1; s <= 300; s++ {
		r := cpuReport(100, 0.5*(1+0.4*(2*rng.Float64()-1)))
		raw.Record(r)
		smooth.Record(r)
		w, st := raw.Update(at(float64(s)))
		if st != Usable {
			t.Fatalf("raw status %v at t=%ds", st, s)
		}
		rawW = append(rawW, w)
		w, st = smooth.Update(at(float64(s)))
		if st != Usable {
			t.Fatalf("smoothed status %v at t=%ds", st, s)
		}
		smoothW = append(smoothW, w)
	}
	rawMean, rawSpread := spread(rawW)
	smoothMean, smoothSpread := spread(smoothW)
	t.Logf("300 periods of 1s, utilization 0.5±40%%: raw weight mean %.1f spread %.3f; smoothed (half-life 10s) mean %.1f spread %.3f (%.1fx steadier); true weight 200",
		rawMean, rawSpread, smoothMean, smoothSpread, rawSpread/smoothSpread)
	if smoothSpread >= rawSpread/3 {
		t.Errorf("smoothed spread %.3f, want < raw spread / 3 = %.3f", smoothSpread, rawSpread/3)
	}
}

func TestSmoothingStep(t *testing.T) {
	// A backend at a steady 100 qps whose capacity changes at t=100s, so
	// its utilization goes from before to after.
	const halfLife = 10 * time.Second
	tests := []struct {
		name          string
		before, after float64 // utilization
	}{
		{"capacity doubles", 0.5, 0.25},
		{"capacity halves", 0.25, 0.5},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr := NewGroup(Config{HalfLife: halfLife}).NewTracker()
			oldW, newW := 100/tc.before, 100/tc.after
			reached := -1.0
			for s := 1; s <= 200; s++ {
				u := tc.before
				if s >= 100 {
					u = tc.after
				}
				tr.Record(cpuReport(100, u))
				w, _ := tr.Update(at(float64(s)))
				if s < 100 && !near(w, oldW) {
					t.Fatalf("t=%ds: weight %v before the step, want %v", s, w, oldW)
				}
				if s >= 100 && reached < 0 && math.Abs(w-newW) <= 0.1*newW {
					reached = float64(s - 100)
				}
			}
			t.Logf("weight %.0f -> %.0f: within 10%% of the new value after %.0fs (%.2f half-lives)",
				oldW, newW, reached, reached/halfLife.Seconds())
			if reached < 0 || reached > 4*halfLife.Seconds() {
				t.Errorf("took %vs to come within 10%% of %v, want <= 4 half-lives (%v)", reached, newW, 4*halfLife)
			}
		})
	}
}

func TestDone(t *testing.T) {
	good := cpuReport(100, 0.5)
	tests := []struct {
		name     string
		load     any
		recorded bool
	}{
		{"nil", nil, false},
		{"typed nil report", (*v3orcapb.OrcaLoadReport)(nil), false},
		{"wrong type", "cpu=0.5", false},
		{"report by value", v3orcapb.OrcaLoadReport{RpsFractional: 100, CpuUtilization: 0.5}, false},
		{"report", good, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := NewGroup(Config{})
			tr := l.NewTracker()
			tr.Done()(balancer.DoneInfo{ServerLoad: tc.load})
			_, st := tr.Update(at(1))
			if got := st == Usable; got != tc.recorded {
				t.Errorf("status %v after Done, want recorded=%v", st, tc.recorded)
			}
			if got := l.BadReports(); got != 0 {
				t.Errorf("BadReports() = %d, want 0", got)
			}
		})
	}
}

func TestOnLoadReport(t *testing.T) {
	l := NewGroup(Config{})
	tr := l.NewTracker()
	tr.OnLoadReport(nil) // never sent by grpc-go, but counted as bad
	tr.OnLoadReport(cpuReport(100, 0.5))
	if w, st := tr.Update(at(1)); st != Usable || w != 200 {
		t.Errorf("Update() = %v, %v; want 200, Usable", w, st)
	}
	if got := l.BadReports(); got != 1 {
		t.Errorf("BadReports() = %d, want 1", got)
	}
}

// TestRecordN checks that a report recorded as n weighs in a period's means
// as n copies of it would, that n = 0 records nothing and counts nothing,
// and that a bad report is counted once, whatever n.
func TestRecordN(t *testing.T) {
	cfg := Config{ErrorUtilizationPenalty: 1}
	light := &v3orcapb.OrcaLoadReport{RpsFractional: 100, Eps: 5, CpuUtilization: 0.2}
	heavy := &v3orcapb.OrcaLoadReport{RpsFractional: 300, Eps: 1, CpuUtilization: 0.9}

	sampled, copies := NewGroup(cfg), NewGroup(cfg)
	s, c := sampled.NewTracker(), copies.NewTracker()
	s.Record(light)
	if !s.RecordN(heavy, 7) {
		t.Fatal("RecordN(good report, 7) = false")
	}
	c.Record(light)
	for range 7 {
		c.Record(heavy)
	}
	got, _ := s.Update(at(1))
	want, _ := c.Update(at(1))
	if math.Abs(got-want) > 1e-9*want {
		t.Errorf("weight %v after RecordN(r, 7), %v after seven Records", got, want)
	}

	if s.RecordN(heavy, 0) {
		t.Error("RecordN(r, 0) = true, want false")
	}
	if w, _ := s.Update(at(2)); w != got {
		t.Errorf("weight %v after RecordN(r, 0), want it unchanged at %v", w, got)
	}
	if s.RecordN(cpuReport(-1, 0.5), 8) {
		t.Error("RecordN(bad report, 8) = true")
	}
	if n := sampled.BadReports(); n != 8 {
		t.Errorf("BadReports() = %d after one bad report recorded as 8, want 8", n)
	}
	// A good report that n makes infinite is rejected, and the period
	// keeps the weight it had.
	if s.RecordN(&v3orcapb.OrcaLoadReport{RpsFractional: 1e300, CpuUtilization: 0.5}, 1<<40) {
		t.Error("RecordN(r, 2^40) whose qps times n overflows = true")
	}
	if n := sampled.BadReports(); n != 8+1<<40 {
		t.Errorf("BadReports() = %d after an overflowing RecordN of 2^40, want %d", n, 8+1<<40)
	}
	if w, _ := s.Update(at(3)); w != got {
		t.Errorf("weight %v after an overflowing RecordN, want it unchanged at %v", w, got)
	}
}

func TestRecordAndDoneDoNotAllocate(t *testing.T) {
	l := NewGroup(Config{UtilizationMetrics: []string{"a", "b"}, ErrorUtilizationPenalty: 1})
	tr := l.NewTracker()
	done := tr.Done()
	good := &v3orcapb.OrcaLoadReport{RpsFractional: 100, Eps: 1, CpuUtilization: 0.5, Utilization: map[string]float64{"b": 0.4}}
	bad := cpuReport(-1, 0.5)
	tests := []struct {
		name string
		f    func()
	}{
		{"Record", func() { tr.Record(good) }},
		{"Record bad", func() { tr.Record(bad) }},
		{"RecordN", func() { tr.RecordN(good, 8) }},
		{"OnLoadReport", func() { tr.OnLoadReport(good) }},
		{"Done", func() { done(balancer.DoneInfo{ServerLoad: good}) }},
		{"Done without report", func() { done(balancer.DoneInfo{}) }},
		{"Done()", func() { _ = tr.Done() }},
		{"Update", func() { tr.Update(at(1)) }},
	}
	for _, tc := range tests {
		if a := testing.AllocsPerRun(1000, tc.f); a != 0 {
			t.Errorf("%s allocates %v times per call, want 0", tc.name, a)
		}
	}
}

func TestConfig(t *testing.T) {
	metrics := []string{"a"}
	l := NewGroup(Config{
		BlackoutPeriod:          -time.Second,
		WeightExpirationPeriod:  -time.Second,
		ErrorUtilizationPenalty: math.NaN(),
		HalfLife:                -time.Second,
		UtilizationMetrics:      metrics,
	})
	metrics[0] = "changed by the caller"
	want := Config{UtilizationMetrics: []string{"a"}}
	if diff := cmp.Diff(want, l.Config()); diff != "" {
		t.Errorf("Config() sanitized (-want +got):\n%s", diff)
	}
	got := l.Config()
	got.UtilizationMetrics[0] = "changed through Config"
	if diff := cmp.Diff(want, l.Config()); diff != "" {
		t.Errorf("Config() after mutating a returned copy (-want +got):\n%s", diff)
	}

	want = Config{BlackoutPeriod: time.Second, WeightExpirationPeriod: time.Minute, ErrorUtilizationPenalty: 2, HalfLife: 3 * time.Second}
	l.SetConfig(want)
	if diff := cmp.Diff(want, l.Config()); diff != "" {
		t.Errorf("Config() after SetConfig (-want +got):\n%s", diff)
	}
	for _, p := range []float64{-1, math.Inf(1), math.Inf(-1)} {
		l.SetConfig(Config{ErrorUtilizationPenalty: p})
		if got := l.Config().ErrorUtilizationPenalty; got != 0 {
			t.Errorf("ErrorUtilizationPenalty %v became %v, want 0", p, got)
		}
	}
}

func TestSetConfigAppliesToTrackers(t *testing.T) {
	l := NewGroup(Config{})
	tr := l.NewTracker()
	r := &v3orcapb.OrcaLoadReport{RpsFractional: 100, Eps: 10, CpuUtilization: 0.5, Utilization: map[string]float64{"q": 0.25}}
	tr.Record(r)
	if w, _ := tr.Update(at(1)); w != 200 {
		t.Fatalf("weight %v, want 200", w)
	}
	l.SetConfig(Config{UtilizationMetrics: []string{"q"}, ErrorUtilizationPenalty: 1})
	tr.Record(r)
	if w, _ := tr.Update(at(2)); !near(w, 100/(0.25+0.1)) {
		t.Errorf("weight %v after SetConfig, want %v", w, 100/(0.25+0.1))
	}
}

func TestStatusString(t *testing.T) {
	got := []string{NoReports.String(), Blackout.String(), Stale.String(), Usable.String(), Status(9).String()}
	want := []string{"NoReports", "Blackout", "Stale", "Usable", "Status(9)"}
	if !slices.Equal(got, want) {
		t.Errorf("String() = %q, want %q", got, want)
	}
}

func TestConcurrentRecordUpdateResetSetConfig(t *testing.T) {
	const (
		recorders = 4
		records   = 20000
		badEvery  = 10
	)
	l := NewGroup(Config{BlackoutPeriod: time.Second, WeightExpirationPeriod: time.Minute, HalfLife: 5 * time.Second, UtilizationMetrics: []string{"a"}})
	tr := l.NewTracker()
	good := &v3orcapb.OrcaLoadReport{RpsFractional: 100, Eps: 5, CpuUtilization: 0.5, Utilization: map[string]float64{"a": 0.4}}
	bad := cpuReport(math.NaN(), 0.5)
	done := tr.Done()

	var wg sync.WaitGroup
	for g := range recorders {
		wg.Go(func() {
			for i := range records {
				switch {
				case i%badEvery == 0:
					tr.Record(bad)
				case (i+g)%3 == 0:
					tr.Record(good)
				case (i+g)%3 == 1:
					tr.OnLoadReport(good)
				default:
					done(balancer.DoneInfo{ServerLoad: good})
				}
			}
		})
	}
	wg.Go(func() {
		for i := range 2000 {
			w, st := tr.Update(at(float64(i) / 10))
			if st == Usable && !positive(w) {
				t.Errorf("Update() = %v, Usable: want a finite weight > 0", w)
			}
			if st != Usable && w != 0 {
				t.Errorf("Update() = %v, %v: want 0 when not usable", w, st)
			}
		}
	})
	wg.Go(func() {
		for i := range 500 {
			l.SetConfig(Config{
				BlackoutPeriod:          time.Duration(i%3) * time.Second,
				WeightExpirationPeriod:  time.Minute,
				ErrorUtilizationPenalty: float64(i % 4),
				HalfLife:                time.Duration(i%5) * time.Second,
				UtilizationMetrics:      []string{"a"},
			})
			_ = l.Config()
			if i%50 == 0 {
				tr.Reset()
			}
		}
	})
	wg.Wait()

	if got, want := l.BadReports(), uint64(recorders*records/badEvery); got != want {
		t.Errorf("BadReports() = %d, want %d", got, want)
	}
	// Whatever interleaving happened, the tracker still works.
	tr.Reset()
	l.SetConfig(Config{})
	tr.Record(cpuReport(100, 0.5))
	if w, st := tr.Update(at(1000)); st != Usable || !near(w, 200) {
		t.Errorf("after the storm: Update() = %v, %v; want 200, Usable", w, st)
	}
}
