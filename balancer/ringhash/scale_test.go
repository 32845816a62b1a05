package ringhash

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/pickwise/pickwise/internal/engine"
	"github.com/pickwise/pickwise/internal/testkit"
	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/resolver"
)

// The tests here check the properties that keep the tables cheap at fleet
// scale: the weight cap, the ring's budget and its balance tolerance,
// Maglev's quotas, the rendezvous size warning and table reuse across
// pickers. Costs themselves are measured by the benchmarks, never asserted.

// weighted returns fleet(n) with weights drawn by weight from a fixed
// seed.
func weighted(n int, weight func(i int, rnd *rand.Rand) uint32) []endpoint {
	rnd := rand.New(rand.NewPCG(7, 11))
	eps := fleet(n)
	for i := range eps {
		eps[i].weight = weight(i, rnd)
	}
	return eps
}

// cappedShares returns each endpoint's weight share p_i after the weight
// cap, by caller index: the ideal a table approximates.
func cappedShares(t *testing.T, eps []endpoint, ratio uint32) []float64 {
	t.Helper()
	c, err := canonicalize(eps, ratio)
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, w := range c.weights {
		sum += float64(w)
	}
	p := make([]float64, len(eps))
	for r, w := range c.weights {
		p[c.order[r]] = float64(w) / sum
	}
	return p
}

func TestCapWeights(t *testing.T) {
	const maxW = math.MaxUint32
	for _, tc := range []struct {
		name   string
		in     []uint32
		ratio  uint32
		want   []uint32
		median uint32 // 0: capWeights need not find it
	}{
		{"equal", []uint32{3, 3, 3}, 16, []uint32{3, 3, 3}, 3},
		{"within the ratio", []uint32{1, 16, 2}, 16, []uint32{1, 16, 2}, 0},
		{"one absurd", []uint32{1, 1, 1, maxW}, 16, []uint32{1, 1, 1, 16}, 1},
		{"upper median keeps a heavy half", []uint32{1, 1000, 1, 1000}, 16, []uint32{1, 1000, 1, 1000}, 1000},
		{"two endpoints: no bound", []uint32{1, maxW}, 16, []uint32{1, maxW}, maxW},
		{"ratio 1 flattens above the median", []uint32{1, 2, 3, 100}, 1, []uint32{1, 2, 3, 3}, 3},
		{"cap above 2^32-1 clamps", []uint32{1 << 31, 1, maxW, 1 << 31}, 16, []uint32{1 << 31, 1, maxW, 1 << 31}, 1 << 31},
		{"several absurd", []uint32{maxW, 2, maxW, 2, 2}, 4, []uint32{8, 2, 8, 2, 2}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := slices.Clone(tc.in)
			median := capWeights(got, tc.ratio)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("capWeights(%v, %d): weights (-want +got):\n%s", tc.in, tc.ratio, diff)
			}
			if median != tc.median {
				t.Errorf("capWeights(%v, %d) = %d, want %d", tc.in, tc.ratio, median, tc.median)
			}
			if m := nthWeight(got, len(got)/2); tc.median != 0 && m != tc.median {
				t.Errorf("upper median after the cap %d, want %d", m, tc.median)
			}
		})
	}
}

