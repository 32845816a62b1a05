package engine

import (
	"fmt"
	"math"
	"testing"
)

// TestSampleDistinct checks, for several fleet sizes and choice counts,
// that every sample is d distinct in-range indices, that each index is
// included with probability d/n, and that the first draw is uniform (ties go
// to it, so a skew there would skew load).
func TestSampleDistinct(t *testing.T) {
	for _, tc := range []struct{ n, d int }{{3, 2}, {11, 10}, {12, 5}, {100, 2}, {100, 3}, {1000, 10}} {
		t.Run(fmt.Sprintf("n=%d/d=%d", tc.n, tc.d), func(t *testing.T) {
			rnd := NewSeededRand(42)
			const rounds = 200000
			included := make([]int, tc.n)
			first := make([]int, tc.n)
			var out [MaxChoices]int
			for r := 0; r < rounds; r++ {
				var got []int
				if tc.d == 2 {
					i, j := samplePair(rnd, tc.n)
					got = []int{i, j}
				} else {
					got = sampleDistinct(rnd, tc.n, tc.d, &out)
				}
				seen := map[int]bool{}
				for _, x := range got {
					if x < 0 || x >= tc.n {
						t.Fatalf("index %d out of [0, %d)", x, tc.n)
					}
					if seen[x] {
						t.Fatalf("sample %v repeats %d", got, x)
					}
					seen[x] = true
					included[x]++
				}
				first[got[0]]++
			}
			checkUniform(t, "inclusion", included, float64(rounds*tc.d)/float64(tc.n))
			checkUniform(t, "first draw", first, float64(rounds)/float64(tc.n))
		})
	}
}

// checkUniform fails if any count is more than 5 standard deviations (and
// 1%) from its expectation: loose enough never to flake with a fixed seed,
// tight enough to catch an index that is favoured or never drawn.
func checkUniform(t *testing.T, what string, counts []int, want float64) {
	t.Helper()
	tol := max(5*math.Sqrt(want), 0.01*want)
	for i, c := range counts {
		if math.Abs(float64(c)-want) > tol {
			t.Errorf("%s count of index %d = %d, want %.0f ± %.0f", what, i, c, want, tol)
		}
	}
}

// scriptedRand returns fixed values, to pin down which indices are drawn.
type scriptedRand struct {
	vals []uint64
	i    int
}

func (r *scriptedRand) Uint64() uint64 {
	v := r.vals[r.i%len(r.vals)]
	r.i++
	return v
}

type constLoad float64

func (c constLoad) Load(*Ready) float64 { return float64(c) }

func TestLeastLoadedTiesGoToFirstDraw(t *testing.T) {
	eps := make([]Ready, 4)
	for i := range eps {
		eps[i] = Ready{Stats: newEndpoint(fmt.Sprint(i), nil, false), InvWeight: 1}
	}
	// Draw 3 first, then 1: with equal costs, 3 must win.
	hi := uint64(1) << 32
	x3 := uint64(3 * (hi / 4)) // reduce(x3, 4) = 3
	x1 := uint64(1*(hi/3)) + 1 // reduce(x1, 3) = 1
	p := NewLeastLoaded(&Snapshot{Endpoints: eps, Rand: &scriptedRand{vals: []uint64{x3 | x1<<32}}}, 2, constLoad(1))
	if got, _, why, _ := p.choose(pairOf(p), 0, 0); got != 3 || why != ReasonTie {
		t.Fatalf("tie went to %d (reason %d), want the first draw 3 (ReasonTie)", got, why)
	}
}

func pairOf(p *LeastLoaded) []int {
	i, j := samplePair(p.snap.Rand, len(p.snap.Endpoints))
	return []int{i, j}
}
