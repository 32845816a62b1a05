package schedule

import (
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
)

// cycleOf returns one full cycle of s, position 0 first.
func cycleOf(s *Schedule) []int {
	out := make([]int, s.Len())
	for p := range out {
		out[p] = s.Next(uint32(p))
	}
	return out
}

// countsOf returns how often each of n endpoints occurs in order.
func countsOf(t *testing.T, order []int, n int) []int {
	t.Helper()
	c := make([]int, n)
	for p, i := range order {
		if i < 0 || i >= n {
			t.Fatalf("position %d: endpoint %d out of [0, %d)", p, i, n)
		}
		c[i]++
	}
	return c
}

// checkSlots fails unless one cycle of s gives endpoint i exactly
// s.Slots(i) positions and the slots add up to Len.
func checkSlots(t *testing.T, s *Schedule, n int) []int {
	t.Helper()
	order := cycleOf(s)
	counts := countsOf(t, order, n)
	total := 0
	for i, c := range counts {
		if c != s.Slots(i) {
			t.Errorf("endpoint %d: %d positions in a cycle, Slots says %d", i, c, s.Slots(i))
		}
		total += s.Slots(i)
	}
	if total != s.Len() {
		t.Errorf("slots sum to %d, Len = %d", total, s.Len())
	}
	return order
}

// randomWeights draws n weights log-uniformly over three decades, so
// sets mix heavy and light endpoints and some light ones hit the one-slot
// floor at small n.
func randomWeights(r *rand.Rand, n int) []float64 {
	w := make([]float64, n)
	for i := range w {
		w[i] = math.Exp(r.Float64() * math.Log(1000))
	}
	return w
}

func weightsOf(n int, f func(i int) float64) []float64 {
	w := make([]float64, n)
	for i := range w {
		w[i] = f(i)
	}
	return w
}

// TestScheduleExactProportions checks that integer weights whose reduced
// total fits the exact cycle get exactly weight/GCD slots each.
func TestScheduleExactProportions(t *testing.T) {
	for _, tc := range []struct {
		name    string
		weights []float64
		want    []int // slots per endpoint
	}{
		{"one", []float64{1}, []int{1}},
		{"one-heavy", []float64{7}, []int{1}},
		{"one-fractional", []float64{1.5}, []int{1}},
		{"equal", []float64{1, 1, 1}, []int{1, 1, 1}},
		{"5-1-1", []float64{5, 1, 1}, []int{5, 1, 1}},
		{"3-2", []float64{3, 2}, []int{3, 2}},
		{"gcd-2", []float64{10, 6, 6, 6}, []int{5, 3, 3, 3}},
		{"100-1", []float64{100, 1}, []int{100, 1}},
		{"near-integer", []float64{2.0000000001, 3.9999999999}, []int{1, 2}},
		{"largest-exact", []float64{4095, 1}, []int{4095, 1}},
		{"1000x1..4", weightsOf(1000, func(i int) float64 { return float64(1 + i%4) }), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := tc.want
			if want == nil {
				want = make([]int, len(tc.weights))
				for i, w := range tc.weights {
					want[i] = int(w) // GCD is 1: weight 1 is present
				}
			}
			s := New(tc.weights)
			wantLen := 0
			for _, c := range want {
				wantLen += c
			}
			if s.Len() != wantLen {
				t.Fatalf("Len = %d, want %d", s.Len(), wantLen)
			}
			counts := countsOf(t, cycleOf(s), len(tc.weights))
			for i := range want {
				if counts[i] != want[i] || s.Slots(i) != want[i] {
					t.Errorf("endpoint %d: %d positions, Slots %d, want %d", i, counts[i], s.Slots(i), want[i])
				}
			}
		})
	}
}

// clustered returns weights proportional to the endpoints' phases, the
// adversarial case for the build: every endpoint's first slot falls due at
// nearly the same instant, so many slots share a bucket.
func clustered(n int) []float64 {
	return weightsOf(n, func(i int) float64 { return float64(phaseOf(i)) / phaseOne })
}

