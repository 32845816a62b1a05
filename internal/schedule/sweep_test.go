package schedule

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// sweepSets are weight sets past the longest cycle the schedule tabulates:
// random over three decades, one heavy endpoint among light ones, equal
// but fractional, and some bad weights among good ones.
func sweepSets(r *rand.Rand) []struct {
	name    string
	weights []float64
} {
	bad := randomWeights(r, 3000)
	for i := 0; i < len(bad); i += 97 {
		bad[i] = []float64{0, -1, math.NaN(), math.Inf(1)}[i%4]
	}
	return []struct {
		name    string
		weights []float64
	}{
		{"random/n=129", randomWeights(r, 129)},
		{"random/n=1000", randomWeights(r, 1000)},
		{"random/n=10000", randomWeights(r, 10000)},
		{"one-heavy/n=5000", weightsOf(5000, func(i int) float64 {
			if i == 17 {
				return 1e12
			}
			return 1 + float64(i%7)/10
		})},
		{"fractional/n=4000", weightsOf(4000, func(i int) float64 { return 0.5 + float64(i%2)/4 })},
		{"bad/n=3000", bad},
		// Arcs of a quarter, an eighth and a sixteenth of the
		// circle's n-th parts: most start exactly on a bucket's first
		// point, where the guide's ceiling is taken of a whole number.
		{"boundaries/n=4096", weightsOf(4096, func(i int) float64 { return []float64{1, 0.5, 0.25, 0.25}[i%4] })},
	}
}

// sweepSearch is the endpoint whose arc holds seq's point, by binary
// search: what the guide must find.
func sweepSearch(s *sweep, seq uint32) int {
	u := uint32(uint64(seq) * 0x9E3779B97F4A7C15 >> 32)
	i, found := slices.BinarySearch(s.start, u)
	if found {
		return i
	}
	return i - 1
}

// TestSweepChosen checks when a schedule sweeps: weights that need a cycle
// longer than maxCycle, never integer weights whose cycle fits.
func TestSweepChosen(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	for _, tc := range []struct {
		name    string
		weights []float64
		sweeps  bool
	}{
		{"random/n=128", randomWeights(r, 128), false},
		{"random/n=129", randomWeights(r, 129), true},
		{"integers/n=2000", weightsOf(2000, func(i int) float64 { return float64(1 + i%3) }), false},
		{"integers-1..100/n=1000", weightsOf(1000, func(i int) float64 { return float64(1 + i%100) }), true},
		{"equal-integers/n=50000", weightsOf(50000, func(int) float64 { return 3 }), false},
		{"equal-fractions/n=100000", weightsOf(100000, func(int) float64 { return 0.3 }), false},
		{"unusable/n=70000", weightsOf(70000, func(i int) float64 { return []float64{0, math.NaN()}[i%2] }), true},
		{"huge-common-factor/n=5000", weightsOf(5000, func(i int) float64 { return float64(uint64(1+i%2) << 52) }), false},
		{"huge-sum/n=5000", weightsOf(5000, func(i int) float64 { return float64(1<<53 - 1 - 2*(i%2)) }), true},
		// The sum is 2^64 + 1: only its carry says it does not fit.
		{"carry/n=2049", weightsOf(2049, func(i int) float64 { return float64(max(1, (1<<53)*min(1, 2048-i))) }), true},
		{"integers/n=40000", weightsOf(40000, func(i int) float64 { return float64(1 + i%3) }), true},
	} {
		if got := New(tc.weights).Sweeps(); got != tc.sweeps {
			t.Errorf("%s: Sweeps() = %v, want %v", tc.name, got, tc.sweeps)
		}
	}
}

// TestSweepMatchesSearch checks the guided walk against a binary search
// over the arcs, at random positions, at both ends of the counter's range
// and across its wrap.
func TestSweepMatchesSearch(t *testing.T) {
	r := rand.New(rand.NewPCG(23, 24))
	for _, tc := range sweepSets(r) {
		t.Run(tc.name, func(t *testing.T) {
			sch := New(tc.weights)
			if !sch.Sweeps() {
				t.Fatal("not a sweep")
			}
			s := sch.sweep
			// The guide names, for every bucket, exactly the arc that
			// holds the bucket's first point: neither one before it,
			// which would only cost the walk steps, nor one after.
			for b, e := range s.guide {
				first := uint32(uint64(b) << 32 / s.n)
				want, found := slices.BinarySearch(s.start, first)
				if !found {
					want--
				}
				if int(e) != want {
					t.Fatalf("guide[%d] = %d, want %d, the arc of the bucket's first point", b, e, want)
				}
			}
			seqs := []uint32{0, 1, 2, math.MaxUint32, math.MaxUint32 - 1}
			for range 200000 {
				seqs = append(seqs, r.Uint32())
			}
			for _, seq := range seqs {
				if got, want := sch.Next(seq), sweepSearch(s, seq); got != want {
					t.Fatalf("Next(%d) = %d, want %d", seq, got, want)
				}
			}
		})
	}
}

