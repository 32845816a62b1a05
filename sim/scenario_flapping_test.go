package sim

import "testing"

// TestFlappingCache checks the flapping-cache scenario: the rejoin hold
// cuts the key moves of the minute at least 5x against pickwise without
// it and against grpc-go's ring_hash, and the origin's fetches with them.
func TestFlappingCache(t *testing.T) {
	scenarioTest(t, "flapping-cache")
	r, err := FlappingCache(testScale())
	if err != nil {
		t.Fatal(err)
	}
	logTable(t, "flapping-cache", r.Table)
	grpcRing, noHold, hold, maglev, rendezvous := 0, 1, 2, 3, 4
	for _, base := range []int{grpcRing, noHold} {
		for _, with := range []int{hold, rendezvous} {
			if r.MovedKeys[with]*5 > r.MovedKeys[base] {
				t.Errorf("%s moved %.3f of the keys, %s %.3f: want at least 5x fewer", r.Policies[with], r.MovedKeys[with], r.Policies[base], r.MovedKeys[base])
			}
			if r.OriginFetches[with]*2 > r.OriginFetches[base] {
				t.Errorf("%s cost %.0f origin fetches, %s %.0f: want well under half", r.Policies[with], r.OriginFetches[with], r.Policies[base], r.OriginFetches[base])
			}
		}
	}
	// Maglev's table is rebuilt when the node leaves and comes back, which
	// moves keys the hold cannot keep: it must at least not move more.
	if r.MovedKeys[maglev] > r.MovedKeys[noHold]*1.1 {
		t.Errorf("maglev with the hold moved %.3f of the keys, more than the ring without it (%.3f)", r.MovedKeys[maglev], r.MovedKeys[noHold])
	}
	// Without the hold a flap moves the node's tenth of the keys away and
	// back: six flaps, about 120%.
	if m := r.MovedKeys[noHold]; m < 0.8 {
		t.Errorf("without the hold %.3f of the keys moved, want about 1.2", m)
	}
}