// TestScheduleOrderMatchesReference checks the bucket-sorted build against
// the definition computed independently: every slot's due time
// (k + phase_i)/s_i as an exact big.Rat, sorted, ties to the lower index.
func TestScheduleOrderMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	for _, tc := range []struct {
		name    string
		weights []float64
	}{
		{"5-1-1", []float64{5, 1, 1}},
		{"equal/n=50", weightsOf(50, func(int) float64 { return 1 })},
		{"1000x1..4", weightsOf(1000, func(i int) float64 { return float64(1 + i%4) })},
		{"random/n=2", randomWeights(r, 2)},
		{"random/n=10", randomWeights(r, 10)},
		{"random/n=100", randomWeights(r, 100)},
		{"clustered/n=128", clustered(128)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := New(tc.weights)
			if s.Sweeps() {
				t.Fatal("a sweep: nothing to compare with the reference cycle")
			}
			type slot struct {
				due *big.Rat
				i   int
			}
			var ref []slot
			for i := range tc.weights {
				si := int64(s.Slots(i))
				for k := range si {
					num := new(big.Int).SetUint64(phaseOf(i))
					num.Add(num, big.NewInt(k*phaseOne))
					due := new(big.Rat).SetFrac(num, big.NewInt(si*phaseOne))
					ref = append(ref, slot{due, i})
				}
			}
			slices.SortFunc(ref, func(a, b slot) int {
				if c := a.due.Cmp(b.due); c != 0 {
					return c
				}
				return a.i - b.i
			})
			if allEqual(tc.weights) {
				// Equal weights: one slot each, in index order.
				slices.SortFunc(ref, func(a, b slot) int { return a.i - b.i })
			}
			got := cycleOf(s)
			if len(got) != len(ref) {
				t.Fatalf("Len = %d, reference %d", len(got), len(ref))
			}
			for p := range ref {
				if got[p] != ref[p].i {
					t.Fatalf("position %d: endpoint %d, reference %d", p, got[p], ref[p].i)
				}
			}
		})
	}
}

// TestScheduleExactLimit checks the boundary of the exact cycle: one slot
// past exactLimit switches to the quantized cycle, which still keeps
// the light endpoint in rotation.
func TestScheduleExactLimit(t *testing.T) {
	s := New([]float64{maxCycle, 1})
	// T = 1024: 4096/4097*1024 rounds to 1024, the light endpoint is
	// floored to one slot.
	if s.Len() != 1025 || s.Slots(0) != 1024 || s.Slots(1) != 1 {
		t.Errorf("Len %d, Slots %d %d; want 1025, 1024 1", s.Len(), s.Slots(0), s.Slots(1))
	}
	checkSlots(t, s, 2)
}

// maxCyclicRun is the longest run of endpoint i in order read as a
// cycle.
func maxCyclicRun(order []int, i int) int {
	n := len(order)
	start := -1
	for p, e := range order {
		if e != i {
			start = p
			break
		}
	}
	if start < 0 {
		return n // the whole cycle is i
	}
	best, run := 0, 0
	for k := 1; k <= n; k++ {
		if order[(start+k)%n] == i {
			run++
			best = max(best, run)
		} else {
			run = 0
		}
	}
	return best
}

// TestSchedule511 is the classic smooth-WRR example: weights {5, 1, 1} must interleave,
// with no cyclic run of the heavy endpoint longer than 3 (the least possible:
// two light slots split five heavy ones) and the light endpoints apart.
func TestSchedule511(t *testing.T) {
	s := New([]float64{5, 1, 1})
	order := checkSlots(t, s, 3)
	t.Logf("{5,1,1} cycle: %v", order)
	if run := maxCyclicRun(order, 0); run > 3 {
		t.Errorf("longest cyclic run of endpoint 0 = %d, want <= 3", run)
	}
	for p := range order {
		a, b := order[p], order[(p+1)%len(order)]
		if a != 0 && b != 0 {
			t.Errorf("positions %d and %d: light endpoints %d and %d adjacent", p, (p+1)%len(order), a, b)
		}
	}
}