// TestWeightCap checks the documented bound on one endpoint's share: with
// its weight at 2^32-1, it owns at most maxWeightRatio / (maxWeightRatio +
// ceil(n/2) - 1) of the keys in every table, give or take the table's own
// error. The other weights are the bound's worst case: floor(n/2)
// endpoints of weight 1 below a median of 1000, so the cap binds at 16000
// and the bound is nearly reached.
func TestWeightCap(t *testing.T) {
	keys := testKeys(200000)
	for _, n := range []int{3, 20, 100, 1000} {
		eps := fleet(n)
		for i := range eps {
			eps[i].weight = 1000
			if i < n/2 {
				eps[i].weight = 1
			}
		}
		heavy := n - 1
		eps[heavy].weight = math.MaxUint32
		bound := float64(DefaultMaxWeightRatio) / float64(DefaultMaxWeightRatio+(n+1)/2-1)
		p := cappedShares(t, eps, DefaultMaxWeightRatio)[heavy]
		if p > bound {
			t.Fatalf("n=%d: capped weight share %.4f above the bound %.4f", n, p, bound)
		}
		for _, k := range kinds {
			t.Run(fmt.Sprintf("%s/n=%d", k.name, n), func(t *testing.T) {
				tb := mustBuild(t, k, eps)
				s, how := shares(tb, keys)
				var slack float64
				switch tb := tb.(type) {
				case *ring:
					// The quantisation bound plus five standard deviations
					// of the heavy endpoint's arcs.
					kh, T := 0.0, float64(len(tb.hashes))
					for i := range tb.hashes {
						if tb.owner(uint32(i)) == int32(heavy) {
							kh++
						}
					}
					slack = (1+float64(n)*p)/T + 5*math.Sqrt(kh)/T
				case *maglev:
					slack = (1 + max(1, float64(n)*p)) / float64(tb.m)
				default:
					slack = 5 * math.Sqrt(p*(1-p)/float64(len(keys)))
				}
				t.Logf("n=%-4d heavy share of %s %.4f; capped weight share %.4f, bound %.4f (+%.4f)", n, how, s[heavy], p, bound, slack)
				if s[heavy] > bound+slack {
					t.Errorf("an endpoint of weight 2^32-1 owns %.4f of %s, want at most %.4f + %.4f", s[heavy], how, bound, slack)
				}
				// The cap bounds the share; it must not erase the weight.
				if s[heavy] < p-slack {
					t.Errorf("the capped endpoint owns %.4f, below its capped weight share %.4f - %.4f", s[heavy], p, slack)
				}
			})
		}
	}
}

// TestRingTolerance checks the ring's documented balance at fleet scale,
// at the default sizes: it stays within its budget (1 MB at 10000 equal
// endpoints), every count k_i is within (1 + n*p_i)/T of the weight share
// p_i (quantisation), and where the hashes fall spreads shares around
// k_i/T no more than the 1/sqrt(k_i) of independent arcs predicts.
func TestRingTolerance(t *testing.T) {
	for _, tc := range []struct {
		name string
		eps  []endpoint
	}{
		{"n=1000/equal", fleet(1000)},
		{"n=1000/1..100", weighted(1000, func(_ int, rnd *rand.Rand) uint32 { return uint32(1 + rnd.IntN(100)) })},
		{"n=1000/one=2^32-1", weighted(1000, func(i int, _ *rand.Rand) uint32 { return max(1, uint32(i/999)*math.MaxUint32) })},
		{"n=1000/1..2^32-1", weighted(1000, func(_ int, rnd *rand.Rand) uint32 { return 1 + rnd.Uint32N(math.MaxUint32) })},
		{"n=10000/equal", fleet(10000)},
		{"n=50000/1..100", weighted(50000, func(_ int, rnd *rand.Rand) uint32 { return uint32(1 + rnd.IntN(100)) })},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := len(tc.eps)
			r, err := newRing(tc.eps, DefaultMinRingSize, DefaultMaxRingSize, DefaultMaxWeightRatio)
			if err != nil {
				t.Fatal(err)
			}
			st := r.stats()
			if st.entries > DefaultMaxRingSize {
				t.Errorf("%d entries, more than maxRingSize %d", st.entries, DefaultMaxRingSize)
			}
			if n <= 10000 && st.bytes > 1<<20 {
				t.Errorf("ring of %d bytes over %d endpoints, want at most 1 MB", st.bytes, n)
			}
			p := cappedShares(t, tc.eps, DefaultMaxWeightRatio)
			counts := make([]float64, n)
			for i := range r.hashes {
				counts[r.owner(uint32(i))]++
			}
			s, _ := keySpaceShares(r)
			T := float64(st.entries)
			var tvQuant, tvGot, tvNoise, z2 float64
			var zMax float64
			for i := range n {
				k := counts[i]
				if k == 0 {
					t.Fatalf("endpoint %d has no entry", i)
				}
				if d, lim := math.Abs(k/T-p[i]), (1+float64(n)*p[i])/T; d > lim {
					t.Errorf("endpoint %d: %v entries of %v, %.3g from its weight share %.3g, want at most %.3g", i, k, T, d, p[i], lim)
				}
				// An endpoint's share of T uniform points is a sum of k
				// arcs: mean k/T, standard deviation sqrt(k(T-k)/(T+1))/T.
				sd := math.Sqrt(k*(T-k)/(T+1)) / T
				z := (s[i] - k/T) / sd
				z2 += z * z
				if k >= 32 {
					zMax = max(zMax, math.Abs(z))
				}
				tvQuant += math.Abs(k/T-p[i]) / 2
				tvGot += math.Abs(s[i]-p[i]) / 2
				tvNoise += math.Sqrt(2/math.Pi) * sd / 2
			}
			z2 /= float64(n)
			t.Logf("%v; mean z^2 %.3f, max |z| (k >= 32) %.2f; distance from the weight shares %.4f (quantisation %.4f, expected from hashing %.4f)",
				st, z2, zMax, tvGot, tvQuant, tvNoise)
			if z2 < 0.7 || z2 > 1.3 {
				t.Errorf("mean squared deviation %.3f of the predicted spread, want about 1 (0.7 to 1.3)", z2)
			}
			if zMax > 6 {
				t.Errorf("an endpoint with 32 or more entries is %.1f standard deviations from its expected share, want at most 6", zMax)
			}
			if tvGot > tvQuant+1.2*tvNoise {
				t.Errorf("total variation from the weight shares %.4f, want at most %.4f + 1.2 x %.4f", tvGot, tvQuant, tvNoise)
			}
		})
	}
}

