package engine

import (
	"math"
	"testing"
)

func TestDecayMatchesExp(t *testing.T) {
	worst := 0.0
	for x := 0.0; x < 60; x += 0.0007 {
		want := math.Exp(-x)
		got := decay(x)
		if rel := math.Abs(got-want) / want; rel > worst {
			worst = rel
		}
	}
	if worst > 1e-6 {
		t.Errorf("decay differs from math.Exp by up to %.2g relative, want below 1e-6", worst)
	}
	if decay(-1) != 1 || decay(1000) != 0 {
		t.Errorf("decay(-1) = %v, decay(1000) = %v; want 1 and 0", decay(-1), decay(1000))
	}
}