// TestScheduleEqualWeightsSpread checks that the phases keep equal-weight
// endpoints apart: with two of weight 3, neither ever follows itself.
func TestScheduleEqualWeightsSpread(t *testing.T) {
	order := checkSlots(t, New([]float64{3, 3}), 2)
	t.Logf("{3,3} cycle: %v", order)
	for i := range 2 {
		if run := maxCyclicRun(order, i); run != 1 {
			t.Errorf("endpoint %d: longest cyclic run %d, want 1", i, run)
		}
	}
}

// TestScheduleSmoothness checks the gap bound of docs/design/weighted-schedule.md: every
// cyclic gap g between consecutive occurrences of endpoint i satisfies
// |g - L/s_i| < m_i, where m_i counts the endpoints j != i whose s_j/s_i is
// not an integer (so g = L/s_i exactly when m_i = 0). m_i <= n-1, tighter
// than the L/s_i ± (n+1) a smooth schedule must meet.
func TestScheduleSmoothness(t *testing.T) {
	type set struct {
		name    string
		weights []float64
	}
	r := rand.New(rand.NewPCG(1, 2))
	sets := []set{
		{"5-1-1", []float64{5, 1, 1}},
		{"10-6-6-6", []float64{10, 6, 6, 6}},
		{"100-1", []float64{100, 1}},
		{"1000x1..4", weightsOf(1000, func(i int) float64 { return float64(1 + i%4) })},
	}
	for _, n := range []int{3, 10, 100, 128} {
		sets = append(sets, set{fmt.Sprintf("random/n=%d", n), randomWeights(r, n)})
	}
	for _, tc := range sets {
		t.Run(tc.name, func(t *testing.T) {
			n := len(tc.weights)
			s := New(tc.weights)
			order := checkSlots(t, s, n)
			L := len(order)
			pos := make([][]int, n)
			for p, i := range order {
				pos[i] = append(pos[i], p)
			}
			worst := 0.0
			for i := range n {
				if len(pos[i]) == 0 {
					t.Fatalf("endpoint %d never scheduled", i)
				}
				si := s.Slots(i)
				m := 0
				for j := range n {
					if j != i && s.Slots(j)%si != 0 {
						m++
					}
				}
				ideal := float64(L) / float64(si)
				for k, p := range pos[i] {
					next := pos[i][(k+1)%len(pos[i])]
					gap := (next - p + L) % L
					if gap == 0 {
						gap = L // a single slot: the gap is the whole cycle
					}
					dev := math.Abs(float64(gap) - ideal)
					worst = max(worst, dev)
					if m == 0 && dev != 0 || m > 0 && dev >= float64(m) {
						t.Fatalf("endpoint %d (slots %d): gap %d from position %d, ideal %.3f, bound %d",
							i, si, gap, p, ideal, m)
					}
				}
			}
			t.Logf("n=%d L=%d: largest |gap - L/s_i| = %.2f (proved bound < n-1 = %d)", n, L, worst, n-1)
		})
	}
}

// TestScheduleQuantizedShares checks the documented worst case for
// fractional weights, |s_i/L - p_i| <= (1 + n*p_i)/(T - n/2), and that every
// endpoint keeps at least one slot.
func TestScheduleQuantizedShares(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int{2, 3, 10, 100, 128} {
		for _, spread := range []string{"log", "uniform"} {
			t.Run(fmt.Sprintf("n=%d/%s", n, spread), func(t *testing.T) {
				var w []float64
				if spread == "log" {
					w = randomWeights(r, n)
				} else {
					w = weightsOf(n, func(int) float64 { return 0.5 + r.Float64() })
				}
				s := New(w)
				checkSlots(t, s, n)
				var sum float64
				for _, x := range w {
					sum += x
				}
				T := float64(targetLen(n))
				L := float64(s.Len())
				worstRel := 0.0 // over endpoints of at least average weight
				for i, x := range w {
					if s.Slots(i) < 1 {
						t.Fatalf("endpoint %d: %d slots", i, s.Slots(i))
					}
					p := x / sum
					share := float64(s.Slots(i)) / L
					bound := (1 + float64(n)*p) / (T - float64(n)/2)
					if math.Abs(share-p) > bound {
						t.Errorf("endpoint %d: share %.6g, want %.6g ± %.3g", i, share, p, bound)
					}
					// The relative bound holds for endpoints above the
					// one-slot floor; the margin keeps an ideal count of
					// exactly 1/2 (float noise either way) out of it.
					xi := p * T
					rel := math.Abs(share/p - 1)
					if xi > 0.5+1e-9 {
						relBound := (1/(2*xi) + float64(n)/T) / (1 - float64(n)/(2*T))
						if rel > relBound {
							t.Errorf("endpoint %d (ideal %.3f slots): relative error %.4g, bound %.4g", i, xi, rel, relBound)
						}
					}
					if xi >= T/float64(n) {
						worstRel = max(worstRel, rel)
					}
				}
				t.Logf("L=%d (T=%.0f): largest relative share error of an endpoint of at least average weight %.3g%%",
					s.Len(), T, 100*worstRel)
			})
		}
	}
}

