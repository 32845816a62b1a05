package engine

import (
	"math"
	"testing"
	"time"

	v3orcapb "github.com/cncf/xds/go/xds/data/orca/v3"
	"github.com/pickwise/pickwise/serverload"
)

// TestReportNamesAreServerloads: the client reads the named metrics the
// server writes.
func TestReportNamesAreServerloads(t *testing.T) {
	if rifMetric != serverload.RIFMetric || latencyMetric != serverload.LatencyMetric {
		t.Errorf("reading %q and %q, serverload writes %q and %q", rifMetric, latencyMetric, serverload.RIFMetric, serverload.LatencyMetric)
	}
}

func TestReportOf(t *testing.T) {
	for _, tc := range []struct {
		name    string
		load    any
		rif     uint32
		latency float64
		ok      bool
	}{
		{"none", nil, 0, 0, false},
		{"not ORCA", "x", 0, 0, false},
		{"no figures", &v3orcapb.OrcaLoadReport{CpuUtilization: 0.5}, 0, 0, false},
		{"both", &v3orcapb.OrcaLoadReport{NamedMetrics: map[string]float64{rifMetric: 7, latencyMetric: 0.012}}, 7, 0.012, true},
		{"RIF only", &v3orcapb.OrcaLoadReport{NamedMetrics: map[string]float64{rifMetric: 3}}, 3, 0, true},
		{"negative RIF", &v3orcapb.OrcaLoadReport{NamedMetrics: map[string]float64{rifMetric: -1}}, 0, 0, false},
		{"NaN RIF", &v3orcapb.OrcaLoadReport{NamedMetrics: map[string]float64{rifMetric: math.NaN()}}, 0, 0, false},
		{"huge RIF", &v3orcapb.OrcaLoadReport{NamedMetrics: map[string]float64{rifMetric: 1e12}}, math.MaxUint32 >> 1, 0, true},
	} {
		rif, latency, ok := reportOf(tc.load)
		if rif != tc.rif || latency != tc.latency || ok != tc.ok {
			t.Errorf("%s: reportOf = %d, %v, %v; want %d, %v, %v", tc.name, rif, latency, ok, tc.rif, tc.latency, tc.ok)
		}
	}
}

// TestEstimate: an answer's RIF moves with the calls this client starts
// and finishes after it, saturates, and a latency no server could mean is
// unknown.
func TestEstimate(t *testing.T) {
	e := newEndpoint("x", nil, false)
	if _, _, known := e.estimate(); known {
		t.Fatal("an endpoint with no answer has a known estimate")
	}
	e.inflight.Store(5)
	e.setAnswer(10, 0.02, int64(time.Second), e.inflight.Load())
	for _, tc := range []struct {
		inflight uint32
		want     int64
	}{{5, 10}, {8, 13}, {0, 5}} {
		e.inflight.Store(tc.inflight)
		if rif, lat, _ := e.estimate(); rif != tc.want || math.Abs(lat-0.02) > 1e-6 {
			t.Errorf("in flight %d: estimate %d, %v; want %d, 0.02", tc.inflight, rif, lat, tc.want)
		}
	}
	// The in-flight count is kept to 16 bits: differences are right
	// across their wrap.
	e.setAnswer(10, 0.02, 0, 65533)
	e.inflight.Store(65539)
	if rif, _, _ := e.estimate(); rif != 16 {
		t.Errorf("across the wrap: estimate %d, want 16", rif)
	}
	e.inflight.Store(0)
	e.setAnswer(1<<20, math.NaN(), 0, 0)
	if rif, lat, _ := e.estimate(); rif != math.MaxUint16 || lat != 0 {
		t.Errorf("saturated answer: estimate %d, %v; want %d, 0", rif, lat, math.MaxUint16)
	}
	e.setAnswer(1, -3, 0, 0)
	if _, lat, _ := e.estimate(); lat != 0 {
		t.Errorf("negative latency: estimate %v, want 0 (unknown)", lat)
	}
}

