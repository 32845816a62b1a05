package sim

import "testing"

func TestColdStart(t *testing.T) {
	r, err := ColdStart(testScale())
	if err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + r.Table.String())
	col := func(name string) int { return column(t, r.Policies, name) }
	lc, p2c, slow := col("least-conn (full scan)"), col("pickwise_p2c"), col("pickwise_p2c (slow start)")
	// The three columns asserted on are seeded, so these are exact replays.
	// A full scan sees the newcomer's zero and herds onto it: it catches up
	// 400 streams later, more than 2 s of arrivals at 150/s.
	if s := r.Share2s[lc]; s <= 0.9 {
		t.Errorf("least-conn: newcomer's share of the first 2 s %.3f, want > 0.9", s)
	}
	// Two choices give the newcomer a stream only when it is sampled (about
	// 2/9); slow start lowers its weight below that while it warms.
	if !(r.Share2s[slow] < r.Share2s[p2c] && r.Share2s[p2c] < r.Share2s[lc]) {
		t.Errorf("newcomer's share of the first 2 s: slow start %.3f, pickwise_p2c %.3f, least-conn %.3f; want increasing",
			r.Share2s[slow], r.Share2s[p2c], r.Share2s[lc])
	}
	if r.NewcomerP99[slow] >= r.NewcomerP99[lc] {
		t.Errorf("newcomer's p99: slow start %v, least-conn %v; want slow start lower", r.NewcomerP99[slow], r.NewcomerP99[lc])
	}

	// No stream ends during the run, so pickwise_orca_wrr gets no load
	// report and falls back to equal weights: the newcomer gets its fair
	// 1/9 from the start, neither herded onto nor learned about. With slow
	// start its weight starts at 10% and ramps over 30 s.
	orca, orcaSlow := col("pickwise_orca_wrr"), col("pickwise_orca_wrr (slow start)")
	const fair = 1.0 / 9
	for name, s := range map[string]float64{"2 s": r.Share2s[orca], "10 s": r.Share10s[orca], "30 s": r.Share30s[orca]} {
		if s < fair-0.02 || s > fair+0.02 {
			t.Errorf("pickwise_orca_wrr: newcomer's share of the first %s %.3f, want the fair %.3f within 0.02", name, s, fair)
		}
	}
	if s := r.Share2s[orcaSlow]; s > fair/4 {
		t.Errorf("pickwise_orca_wrr (slow start): newcomer's share of the first 2 s %.3f, want below a quarter of the fair %.3f", s, fair)
	}
	// The ramp is linear in time, so the first 30 s average about half the
	// full weight.
	if s := r.Share30s[orcaSlow]; s < 0.35*fair || s > 0.65*fair {
		t.Errorf("pickwise_orca_wrr (slow start): newcomer's share of the first 30 s %.3f, want about half the fair %.3f", s, fair)
	}
	if !(r.Share2s[orcaSlow] < r.Share10s[orcaSlow] && r.Share10s[orcaSlow] < r.Share30s[orcaSlow]) {
		t.Errorf("pickwise_orca_wrr (slow start): newcomer's share %.3f, %.3f, %.3f over the first 2, 10, 30 s; want rising", r.Share2s[orcaSlow], r.Share10s[orcaSlow], r.Share30s[orcaSlow])
	}
}
