package ewma

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

func TestDecayMatchesExp(t *testing.T) {
	worst := 0.0
	for x := 0.0; x < 60; x += 0.0007 {
		want := math.Exp(-x)
		got := Decay(x)
		if rel := math.Abs(got-want) / want; rel > worst {
			worst = rel
		}
	}
	if worst > 1e-6 {
		t.Errorf("Decay differs from math.Exp by up to %.2g relative, want below 1e-6", worst)
	}
	if Decay(-1) != 1 || Decay(1000) != 0 {
		t.Errorf("Decay(-1) = %v, Decay(1000) = %v; want 1 and 0", Decay(-1), Decay(1000))
	}
}

// TestPairMatchesLoads: Pair gives each endpoint exactly its load at the
// later of the two stamps, as Reading.Load computes it, and its busy
// flag, for endpoints with and without samples, idle or not, stamps in
// either order, equal or from a nanosecond to past Decay's cut-off apart.
func TestPairMatchesLoads(t *testing.T) {
	perNano := 1 / float64(10*time.Second)
	rnd := rand.New(rand.NewPCG(3, 5))
	state := func() Reading {
		// Log-uniform ages from 1 ns to 3 h: gaps on the short path of
		// Decay, its long one, and past its cut-off (700 decay times of
		// 10 s) all come up.
		age := int64(math.Exp(rnd.Float64() * math.Log(float64(3*time.Hour))))
		st := Reading{InFlight: int64(rnd.IntN(4)), Stamp: int64(100*time.Second) - age}
		if rnd.IntN(5) != 0 {
			st.Avg = float64(1 + rnd.Int64N(int64(time.Second)))
		}
		if rnd.IntN(10) == 0 {
			st.Stamp = 0 // never sampled
		}
		return st
	}
	for i := range 20000 {
		a, b := state(), state()
		if i%7 == 0 {
			b.Stamp = a.Stamp
		}
		la, lb, busyA, busyB := Pair(a, b, perNano)
		at := max(a.Stamp, b.Stamp)
		wantA, wantBusyA := a.Load(at, perNano)
		wantB, wantBusyB := b.Load(at, perNano)
		if la != wantA || lb != wantB || busyA != wantBusyA || busyB != wantBusyB {
			t.Fatalf("Pair(%+v, %+v) = %v, %v, %v, %v; want %v, %v, %v, %v", a, b, la, lb, busyA, busyB, wantA, wantB, wantBusyA, wantBusyB)
		}
	}
}
