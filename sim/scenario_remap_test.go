package sim

import "testing"

func TestRemapStorm(t *testing.T) {
	r, err := RemapStorm(testScale())
	if err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + r.Table.String())
	col := func(name string) int { return column(t, r.Policies, name) }
	mod, ring := col("modulo hash"), col("ring_hash")
	// hash mod 10 = hash mod 11 for 10 residues in 110: 91% of keys move,
	// nearly all of them between old backends.
	if m := r.MovedKeys[mod]; m < 0.85 || m > 0.95 {
		t.Errorf("modulo hash: %.3f of keys moved, want about 10/11", m)
	}
	if m := r.MovedBetweenOld[mod]; m < 0.8 {
		t.Errorf("modulo hash: %.3f of keys moved between old backends, want most", m)
	}
	// Consistent hashing moves about 1/11. grpc-go's ring keeps its size
	// (minRingSize), so each old backend also gives up entries (103 to 94
	// of them) and their keys move too: measured 16%.
	if m := r.MovedKeys[ring]; m >= 0.2 {
		t.Errorf("ring_hash: %.3f of keys moved, want < 0.2", m)
	}
	t.Logf("ring_hash: %.3f of keys moved between old backends", r.MovedBetweenOld[ring])
	// The textbook illustration, 1/11 of keys moving, puts the two spikes
	// 6.7 times apart (18x against 2.7x); with ring_hash's 16% the measured
	// gap is 19.1x against 4.0x, 4.8 times.
	if r.Spike[mod] <= 4*r.Spike[ring] {
		t.Errorf("origin spike: modulo %.1fx, ring_hash %.1fx; want modulo above 4 times ring_hash's", r.Spike[mod], r.Spike[ring])
	}
	if r.SpikeWindow[mod] <= r.SpikeWindow[ring] {
		t.Errorf("origin load over the first %v: modulo %.1fx, ring_hash %.1fx; want modulo higher", remapWindow, r.SpikeWindow[mod], r.SpikeWindow[ring])
	}
}