// TestScheduleHeldWhileWithinASlot: weights that drift by up to a part in
// a thousand per rebuild keep the last cycle (NewAfter returns it)
// until some endpoint's ideal count is a slot away from its slots, so
// every cycle in use, held or fresh, keeps each share within the held
// bound |s_i/L - p_i| < (1 + n*p_i)/(T - n); most rebuilds hold. A jump
// in one weight, integer weights (an exact cycle) and a fleet that sweeps
// build afresh.
func TestScheduleHeldWhileWithinASlot(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, n := range []int{2, 12, 100, 128} {
		t.Run(fmt.Sprintf("n=%d", n), func(t *testing.T) {
			w := weightsOf(n, func(int) float64 { return 0.5 + r.Float64() })
			prev := New(w)
			const rebuilds = 500
			held := 0
			for range rebuilds {
				for i := range w {
					w[i] *= 1 + 0.002*(r.Float64()-0.5)
				}
				s := NewAfter(w, prev)
				if s == prev {
					held++
				}
				prev = s
				var sum float64
				for _, x := range w {
					sum += x
				}
				T, L := float64(targetLen(n)), float64(s.Len())
				for i, x := range w {
					p := x / sum
					if x := max(1, p*T); math.Abs(float64(s.Slots(i))-x) > min(1, max(0.5, x/8)) {
						t.Fatalf("endpoint %d: %d slots, ideal count %.3f", i, s.Slots(i), x)
					}
					if bound := (1 + float64(n)*p) / (T - float64(n)); math.Abs(float64(s.Slots(i))/L-p) >= bound {
						t.Fatalf("endpoint %d: share %.6g, want %.6g within %.3g", i, float64(s.Slots(i))/L, p, bound)
					}
				}
			}
			t.Logf("%d of %d rebuilds held the last cycle", held, rebuilds)
			if held < rebuilds*9/10 {
				t.Errorf("%d of %d rebuilds held the last cycle, want nine in ten at least", held, rebuilds)
			}
			jumped := slices.Clone(w)
			jumped[0] *= 1.5
			if NewAfter(jumped, prev) == prev {
				t.Error("a weight half as large again kept the last cycle")
			}
		})
	}
	// A light endpoint whose ideal count falls from 2.4 slots to 1.2
	// does not keep its two (a slot within one, but 1.7 times its share).
	light := append(slices.Repeat([]float64{1.5}, 11), 2.4*16.5/(1024-2.4))
	heavy := New(light)
	light[11] /= 2
	if heavy.Slots(11) != 2 || NewAfter(light, heavy) == heavy {
		t.Errorf("an endpoint's ideal count fell from 2.4 to 1.2 slots: %d slots before, held %v; want 2, not held", heavy.Slots(11), NewAfter(light, heavy) == heavy)
	}
	quantized := New([]float64{1.5, 1, 1})
	if exact := NewAfter([]float64{3, 2, 2}, quantized); exact == quantized || exact.Len() != 7 {
		t.Errorf("integer weights {3, 2, 2} after a quantized cycle: held %v, %d slots, want a fresh cycle of 7", exact == quantized, exact.Len())
	}
	sweeping := weightsOf(200, func(i int) float64 { return 1 + float64(i%3)/2 })
	if s := NewAfter(sweeping, New(sweeping)); !s.Sweeps() {
		t.Error("200 fractional weights did not sweep")
	}
}