// classicMaglev is the paper's fill with equal weights, written
// independently of ours: endpoints take turns in canonical order, each
// claiming its next free preferred slot, until the table is full. It
// returns each slot's rank.
func classicMaglev(eps []endpoint, m uint64) []int {
	c, _ := canonicalize(eps, DefaultMaxWeightRatio)
	owner := make([]int, m)
	for i := range owner {
		owner[i] = -1
	}
	next := make([]uint64, len(eps))
	for filled := uint64(0); ; {
		for r, h := range c.hashes {
			offset, skip := reduce(derive(h, 0), m), 1+reduce(derive(h, 1), m-1)
			for {
				s := (offset + next[r]*skip) % m
				next[r]++
				if owner[s] < 0 {
					owner[s] = r
					break
				}
			}
			if filled++; filled == m {
				return owner
			}
		}
	}
}

// TestMaglevQuotas checks Maglev's shares: with equal weights the table is
// the paper's, slot for slot, and with any weights every endpoint owns
// exactly its quota: at least one slot, and within (1 + max(1, n*p_i))/M
// of its capped weight share p_i.
func TestMaglevQuotas(t *testing.T) {
	for _, n := range []int{1, 7, 100} {
		for _, m := range []uint64{257, DefaultMaglevTableSize} {
			eps := fleet(n)
			tb, err := newMaglev(eps, m, DefaultMaxWeightRatio)
			if err != nil {
				t.Fatal(err)
			}
			c, _ := canonicalize(eps, DefaultMaxWeightRatio)
			want := classicMaglev(eps, m)
			for s := range m {
				if got := tb.at(s); got != c.order[want[s]] {
					t.Fatalf("n=%d, M=%d: slot %d holds endpoint %d, the paper's fill endpoint %d", n, m, s, got, c.order[want[s]])
				}
			}
		}
	}
	for _, tc := range []struct {
		name string
		eps  []endpoint
		m    uint64
	}{
		{"1..100", weighted(1000, func(_ int, rnd *rand.Rand) uint32 { return uint32(1 + rnd.IntN(100)) }), DefaultMaglevTableSize},
		{"1..2^32-1", weighted(1000, func(_ int, rnd *rand.Rand) uint32 { return 1 + rnd.Uint32N(math.MaxUint32) }), DefaultMaglevTableSize},
		{"one=2^32-1", weighted(20, func(i int, _ *rand.Rand) uint32 { return max(1, uint32(i/19)*math.MaxUint32) }), maxMaglevTableSize},
		{"powers of two", weighted(30, func(i int, _ *rand.Rand) uint32 { return 1 << (i % 32) }), 257},
		{"as many slots as endpoints", weighted(31, func(i int, _ *rand.Rand) uint32 { return uint32(i + 1) }), 31},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tb, err := newMaglev(tc.eps, tc.m, DefaultMaxWeightRatio)
			if err != nil {
				t.Fatal(err)
			}
			p := cappedShares(t, tc.eps, DefaultMaxWeightRatio)
			slots := make([]float64, len(tc.eps))
			for s := range tb.m {
				slots[tb.at(s)]++
			}
			n, M := float64(len(tc.eps)), float64(tc.m)
			var worst float64
			for i, q := range slots {
				lim := (1 + max(1, n*p[i])) / M
				d := math.Abs(q/M - p[i])
				worst = max(worst, d/lim)
				if q < 1 || d >= lim {
					t.Errorf("endpoint %d owns %v slots of %v, %.3g from its weight share %.3g, want at least 1 and within %.3g", i, q, M, d, p[i], lim)
				}
			}
			t.Logf("%d endpoints, %d slots: worst share error %.2f of its bound", len(tc.eps), tc.m, worst)
		})
	}
}

