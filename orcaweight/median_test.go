package orcaweight

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestFillMedian(t *testing.T) {
	const T, F = true, false
	many := make([]float64, 101)
	manyUsable := make([]bool, 101)
	manyWant := make([]float64, 101)
	for i := range many {
		many[i] = float64(100 - i) // 100 down to 0; the last one is unusable
		manyUsable[i] = i != 100
		manyWant[i] = many[i]
	}
	manyWant[100] = 50.5 // median of 1..100
	tests := []struct {
		name       string
		weights    []float64
		usable     []bool
		want       []float64
		wantUsable int
	}{
		{"empty", nil, nil, nil, 0},
		{"none usable", []float64{0, 0, 0}, []bool{F, F, F}, []float64{1, 1, 1}, 0},
		{"one usable: round robin", []float64{5, 0, 0}, []bool{T, F, F}, []float64{1, 1, 1}, 1},
		{"all usable: unchanged", []float64{3, 1, 2}, []bool{T, T, T}, []float64{3, 1, 2}, 3},
		{"odd count", []float64{9, 0, 1, 5}, []bool{T, F, T, T}, []float64{9, 5, 1, 5}, 3},
		{"even count: mean of the middle two", []float64{1, 0, 4, 2, 8}, []bool{T, F, T, T, T}, []float64{1, 3, 4, 2, 8}, 4},
		{"two usable", []float64{2, 6, 0}, []bool{T, T, F}, []float64{2, 6, 4}, 2},
		{"median, not mean", []float64{1, 2, 100, 0}, []bool{T, T, T, F}, []float64{1, 2, 100, 2}, 3},
		{"unusable weights are overwritten", []float64{4, 1e9, 6}, []bool{T, F, T}, []float64{4, 5, 6}, 2},
		{"huge weights do not overflow", []float64{1e308, 1.5e308, 0}, []bool{T, T, F}, []float64{1e308, 1.5e308, 1.25e308}, 2},
		{"more than the stack buffer", many, manyUsable, manyWant, 100},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := append([]float64(nil), tc.weights...)
			n := FillMedian(got, tc.usable)
			if n != tc.wantUsable {
				t.Errorf("FillMedian() = %d, want %d", n, tc.wantUsable)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("weights after FillMedian (-want +got):\n%s", diff)
			}
		})
	}
}

func TestFillMedianLengthMismatchPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("FillMedian with mismatched lengths did not panic")
		}
	}()
	FillMedian([]float64{1, 2}, []bool{true})
}

func TestFillMedianAllocs(t *testing.T) {
	w := []float64{1, 2, 3, 0, 5}
	u := []bool{true, true, true, false, true}
	if a := testing.AllocsPerRun(100, func() { FillMedian(w, u) }); a != 0 {
		t.Errorf("FillMedian allocates %v times per call, want 0", a)
	}
}