// TestScheduleBadWeights checks that weights the caller should never pass
// do not panic and cost their endpoint nothing but weight: one slot each,
// with the others still split by their own weights.
func TestScheduleBadWeights(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	for _, tc := range []struct {
		name    string
		weights []float64
		want    []int // slots, when the split is predictable
	}{
		{"zero", []float64{0}, []int{1}},
		{"negative", []float64{-1}, []int{1}},
		{"nan", []float64{nan}, []int{1}},
		{"+inf", []float64{inf}, []int{1}},
		{"-inf", []float64{math.Inf(-1)}, []int{1}},
		{"all-bad", []float64{0, -3, nan, inf}, []int{1, 1, 1, 1}},
		{"zero-among-integers", []float64{5, 0, 1}, []int{5, 1, 1}},
		{"nan-among-integers", []float64{5, nan, 1}, []int{5, 1, 1}},
		{"inf-among-integers", []float64{4, inf, 2}, []int{2, 1, 1}},
		{"mixed-fractional", []float64{1.5, inf, -2, 3}, nil},
		{"huge", []float64{math.MaxFloat64, math.MaxFloat64, 1}, []int{512, 512, 1}},
		{"tiny", []float64{math.SmallestNonzeroFloat64, 1}, []int{1, 1024}},
		{"huge-integers", []float64{1 << 60, 1 << 60, 1 << 59}, []int{410, 410, 205}},
		{"huge-equal", []float64{1 << 60, 1 << 60}, []int{1, 1}},
		{"nan-equal", []float64{nan, nan}, []int{1, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := New(tc.weights)
			checkSlots(t, s, len(tc.weights))
			for i, w := range tc.weights {
				if s.Slots(i) < 1 {
					t.Errorf("endpoint %d: %d slots, want >= 1", i, s.Slots(i))
				}
				if !usable(w) && s.Slots(i) != 1 {
					t.Errorf("endpoint %d (weight %v): %d slots, want 1", i, w, s.Slots(i))
				}
				if tc.want != nil && s.Slots(i) != tc.want[i] {
					t.Errorf("endpoint %d (weight %v): %d slots, want %d", i, w, s.Slots(i), tc.want[i])
				}
			}
		})
	}
}

// TestScheduleEmptyPanics documents that an empty weight list is a caller
// bug reported at build time rather than on the first pick.
func TestScheduleEmptyPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("New(nil) did not panic")
		}
	}()
	New(nil)
}

// TestScheduleFastmod checks the division-free reduction against % for
// divisors across the whole range a cycle can take, and numerators at the
// edges of uint32.
func TestScheduleFastmod(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	divisors := []uint64{1, 2, 3, 7, 1000, 1025, 32000, 65535, 65536, 65537, 1<<20 + 999, 1<<31 - 1, 1<<32 - 5, 1<<32 - 1}
	for range 200 {
		divisors = append(divisors, 1+r.Uint64N(1<<32-1))
	}
	for _, d := range divisors {
		m := fastmodMultiplier(d)
		xs := []uint32{0, 1, 2, math.MaxUint32, math.MaxUint32 - 1, uint32(d - 1), uint32(d), uint32(d + 1)}
		for range 500 {
			xs = append(xs, r.Uint32())
		}
		for _, x := range xs {
			if got, want := fastmod(x, m, d), uint64(x)%d; got != want {
				t.Fatalf("%d mod %d = %d, want %d", x, d, got, want)
			}
		}
	}
}