// TestWeightedMovement checks minimal disruption with unequal weights: a
// new endpoint takes about its own share and the survivors keep theirs
// (Maglev up to twice the share, as in TestMovement).
func TestWeightedMovement(t *testing.T) {
	keys := testKeys(100000)
	eleven := weighted(11, func(i int, _ *rand.Rand) uint32 { return uint32(i%4 + 1) })
	ten := eleven[:10]
	var total float64
	for _, e := range eleven {
		total += float64(e.weight)
	}
	ideal := float64(eleven[10].weight) / total
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			a, b := mustBuild(t, k, ten), mustBuild(t, k, eleven)
			moved := 0
			for _, key := range keys {
				if owner(a, ten, key) != owner(b, eleven, key) {
					moved++
				}
			}
			share := float64(moved) / float64(len(keys))
			limit := ideal + 0.03
			if k.name == "maglev" {
				limit = 2 * ideal
			}
			t.Logf("%s: 10 -> 11 weighted endpoints moved %.2f%% of keys; the newcomer's weight share %.2f%%, limit %.2f%%", k.name, 100*share, 100*ideal, 100*limit)
			if share > limit {
				t.Errorf("moved %.2f%%, want at most %.2f%%", 100*share, 100*limit)
			}
		})
	}
}

// captureWarnings collects what the balancer logs as warnings until the
// test ends.
func captureWarnings(t *testing.T) *[]string {
	var got []string
	old := warningf
	warningf = func(format string, args ...any) { got = append(got, fmt.Sprintf(format, args...)) }
	t.Cleanup(func() { warningf = old })
	return &got
}

// TestRendezvousSizeWarning checks that a rendezvous table over more than
// rendezvousMaxEndpoints is built, with a warning that says why it is
// slow and what to use instead, once per crossing of the limit.
func TestRendezvousSizeWarning(t *testing.T) {
	warnings := captureWarnings(t)
	h := testkit.NewHarness(t, Name, `{"table": "rendezvous"}`)
	update := func(n int) {
		t.Helper()
		if err := h.Update(testkit.Endpoints(testkit.Addrs(n))...); err != nil {
			t.Fatal(err)
		}
	}
	for _, step := range []struct {
		n        int
		warnings int
	}{
		{rendezvousMaxEndpoints, 0},
		{rendezvousMaxEndpoints + 1, 1},
		{rendezvousMaxEndpoints + 2, 1}, // still over: no new warning
		{rendezvousMaxEndpoints, 1},
		{rendezvousMaxEndpoints + 1, 2}, // over again
	} {
		update(step.n)
		if p := currentPicker(t, h); p.tbl.size() != step.n {
			t.Fatalf("%d endpoints: table over %d", step.n, p.tbl.size())
		}
		if len(*warnings) != step.warnings {
			t.Fatalf("after a table over %d endpoints: %d warnings, want %d: %q", step.n, len(*warnings), step.warnings, *warnings)
		}
	}
	w := (*warnings)[0]
	for _, want := range []string{Name, "rendezvous table over 1001 endpoints", "more than the 1000", `"ring"`, `"maglev"`} {
		if !strings.Contains(w, want) {
			t.Errorf("warning %q does not say %q", w, want)
		}
	}

	// Other tables are not limited.
	*warnings = nil
	h2 := testkit.NewHarness(t, Name, `{"table": "maglev"}`)
	if err := h2.Update(testkit.Endpoints(testkit.Addrs(2000))...); err != nil {
		t.Fatal(err)
	}
	if len(*warnings) != 0 {
		t.Errorf("maglev over 2000 endpoints logged %q", *warnings)
	}
}