// TestAnswerTime: an answer's age is right across the wrap of its 32-bit
// time, and its index and uses survive a new index.
func TestAnswerTime(t *testing.T) {
	e := newEndpoint("x", nil, false)
	now := int64(math.MaxUint32-10) * timeUnit
	e.setIndex(7)
	e.setAnswer(1, 0.01, now, 0)
	e.use()
	e.use()
	e.setIndex(9)
	later := now + int64(100*time.Millisecond)
	s := e.spent.Load()
	if age := answerAge(s, later); age < int64(99*time.Millisecond) || age > int64(101*time.Millisecond) {
		t.Errorf("age across the wrap %v, want 100ms", time.Duration(age))
	}
	if usesOf(s) != 2 || e.indexOf(s) != 9 {
		t.Errorf("uses %d, index %d; want 2, 9", usesOf(s), e.indexOf(s))
	}
	e.setIndex(1 << 20)
	if i := e.indexOf(e.spent.Load()); i != 1<<20 {
		t.Errorf("large index read back as %d", i)
	}
}

// TestLoadPool: offers fill free slots first; a report never evicts, a
// probe's answer evicts a spent answer before the oldest newcomer;
// expiry drops old answers and sets the hot line.
func TestLoadPool(t *testing.T) {
	p := newLoadPool(3)
	eps := make([]*Endpoint, 5)
	for i := range eps {
		eps[i] = newEndpoint("x", nil, false)
		eps[i].setAnswer(uint32(10*i), 0.01, 0, 0)
	}
	for i := range 3 {
		if !p.offer(eps[i], false, 1) {
			t.Fatalf("offer %d into a free slot failed", i)
		}
	}
	if p.offer(eps[3], false, 1) || p.holds(eps[3]) {
		t.Error("a report took a slot from a full pool")
	}
	eps[1].use() // spent under a budget of 1
	if !p.offer(eps[3], true, 1) || !p.holds(eps[3]) || p.holds(eps[1]) || !p.holds(eps[0]) || !p.holds(eps[2]) {
		t.Error("a probe's answer did not take the spent answer's slot")
	}
	// A picker built without eps[0] takes it out, and both copies of
	// eps[2], which two racing offers can leave in two slots.
	p.slots[p.size-1].Store(eps[2])
	ready := make([]Ready, 0, 4)
	for _, e := range eps[1:] {
		e.setIndex(len(ready))
		ready = append(ready, Ready{Stats: e})
	}
	p.keep(ready)
	if p.holds(eps[0]) {
		t.Error("not in the newest picker, still held")
	}
	if !p.holds(eps[2]) || !p.holds(eps[3]) {
		t.Error("in the newest picker, taken out")
	}
	p.keep(slicesDelete(ready, 1)) // eps[2] leaves
	for k := range p.size {
		if p.slots[k].Load() == eps[2] {
			t.Errorf("slot %d still holds an endpoint not in the newest picker", k)
		}
	}
	eps[2].setIndex(1)
	p.offer(eps[2], false, 1)
	eps[2].setAnswer(20, 0.01, int64(2*time.Second), 0)
	eps[3].setAnswer(30, 0.01, int64(2*time.Second), 0)
	p.offer(eps[4], false, 1) // answered at 0
	if st := p.expire(int64(2*time.Second), int64(time.Second), 0.5, 1); st.usable != 2 || st.served != 2 || p.holds(eps[4]) {
		t.Errorf("after expiry: %d usable, %d served, old answer held %v; want 2, 2, false", st.usable, st.served, p.holds(eps[4]))
	}
	if hot := p.hot.Load(); hot != 20 {
		t.Errorf("hot line %d, want the median of 20 and 30: 20", hot)
	}
}

// slicesDelete is ready without its i-th endpoint, the others at their
// indexes in it.
func slicesDelete(ready []Ready, i int) []Ready {
	out := append(append([]Ready(nil), ready[:i]...), ready[i+1:]...)
	for j := range out {
		out[j].Stats.setIndex(j)
	}
	return out
}