// TestScheduleNextPeriodic checks that Next has period Len, agrees with the
// table at seq mod Len across the uint32 range, and stays in range through
// the counter's wrap.
func TestScheduleNextPeriodic(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for _, tc := range []struct {
		name    string
		weights []float64
	}{
		{"one", []float64{1}},
		{"5-1-1", []float64{5, 1, 1}},
		{"random/n=100", randomWeights(r, 100)},
		{"longest-cycle/n=128", randomWeights(r, 128)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := len(tc.weights)
			s := New(tc.weights)
			if s.Sweeps() {
				t.Fatalf("n=%d: a sweep, want a cycle", n)
			}
			L := uint32(s.Len())
			at := func(p uint32) int {
				if s.table == nil {
					return int(p)
				}
				return int(s.table[p])
			}
			for seq := range 2 * min(L, 1<<17) {
				if got, want := s.Next(seq), s.Next(seq%L); got != want {
					t.Fatalf("Next(%d) = %d, Next(%d) = %d", seq, got, seq%L, want)
				}
			}
			seqs := []uint32{math.MaxUint32, math.MaxUint32 - L, math.MaxUint32 - L + 1}
			for range 1000 {
				seqs = append(seqs, r.Uint32())
			}
			for _, seq := range seqs {
				if got, want := s.Next(seq), at(seq%L); got != want {
					t.Fatalf("Next(%d) = %d, want table[%d] = %d", seq, got, seq%L, want)
				}
			}
			var c atomic.Uint32
			c.Store(math.MaxUint32 - 2*min(L, 1000))
			for range 4 * min(L, 1000) {
				if i := s.Next(c.Add(1)); i < 0 || i >= n {
					t.Fatalf("Next across the wrap = %d, out of [0, %d)", i, n)
				}
			}
		})
	}
}

// TestScheduleConcurrentShares has goroutines share one counter, as pickers
// do: because every seq in a contiguous range is drawn exactly once, k full
// cycles' worth of picks split exactly k*Slots(i), however they interleave.
func TestScheduleConcurrentShares(t *testing.T) {
	s := New([]float64{5, 1, 1, 2.5})
	const workers, cycles = 8, 400
	per := cycles * s.Len() / workers
	var c atomic.Uint32
	c.Store(12345 - 1) // Add returns the new value: the first seq is 12345
	counts := make([][]int, workers)
	var wg sync.WaitGroup
	for w := range workers {
		counts[w] = make([]int, 4)
		wg.Go(func() {
			for range per {
				counts[w][s.Next(c.Add(1))]++
			}
		})
	}
	wg.Wait()
	if per*workers != cycles*s.Len() {
		t.Fatalf("bad test setup: %d picks is not %d cycles", per*workers, cycles)
	}
	for i := range 4 {
		total := 0
		for w := range workers {
			total += counts[w][i]
		}
		if total != cycles*s.Slots(i) {
			t.Errorf("endpoint %d: %d picks, want %d", i, total, cycles*s.Slots(i))
		}
	}
}

// TestScheduleNextAllocs checks that a pick allocates nothing, from a
// table or from a sweep.
func TestScheduleNextAllocs(t *testing.T) {
	for _, n := range []int{3, 1000, 5000} {
		w := weightsOf(n, func(i int) float64 { return float64(1 + i%5) })
		if n == 5000 {
			w = randomWeights(rand.New(rand.NewPCG(29, 30)), n)
		}
		s := New(w)
		if s.Sweeps() != (n == 5000) {
			t.Fatalf("n=%d: Sweeps() = %v", n, s.Sweeps())
		}
		var seq uint32
		sink := 0
		if a := testing.AllocsPerRun(1000, func() {
			seq++
			sink += s.Next(seq)
		}); a != 0 {
			t.Errorf("n=%d: Next allocates %v times per call", n, a)
		}
		_ = sink
	}
}

