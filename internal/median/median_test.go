package median

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestSelectNth checks the selection against a sort, on random values with
// and without repeats, sorted and reversed runs, and all-equal values, at
// every k of small slices and at random k of large ones.
func TestSelectNth(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	gens := map[string]func(n int) []float64{
		"random": func(n int) []float64 {
			v := make([]float64, n)
			for i := range v {
				v[i] = r.Float64() * 1000
			}
			return v
		},
		"repeats": func(n int) []float64 {
			v := make([]float64, n)
			for i := range v {
				v[i] = float64(r.IntN(4))
			}
			return v
		},
		"sorted": func(n int) []float64 {
			v := make([]float64, n)
			for i := range v {
				v[i] = float64(i)
			}
			return v
		},
		"reversed": func(n int) []float64 {
			v := make([]float64, n)
			for i := range v {
				v[i] = float64(n - i)
			}
			return v
		},
		"equal": func(n int) []float64 {
			v := make([]float64, n)
			for i := range v {
				v[i] = 7
			}
			return v
		},
	}
	for name, gen := range gens {
		for _, n := range []int{1, 2, 3, 4, 5, 8, 17, 100, 10000} {
			ks := []int{0, n / 2, n - 1}
			if n <= 17 {
				ks = ks[:0]
				for k := range n {
					ks = append(ks, k)
				}
			}
			for _, k := range ks {
				v := gen(n)
				want := slices.Clone(v)
				slices.Sort(want)
				got := selectNth(v, k)
				if got != want[k] {
					t.Fatalf("%s n=%d k=%d: %v, want %v", name, n, k, got, want[k])
				}
				for i := range v {
					if i < k && v[i] > got || i > k && v[i] < got {
						t.Fatalf("%s n=%d k=%d: v[%d] = %v on the wrong side of %v", name, n, k, i, v[i], got)
					}
				}
			}
		}
	}
}

// TestFillScratch checks that Fill selects in the caller's buffer, growing
// it once and then reusing it, and that it gives the same weights as
// without one.
func TestFillScratch(t *testing.T) {
	const n = 5000
	r := rand.New(rand.NewPCG(5, 6))
	ws, usable := make([]float64, n), make([]bool, n)
	for i := range ws {
		ws[i], usable[i] = 1+99*r.Float64(), i%10 != 0
	}
	want := slices.Clone(ws)
	if got := Fill(want, slices.Clone(usable), nil); got != n-n/10 {
		t.Fatalf("Fill = %d usable, want %d", got, n-n/10)
	}
	var scratch []float64
	got := slices.Clone(ws)
	Fill(got, usable, &scratch)
	if !slices.Equal(got, want) {
		t.Fatal("Fill with a scratch buffer gave other weights than without")
	}
	if cap(scratch) < n-n/10 {
		t.Fatalf("scratch has room for %d weights, want %d", cap(scratch), n-n/10)
	}
	buf := make([]float64, n)
	if a := testing.AllocsPerRun(10, func() { copy(buf, ws); Fill(buf, usable, &scratch) }); a != 0 {
		t.Errorf("Fill with a grown scratch allocates %v times, want 0", a)
	}
}

// TestScanAgreesWithFill: where Scan says Fill would change nothing, Fill
// changes nothing (where it does not say so, Fill may still: the bound is
// the median's multiple, and Scan checks the smallest weight's), and its
// count of usable weights is Fill's. Weights spread over less and more
// than MaxMultiple, with and without unusable ones.
func TestScanAgreesWithFill(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	sawUnchanged, sawChanged := 0, 0
	for range 5000 {
		n := 1 + r.IntN(40)
		spread := 1 + r.Float64()*20 // below MaxMultiple half the time
		ws, usable := make([]float64, n), make([]bool, n)
		nan, allUsable := false, r.IntN(3) == 0
		for i := range ws {
			ws[i] = 1 + r.Float64()*(spread-1)
			usable[i] = allUsable || r.IntN(10) != 0
			if r.IntN(40) == 0 {
				ws[i] = math.NaN()
				nan = nan || usable[i]
			}
		}
		nUsable, unchanged := Scan(ws, usable)
		if nan && unchanged {
			t.Fatalf("weights %v usable %v: Scan calls weights with a NaN unchanged", ws, usable)
		}
		filled := slices.Clone(ws)
		if got := Fill(filled, usable, nil); got != nUsable {
			t.Fatalf("Scan counts %d usable, Fill %d", nUsable, got)
		}
		if nUsable < 2 {
			if unchanged {
				t.Fatalf("fewer than two usable: Scan says unchanged, but Fill sets every weight to 1")
			}
			continue
		}
		if same := slices.Equal(ws, filled); unchanged && !same {
			t.Fatalf("weights %v usable %v: Scan says unchanged %v, Fill left them equal %v", ws, usable, unchanged, same)
		}
		if unchanged {
			sawUnchanged++
		} else {
			sawChanged++
		}
	}
	if sawUnchanged < 100 || sawChanged < 100 {
		t.Fatalf("cases: %d unchanged, %d changed; want both in the hundreds", sawUnchanged, sawChanged)
	}
}

// TestOfAndWith: Of selects the median of the usable weights alone (the
// mean of the two middle ones for an even count), whatever the unusable
// ones hold; With gives the unusable ones a median it is handed and caps
// the usable ones at MaxMultiple times it, as a caller keeping the median
// between calls uses them.
func TestOfAndWith(t *testing.T) {
	for _, tc := range []struct {
		ws     []float64
		usable []bool
		median float64
	}{
		{[]float64{3, 1e9, 1, 2}, []bool{true, false, true, true}, 2},
		{[]float64{4, 1, 3, 2, 0}, []bool{true, true, true, true, false}, 2.5},
		{[]float64{7, 7}, []bool{true, true}, 7},
	} {
		n := 0
		for _, ok := range tc.usable {
			if ok {
				n++
			}
		}
		if got := Of(slices.Clone(tc.ws), tc.usable, nil, n); got != tc.median {
			t.Errorf("Of(%v, %v) = %v, want %v", tc.ws, tc.usable, got, tc.median)
		}
	}

	ws := []float64{1, 50, 200, 0}
	With(ws, []bool{true, true, true, false}, 10)
	if want := []float64{1, 50, 100, 10}; !slices.Equal(ws, want) {
		t.Errorf("With(median 10) = %v, want %v: the unusable weight set to it, 200 capped at 100", ws, want)
	}
}
