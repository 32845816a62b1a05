package shadow

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/pickwise/pickwise/internal/testkit"
)

// TestSummarySince: Since gives the counts recorded between two
// Summaries of one balancer, endpoint by endpoint; a config that changes
// only the rates keeps the counts it subtracts from; and a Summary of
// other counts (another balancer's, or from before the children changed)
// leaves the later one as it is.
func TestSummarySince(t *testing.T) {
	const js = `{"live": [{"round_robin": {}}], "candidate": [{"round_robin": {}}], "sampleRate": 1, "canaryPercent": %s}`
	b, cc := readyShadow(t, 3, fmt.Sprintf(js, "0"))
	picks := func(n int) {
		t.Helper()
		p := cc.State().Picker
		for range n {
			if err := pickAndFinish(p); err != nil {
				t.Fatal(err)
			}
		}
	}
	picks(30)
	first := b.rec.summary()
	picks(60)
	d := b.rec.summary().Since(first)
	if d.Compared != 60 || d.LiveArm.Calls != 60 {
		t.Fatalf("since the first summary: compared %d, live calls %d; want 60 and 60", d.Compared, d.LiveArm.Calls)
	}
	if len(d.Endpoints) != 3 {
		t.Fatalf("%d endpoints listed, want 3", len(d.Endpoints))
	}
	for _, e := range d.Endpoints {
		if e.Live != 20 || e.Candidate != 20 {
			t.Errorf("%s since the first summary: live %d, candidate %d; want round_robin's 20 and 20", e.Addr, e.Live, e.Candidate)
		}
	}

	// A new rate keeps the children and their counts.
	addrs := testkit.Addrs(3)
	update(t, b, addrs, fmt.Sprintf(js, "100"))
	second := b.rec.summary()
	picks(40)
	if d := b.rec.summary().Since(second); d.CanaryArm.Calls != 40 || d.Compared != 0 || d.LiveArm.Calls != 0 {
		t.Errorf("a 100%% canary since the second summary: canary calls %d, compared %d, live calls %d; want 40, 0, 0", d.CanaryArm.Calls, d.Compared, d.LiveArm.Calls)
	}
	if d := b.rec.summary().Since(first); d.Compared != 60 || d.CanaryArm.Calls != 40 {
		t.Errorf("since the first summary, across the rate change: compared %d, canary calls %d; want 60 and 40", d.Compared, d.CanaryArm.Calls)
	}

	// An endpoint whose connection was made anew counts from zero.
	update(t, b, addrs[:2], fmt.Sprintf(js, "0"))
	update(t, b, addrs, fmt.Sprintf(js, "0"))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := cc.SetReady(ctx, addrs[2]); err != nil {
		t.Fatal(err)
	}
	before := b.rec.summary()
	picks(30)
	after := b.rec.summary()
	back := func(s Summary) EndpointPicks {
		t.Helper()
		for _, e := range s.Endpoints {
			if e.Addr == addrs[2] {
				return e
			}
		}
		t.Fatalf("%s is not listed after its return", addrs[2])
		return EndpointPicks{}
	}
	if e, raw := back(after.Since(first)), back(after); e.Live != raw.Live || e.Candidate != raw.Candidate || raw.Live == 0 {
		t.Errorf("an endpoint back on a new connection: since the first summary live %d, candidate %d; want its counts since its return, %d and %d (not 0)", e.Live, e.Candidate, raw.Live, raw.Candidate)
	}
	if d := after.Since(Summary{}); d.Compared != after.Compared {
		t.Errorf("since a zero Summary: compared %d, want the summary's own %d", d.Compared, after.Compared)
	}
	if d := after.Since(before); d.Compared != 30 {
		t.Errorf("compared %d since the summary before the last picks, want 30", d.Compared)
	}

	// Other counts: another balancer's, and this one's before a new
	// candidate started them over.
	other, otherCC := readyShadow(t, 3, fmt.Sprintf(js, "0"))
	for range 5 {
		if err := pickAndFinish(otherCC.State().Picker); err != nil {
			t.Fatal(err)
		}
	}
	if d := after.Since(other.rec.summary()); d.Compared != after.Compared {
		t.Errorf("since another balancer's summary: compared %d, want the summary's own %d", d.Compared, after.Compared)
	}
	update(t, b, addrs, `{"live": [{"round_robin": {}}], "candidate": [{"pick_first": {}}], "sampleRate": 1}`)
	picks(10)
	latest := b.rec.summary()
	if d := latest.Since(after); d.LiveArm.Calls != latest.LiveArm.Calls || d.LiveArm.Calls != 10 {
		t.Errorf("since a summary from before the candidate changed: live calls %d, want the summary's own %d, the 10 since", d.LiveArm.Calls, latest.LiveArm.Calls)
	}
}

// TestSummarySinceArms: Since subtracts every count of the arms and of the
// predictions, failures and latencies included.
func TestSummarySinceArms(t *testing.T) {
	b, _ := readyShadow(t, 2, `{"live": [{"round_robin": {}}], "candidate": [{"round_robin": {}}], "sampleRate": 1}`)
	r := b.rec
	counts := func(n int64) {
		r.noPrediction.Add(n)
		r.fallbacks.Add(2 * n)
		for i := range r.arms {
			r.arms[i].calls.Add(3 * n)
			r.arms[i].failed.Add(n)
			r.arms[i].timed.Add(2 * n)
			r.arms[i].nanos.Add(1000 * n)
		}
	}
	counts(5)
	earlier := r.summary()
	counts(7)
	d := r.summary().Since(earlier)
	want := ArmStats{Calls: 21, Failed: 7, Timed: 14, TotalLatency: 7000}
	if d.NoPrediction != 7 || d.CanaryFallbacks != 14 || d.LiveArm != want || d.CanaryArm != want {
		t.Errorf("since: no prediction %d, fallbacks %d, live arm %+v, canary arm %+v; want 7, 14, and %+v for both", d.NoPrediction, d.CanaryFallbacks, d.LiveArm, d.CanaryArm, want)
	}
}
