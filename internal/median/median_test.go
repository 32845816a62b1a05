package median

import (
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
