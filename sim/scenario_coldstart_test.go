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
}