// BenchmarkNewSchedule measures a rebuild, which weight-following policies
// do on every weight update (about once a second).
func BenchmarkNewSchedule(b *testing.B) {
	for _, n := range []int{10, 100, 1000, 10000, 50000} {
		b.Run(fmt.Sprintf("float/n=%d", n), func(b *testing.B) {
			w := randomWeights(rand.New(rand.NewPCG(9, uint64(n))), n)
			b.ReportAllocs()
			for b.Loop() {
				New(w)
			}
		})
	}
	b.Run("clustered/n=128", func(b *testing.B) {
		w := clustered(128) // the largest quantized table, at its worst case
		b.ReportAllocs()
		for b.Loop() {
			New(w)
		}
	})
	b.Run("integer/n=10000", func(b *testing.B) {
		w := weightsOf(10000, func(i int) float64 { return float64(2 * (1 + i*37%100)) }) // reported weights rounded to integers
		b.ReportAllocs()
		for b.Loop() {
			New(w)
		}
	})
	b.Run("integer/n=1000", func(b *testing.B) {
		w := weightsOf(1000, func(i int) float64 { return float64(1 + i%4) })
		b.ReportAllocs()
		for b.Loop() {
			New(w)
		}
	})
}

var benchSink atomic.Int64

// BenchmarkScheduleNext measures the schedule's part of a pick: all
// goroutines share one atomic counter, as a picker's did before it kept
// one per P.
func BenchmarkScheduleNext(b *testing.B) {
	for _, n := range []int{10, 128, 1000} {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			s := New(randomWeights(rand.New(rand.NewPCG(10, uint64(n))), n)) // a sweep past 128
			var c atomic.Uint32
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				sum := 0
				for pb.Next() {
					sum += s.Next(c.Add(1))
				}
				benchSink.Add(int64(sum))
			})
		})
	}
}

// TestScheduleExactSlotsMatchesFullPass: the exact cycle's pass, which
// stops at the first prefix of the weights whose cycle is past the limit,
// answers as a full pass would: fleets whose cycle is exactly the limit
// and one past it, then random integer weights, some fleets just within
// the limit, some just past it, some with a late weight that breaks the
// GCD, compared with a direct computation of the cycle.
func TestScheduleExactSlotsMatchesFullPass(t *testing.T) {
	limit := float64(exactLimit(2))
	if slots := exactSlots([]float64{limit - 1, 1}); slots == nil || slots[0] != uint32(limit-1) {
		t.Errorf("a cycle of exactly the limit: slots %v, want [%v 1]", slots, limit-1)
	}
	if slots := exactSlots([]float64{limit, 1}); slots != nil {
		t.Errorf("a cycle one past the limit: slots of %d entries, want none", len(slots))
	}
	// The first weight alone is a cycle of one; the GCD the second brings
	// halves the sum to exactly the limit.
	if slots := exactSlots([]float64{2 * (limit - 1), 2}); slots == nil || slots[0] != uint32(limit-1) {
		t.Errorf("a cycle of exactly the limit once reduced by a GCD of 2: slots %v, want [%v 1]", slots, limit-1)
	}
	rng := rand.New(rand.NewPCG(7, 11))
	for trial := range 2000 {
		n := 2 + rng.IntN(40)
		g := uint64(1 + rng.IntN(5))
		ws := make([]float64, n)
		for i := range ws {
			ws[i] = float64(g * uint64(1+rng.IntN(300)))
		}
		if trial%3 == 0 {
			ws[n-1] = float64(g*uint64(1+rng.IntN(300)) + 1) // likely a GCD of 1
		}
		if trial%7 == 0 {
			ws[rng.IntN(n)] = math.NaN() // one slot of its own
		}
		var d, sum, unusable uint64
		for _, w := range ws {
			if !usable(w) {
				unusable++
				continue
			}
			d = gcd(d, uint64(w))
			sum += uint64(w)
		}
		fits := sum/d+unusable <= exactLimit(n)
		slots := exactSlots(ws)
		if (slots != nil) != fits {
			t.Fatalf("weights %v: exact slots %v, want a cycle: %v (length %d, limit %d)", ws, slots, fits, sum/d+unusable, exactLimit(n))
		}
		for i, w := range ws {
			if slots != nil && usable(w) && uint64(slots[i]) != uint64(w)/d {
				t.Fatalf("weights %v: slot %d = %d, want %d", ws, i, slots[i], uint64(w)/d)
			}
		}
	}
}