// TestSweepShares checks that a window of consecutive positions splits
// within a few picks of the shares, far closer than independent random
// draws would (whose error for an endpoint expecting m picks is about
// sqrt(m)), and that each share is the weight's, or the floor's.
func TestSweepShares(t *testing.T) {
	r := rand.New(rand.NewPCG(25, 26))
	for _, tc := range sweepSets(r) {
		t.Run(tc.name, func(t *testing.T) {
			sch := New(tc.weights)
			n := len(tc.weights)
			var maxW, sum float64
			for _, w := range tc.weights {
				if usable(w) {
					maxW = max(maxW, w)
				}
			}
			for _, w := range tc.weights {
				if usable(w) {
					sum += w / maxW
				}
			}
			floor := sum / float64(targetLen(n))
			var total, shares float64
			arc := make([]float64, n)
			for i, w := range tc.weights {
				arc[i] = floor
				if usable(w) {
					arc[i] = max(w/maxW, floor)
				}
				total += arc[i]
			}
			for i := range n {
				want := arc[i] / total
				got := sch.Share(i)
				shares += got
				// A start is rounded to a unit of the circle: each share is
				// off by at most the two units of its ends.
				if math.Abs(got-want) > 2.0/circle+1e-9*want {
					t.Fatalf("endpoint %d (weight %v): share %.6g, want %.6g", i, tc.weights[i], got, want)
				}
				if got < 1/(33*float64(n))-2.0/circle {
					t.Fatalf("endpoint %d: share %.3g below the floor", i, got)
				}
			}
			if math.Abs(shares-1) > 1e-9 {
				t.Fatalf("shares sum to %v", shares)
			}
			const perEndpoint = 50 // picks an average endpoint expects
			picks := perEndpoint * n
			counts := make([]int, n)
			start := r.Uint32()
			for k := range picks {
				counts[sch.Next(start+uint32(k))]++
			}
			worst := 0.0
			for i, c := range counts {
				worst = max(worst, math.Abs(float64(c)-sch.Share(i)*float64(picks)))
			}
			t.Logf("%d picks: largest count error %.2f picks (random draws: about %.0f)", picks, worst, 3*math.Sqrt(perEndpoint))
			if worst > 4 {
				t.Errorf("largest count error %.2f picks, want <= 4", worst)
			}
		})
	}
}

// TestSweepGaps checks the smoothness of one endpoint's picks: the gaps
// between them stay within a small factor of 1/share (the three-gap
// theorem), where independent draws would leave gaps of several times
// that, and runs of one endpoint are as short as its share allows.
func TestSweepGaps(t *testing.T) {
	r := rand.New(rand.NewPCG(27, 28))
	for _, tc := range sweepSets(r) {
		t.Run(tc.name, func(t *testing.T) {
			sch := New(tc.weights)
			n := len(tc.weights)
			last := make([]int, n)
			for i := range last {
				last[i] = -1
			}
			worst := 0.0 // largest gap over 1/share
			worstRun := 0
			run, prev := 0, -1
			start := r.Uint32()
			for k := range 40 * n {
				e := sch.Next(start + uint32(k))
				if e == prev {
					run++
				} else {
					run, prev = 1, e
				}
				p := sch.Share(e)
				if p < 0.5 {
					worstRun = max(worstRun, run)
				}
				if last[e] >= 0 && p*float64(40*n) >= 20 {
					worst = max(worst, float64(k-last[e])*p)
				}
				last[e] = k
			}
			t.Logf("largest gap %.2f / share; longest run of an endpoint below half the share %d", worst, worstRun)
			if worst > 3 {
				t.Errorf("largest gap %.2f times 1/share, want <= 3", worst)
			}
			if worstRun > 1 {
				t.Errorf("an endpoint with less than half the picks was picked %d times in a row", worstRun)
			}
		})
	}
}

// BenchmarkSweepNext is a pick's cost in a sweep against a cycle's, over
// the largest fleet a cycle serves and past it.
func BenchmarkSweepNext(b *testing.B) {
	for _, n := range []int{128, 129, 1000, 10000, 50000} {
		s := New(randomWeights(rand.New(rand.NewPCG(31, uint64(n))), n))
		b.Run(fmt.Sprintf("n=%d/sweeps=%v", n, s.Sweeps()), func(b *testing.B) {
			var seq uint32
			sink := 0
			for b.Loop() {
				seq++
				sink += s.Next(seq)
			}
			benchSink.Add(int64(sink))
		})
	}
}

// TestSweepPointsAtTheFloor checks the smoothness TestSweepGaps cannot
// reach: an arc at the floor of a fleet of 50,000 (1/(33n) of the circle)
// expects a pick in every 1.65 million, and the gaps between its picks
// must still stay within a small factor of that, wherever the arc lies.
// A 32-bit Weyl step in place of the 64-bit one left such arcs runs of
// picks with gaps of 6 times the mean between them.
func TestSweepPointsAtTheFloor(t *testing.T) {
	const n = 50000
	arc := uint32(circle / (33 * n))
	mean := float64(circle) / float64(arc)
	r := rand.New(rand.NewPCG(29, 30))
	for range 4 {
		lo := r.Uint32() &^ (1 << 31) // room for the arc before the wrap
		var last, picks int64 = -1, 0
		worst := 0.0
		for seq := range int64(40 * mean) {
			if u := sweepPoint(uint32(seq)); u >= lo && u-lo < arc {
				if last >= 0 {
					worst = max(worst, float64(seq-last)/mean)
				}
				last = seq
				picks++
			}
		}
		if picks < 20 {
			t.Fatalf("arc at %d: %d picks in %.0f, want about 40", lo, picks, 40*mean)
		}
		if worst > 2 {
			t.Errorf("arc at %d: largest gap %.2f times the mean, want <= 2", lo, worst)
		}
	}
}
