package orcaweight

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pickwise/pickwise/internal/median"
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
		{"median, not mean", []float64{1, 2, 10, 0}, []bool{T, T, T, F}, []float64{1, 2, 10, 2}, 3},
		{"capped at 10x the median", []float64{1, 2, 100, 0}, []bool{T, T, T, F}, []float64{1, 2, 20, 2}, 3},
		{"all usable, capped", []float64{3, 1e305, 3, 2, 4}, []bool{T, T, T, T, T}, []float64{3, 30, 3, 2, 4}, 5},
		{"all usable, at the cap: unchanged", []float64{1, 10, 1}, []bool{T, T, T}, []float64{1, 10, 1}, 3},
		{"all usable, spread wide but under the median's cap", []float64{1, 20, 5, 30}, []bool{T, T, T, T}, []float64{1, 20, 5, 30}, 4},
		{"the cap follows the median, not the smallest", []float64{1, 3, 3, 31}, []bool{T, T, T, T}, []float64{1, 3, 3, 30}, 4},
		{"an unusable huge weight is replaced, not capped", []float64{1e305, 2, 2}, []bool{F, T, T}, []float64{2, 2, 2}, 2},
		{"two absurd weights: both capped", []float64{1e300, 1e301, 1, 1, 1}, []bool{T, T, T, T, T}, []float64{10, 10, 1, 1, 1}, 5},
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

// TestFillMedianBoundsShare checks the share MaxMedianMultiple documents:
// among n >= 3 endpoints of equal weight, one that reports an absurd
// weight gets 10/(10+n-1) of the total, and however the others are
// spread, no more than 10/(10+ceil(n/2)-1).
func TestFillMedianBoundsShare(t *testing.T) {
	r := rand.New(rand.NewPCG(8, 9))
	for _, n := range []int{3, 4, 10, 11, 100} {
		equal := make([]float64, n)
		usable := make([]bool, n)
		for i := range equal {
			equal[i], usable[i] = 7, true
		}
		equal[0] = 1e305
		FillMedian(equal, usable)
		m := float64(MaxMedianMultiple)
		if got, want := share(equal, 0), m/(m+float64(n-1)); math.Abs(got-want) > 1e-12 {
			t.Errorf("%d equal endpoints: the absurd one's share %.4f, want %.4f", n, got, want)
		}
		worst := m / (m + float64((n+1)/2-1))
		for range 200 {
			ws := make([]float64, n)
			for i := range ws {
				// Over twelve orders of magnitude, some usable, some not.
				ws[i] = math.Pow(10, r.Float64()*12-6)
				usable[i] = r.IntN(4) > 0
			}
			ws[0], usable[0], usable[1], usable[2] = 1e305, true, true, true
			FillMedian(ws, usable)
			if got := share(ws, 0); got > worst+1e-12 {
				t.Fatalf("%d endpoints: the absurd one's share %.4f, above the documented %.4f (weights %v)", n, got, worst, ws)
			}
		}
	}
}

// share is weights[i]'s share of their sum.
func share(weights []float64, i int) float64 {
	sum := 0.0
	for _, w := range weights {
		sum += w
	}
	return weights[i] / sum
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
	// Over a large fleet it allocates only when it needs the median: not
	// when every weight is usable and within the bound, nor when none is.
	const n = 10000
	w, u = make([]float64, n), make([]bool, n)
	for i := range w {
		w[i], u[i] = float64(1+i%7), true
	}
	if a := testing.AllocsPerRun(10, func() { FillMedian(w, u) }); a != 0 {
		t.Errorf("FillMedian over %d usable weights allocates %v times per call, want 0", n, a)
	}
	clear(u)
	if a := testing.AllocsPerRun(10, func() { FillMedian(w, u) }); a != 0 {
		t.Errorf("FillMedian over %d unusable weights allocates %v times per call, want 0", n, a)
	}
}

// TestMaxMedianMultipleIsTheEngines keeps the documented bound and the
// one the engine applies the same.
func TestMaxMedianMultipleIsTheEngines(t *testing.T) {
	if MaxMedianMultiple != median.MaxMultiple {
		t.Errorf("MaxMedianMultiple = %d, the engine's bound is %d", MaxMedianMultiple, median.MaxMultiple)
	}
}