// TestPickerReuse checks what a picker rebuild costs the policy when the
// placement inputs did not change (a connectivity change): the table is
// reused, the snapshot's members are used as they are, and the rebuild
// allocates only the picker itself, with or without bounded load. Any
// change to an identity, a weight or the table's config rebuilds the
// table; other config changes and a reordered list do not.
func TestPickerReuse(t *testing.T) {
	members := func(weights ...uint32) []engine.Member {
		ms := make([]engine.Member, len(weights))
		for i, a := range testkit.Addrs(len(weights)) {
			ms[i] = engine.Member{Endpoint: testkit.Endpoint(a, weights[i]), Weight: max(weights[i], 1)}
		}
		return ms
	}
	for _, cfg := range []string{`{}`, `{"table": "maglev", "balanceFactor": 1.25}`, `{"table": "rendezvous"}`} {
		t.Run(cfg, func(t *testing.T) {
			parsed, err := ParseConfig([]byte(cfg))
			if err != nil {
				t.Fatal(err)
			}
			p := &policy{cfg: parsed.(*Config)}
			base := members(1, 2, 3, 1, 1, 1, 5, 1)
			idle := make([]engine.MemberState, len(base)) // the zero state is IDLE
			pickIn := func(ms []engine.Member, states []engine.MemberState) *picker {
				t.Helper()
				pk, ok := p.NewPicker(&engine.Snapshot{Members: ms, States: states}).(*picker)
				if !ok {
					t.Fatalf("NewPicker returned %T", pk)
				}
				return pk
			}
			pick := func(ms []engine.Member) *picker { return pickIn(ms, idle) }
			first := pick(base)

			// A connectivity change: the engine's snapshot has the same
			// members array, and new states.
			states := slices.Clone(idle)
			states[2] = engine.MemberStateOf(connectivity.Ready, false)
			pk := pickIn(base, states)
			if pk.tbl != first.tbl || &pk.members[0] != &base[0] || &pk.states[0] != &states[0] {
				t.Errorf("a state change rebuilt the table or copied the members or states")
			}
			if first.dones != nil && &pk.dones[0] != &first.dones[0] {
				t.Errorf("a state change rebuilt bounded load's callbacks")
			}
			snap := &engine.Snapshot{Members: base, States: states}
			if allocs := testing.AllocsPerRun(100, func() { p.NewPicker(snap) }); allocs > 1 {
				t.Errorf("a picker over unchanged members allocates %v times, want 1 (the picker)", allocs)
			}
			// The same members in a new array: checked, not copied.
			again := slices.Clone(base)
			if pk := pick(again); pk.tbl != first.tbl || &pk.members[0] != &again[0] {
				t.Errorf("an equal members array rebuilt the table or was copied")
			}

			// A reordered list: the same table, members realigned to it.
			// Their states follow them.
			reordered := slices.Clone(base)
			slices.Reverse(reordered)
			reorderedStates := slices.Clone(states)
			slices.Reverse(reorderedStates)
			pk = pickIn(reordered, reorderedStates)
			if pk.tbl != first.tbl || pk.members[0].Endpoint.Addresses[0] != base[0].Endpoint.Addresses[0] {
				t.Errorf("reordering rebuilt the table or misaligned the members")
			}
			if !slices.Equal(pk.states, states) {
				t.Errorf("reordered members' states %v, want %v", pk.states, states)
			}
			// A connectivity change after the reorder: the engine hands
			// the reordered array again, with new states, which follow
			// their members too.
			reorderedStates = slices.Clone(reorderedStates)
			reorderedStates[0] = engine.MemberStateOf(connectivity.TransientFailure, false)
			want := slices.Clone(reorderedStates)
			slices.Reverse(want)
			if pk := pickIn(reordered, reorderedStates); pk.tbl != first.tbl || !slices.Equal(pk.states, want) {
				t.Errorf("after a state change, reordered members' states %v, want %v", pk.states, want)
			}

			// A config change outside the table keeps it, one inside
			// rebuilds it.
			c := *p.cfg
			c.RequestHashHeader = "x-other"
			p.cfg = &c
			if pk := pick(base); pk.tbl != first.tbl {
				t.Errorf("a header change rebuilt the table")
			}
			c2 := c
			c2.MaxWeightRatio = 2
			p.cfg = &c2
			if pk := pick(base); pk.tbl == first.tbl {
				t.Errorf("a maxWeightRatio change kept the table")
			}
			p.cfg = &c

			// A weight change or a new identity rebuilds it.
			last := pick(base).tbl
			heavier := slices.Clone(base)
			heavier[0].Weight = 7
			if pk := pick(heavier); pk.tbl == last {
				t.Errorf("a weight change kept the table")
			}
			renamed := slices.Clone(base)
			renamed[3].Endpoint = resolver.Endpoint{Addresses: []resolver.Address{{Addr: "10.9.9.9:1"}}}
			if pk := pick(renamed); pk.tbl == last || pk.tbl.size() != len(base) {
				t.Errorf("a new identity kept the table")
			}
		})
	}
}

// Keep balancer imported for the picker type assertion's error path.
var _ balancer.Picker = (*picker)(nil)
