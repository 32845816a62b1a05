package ringhash

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// sameRing reports how got differs from want in anything a lookup, a walk
// or a later rebuild reads, or "" if in nothing.
func sameRing(got, want *ring) string {
	if d := firstDiff("hashes", want.hashes, got.hashes); d != "" {
		return d
	}
	if d := firstDiff("narrow", want.narrow, got.narrow); d != "" {
		return d
	}
	if d := firstDiff("wide", want.wide, got.wide); d != "" {
		return d
	}
	if d := firstDiff("index", want.index, got.index); d != "" {
		return d
	}
	if d := firstDiff("sweep", want.sweep.order, got.sweep.order); d != "" {
		return d
	}
	type params struct {
		Shift     uint
		Scale     uint64
		WeightCap uint32
	}
	return cmp.Diff(params{want.shift, want.scale, want.weightCap}, params{got.shift, got.scale, got.weightCap})
}

// firstDiff describes the first difference between two slices, or returns
// "": a whole-ring diff would be megabytes.
func firstDiff[T comparable](name string, want, got []T) string {
	if len(want) != len(got) {
		return fmt.Sprintf("%s: %d entries, want %d", name, len(got), len(want))
	}
	for i := range want {
		if want[i] != got[i] {
			return fmt.Sprintf("%s[%d] = %v, want %v", name, i, got[i], want[i])
		}
	}
	return ""
}

// ringTies counts entries whose position equals the previous entry's.
func ringTies(r *ring) int {
	n := 0
	for i := 1; i < len(r.hashes); i++ {
		if r.hashes[i] == r.hashes[i-1] {
			n++
		}
	}
	return n
}

// TestRebuildMatchesFresh checks the placement contract across rebuilds:
// over random sequences of updates (endpoints leaving and joining, weights
// changing, the resolver's order reshuffled, the budget binding and not),
// each from fixed seeds, the ring derived from the previous one is the
// ring a fresh build makes over the same list, bit for bit, and it is
// derived, not rebuilt, whenever the update is small.
func TestRebuildMatchesFresh(t *testing.T) {
	for _, tc := range []struct {
		name             string
		n, steps         int
		minRing, maxRing uint64
		maxWeight        uint32
		ratio            uint32
		// churn is the largest fraction of endpoints one step swaps.
		churn float64
		// merges: most small steps should be derived, not rebuilt; a
		// ring too small for any step to be small is exempt.
		merges bool
	}{
		{"n=1000/1..100", 1000, 40, DefaultMinRingSize, DefaultMaxRingSize, 100, DefaultMaxWeightRatio, 0.02, true},
		{"n=1000/equal", 1000, 20, DefaultMinRingSize, DefaultMaxRingSize, 1, DefaultMaxWeightRatio, 0.02, true},
		{"n=50/small ring", 50, 60, 64, 1 << 12, 10, DefaultMaxWeightRatio, 0.04, true},
		{"n=5000/budget binds", 5000, 20, DefaultMinRingSize, DefaultMaxRingSize, 100, DefaultMaxWeightRatio, 0.01, true},
		{"n=300/wild weights", 300, 30, DefaultMinRingSize, DefaultMaxRingSize, math.MaxUint32, 4, 0.03, true},
		{"n=3/tiny", 3, 40, 1, 64, 3, DefaultMaxWeightRatio, 0.5, false},
		// 2^19 entries: about 32 ties a ring, so merges meet them.
		{"n=2000/ties", 2000, 6, 1 << 19, 1 << 19, 100, DefaultMaxWeightRatio, 0.01, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rnd := rand.New(rand.NewPCG(uint64(tc.n), 0x7e57))
			next := 0
			newEp := func() endpoint {
				next++
				return endpoint{id: fmt.Sprintf("10.%d.%d.%d:443", next>>16, next>>8&255, next&255), weight: 1 + rnd.Uint32N(tc.maxWeight)}
			}
			eps := make([]endpoint, tc.n)
			for i := range eps {
				eps[i] = newEp()
			}
			prev, err := buildRing(eps, tc.minRing, tc.maxRing, ringTargetEntries, tc.ratio)
			if err != nil {
				t.Fatal(err)
			}
			merged, ties := 0, 0
			for step := range tc.steps {
				cur := slices.Clone(eps)
				// Mostly small steps, now and then a big one that the
				// rebuild declines.
				k := 1 + rnd.IntN(max(1, int(tc.churn*float64(tc.n))))
				if step%7 == 6 {
					k = tc.n / 2
				}
				switch rnd.IntN(5) {
				case 0: // remove k
					for range min(k, len(cur)-1) {
						i := rnd.IntN(len(cur))
						cur = slices.Delete(cur, i, i+1)
					}
				case 1: // add k
					for range k {
						cur = append(cur, newEp())
					}
				case 2: // reweigh k
					for range k {
						cur[rnd.IntN(len(cur))].weight = rnd.Uint32N(tc.maxWeight) // 0 included
					}
				default: // swap k, as a rolling deploy does
					for range k {
						cur[rnd.IntN(len(cur))] = newEp()
					}
				}
				if rnd.IntN(3) == 0 {
					rnd.Shuffle(len(cur), func(i, j int) { cur[i], cur[j] = cur[j], cur[i] })
				}
				got, err := rebuildRing(prev, eps, cur, tc.minRing, tc.maxRing, ringTargetEntries, tc.ratio)
				if err != nil {
					t.Fatalf("step %d: %v", step, err)
				}
				want, err := buildRing(cur, tc.minRing, tc.maxRing, ringTargetEntries, tc.ratio)
				if err != nil {
					t.Fatalf("step %d: %v", step, err)
				}
				if want.merged {
					t.Fatalf("step %d: a fresh build reports a merge", step)
				}
				if d := sameRing(got, want); d != "" {
					t.Fatalf("step %d (%d endpoints -> %d, merged %v): %s", step, len(eps), len(cur), got.merged, d)
				}
				if got.merged {
					merged++
				}
				ties += ringTies(got)
				prev, eps = got, cur
			}
			t.Logf("%d of %d steps merged; %d ties seen", merged, tc.steps, ties)
			if tc.merges && merged < tc.steps/2 {
				t.Errorf("%d of %d steps merged, want at least half", merged, tc.steps)
			}
			if tc.maxRing >= 1<<19 && ties == 0 {
				t.Errorf("no ties in rings of %d entries", tc.maxRing)
			}
		})
	}
}

// TestRebuildWide checks a rebuild over more endpoints than 16-bit owners
// can name, and across the change of width, against fresh builds.
func TestRebuildWide(t *testing.T) {
	if testing.Short() {
		t.Skip("builds rings over 65k endpoints")
	}
	const n = 1<<16 + 100
	eps := fleetOf(n, 0)
	prev, err := newRing(eps, DefaultMinRingSize, DefaultMaxRingSize, DefaultMaxWeightRatio)
	if err != nil {
		t.Fatal(err)
	}
	steps := []func([]endpoint) []endpoint{
		func(e []endpoint) []endpoint { e[5] = endpoint{id: "new-a", weight: 3}; return e }, // swap, wide
		func(e []endpoint) []endpoint { e[7].weight = 9; return e[:len(e)-50] },             // still wide
		func(e []endpoint) []endpoint { return e[:1<<16] },                                  // to narrow
		func(e []endpoint) []endpoint { return append(e, fleetOf(10, n)...) },               // back to wide
		func(e []endpoint) []endpoint { return append(e[:100], e[101:]...) },                // wide
	}
	for i, f := range steps {
		cur := f(slices.Clone(eps))
		got, want := rebuildAndFresh(t, prev, eps, cur)
		if d := sameRing(got, want); d != "" {
			t.Fatalf("step %d: %s", i, d)
		}
		t.Logf("step %d: %d endpoints, merged %v", i, len(cur), got.merged)
		prev, eps = got, cur
	}
}

// fleetOf returns n endpoints of weights 1 to 7 whose identities start at
// number from.
func fleetOf(n, from int) []endpoint {
	eps := make([]endpoint, n)
	for i := range eps {
		eps[i] = endpoint{id: fmt.Sprintf("wide-%d", from+i), weight: uint32(1 + i%7)}
	}
	return eps
}

// TestRebuildTies checks the rebuild's tie-breaks against fresh builds
// where they are sure to matter: an endpoint joining and leaving with a
// position equal to another endpoint's, its identity sorting before and
// after that endpoint's, and an endpoint whose own stream repeats a
// position growing and shrinking across the repeat. Random updates meet
// such ties only now and then, so the test searches identities for them.
func TestRebuildTies(t *testing.T) {
	base := weighted(1000, func(_ int, rnd *rand.Rand) uint32 { return uint32(1 + rnd.IntN(100)) })
	r0, err := newRing(base, DefaultMinRingSize, DefaultMaxRingSize, DefaultMaxWeightRatio)
	if err != nil {
		t.Fatal(err)
	}
	const weight = 50 // about 200 entries
	k := uint32(ringCount(r0.scale, weight))
	positions := make(map[uint32]bool, len(r0.hashes))
	for _, h := range r0.hashes {
		positions[h] = true
	}
	// step rebuilds prev (over from) for to and compares with a fresh
	// build.
	step := func(name string, prev *ring, from, to []endpoint) *ring {
		t.Helper()
		got, want := rebuildAndFresh(t, prev, from, to)
		if !got.merged {
			t.Errorf("%s: built afresh, want merged", name)
		}
		if d := sameRing(got, want); d != "" {
			t.Fatalf("%s: %s", name, d)
		}
		return got
	}
	// "0..." sorts before every identity of base, "t..." after.
	for _, prefix := range []string{"0tie-", "tie-"} {
		id := ""
		for i := 0; id == "" && i < 1_000_000; i++ {
			cand := fmt.Sprintf("%s%d", prefix, i)
			h := hashIdentity(cand)
			for j := range k {
				if positions[ringPosition(h, j)] {
					id = cand
					break
				}
			}
		}
		if id == "" {
			t.Fatalf("no identity %s* shares a position with the ring", prefix)
		}
		with := append(slices.Clone(base), endpoint{id: id, weight: weight})
		r1 := step(id+" joins", r0, base, with)
		if ringTies(r1) <= ringTies(r0) {
			t.Fatalf("%s joins: no new tie", id)
		}
		step(id+" leaves", r1, with, base)
	}

	// An identity whose first 600 positions repeat one: j1 < j2.
	id, j1, j2 := "", uint32(0), uint32(0)
	for i := 0; id == "" && i < 10_000_000; i++ {
		cand := fmt.Sprintf("dup-%d", i)
		h := hashIdentity(cand)
		seen := make(map[uint32]uint32, 600)
		for j := range uint32(600) {
			p := ringPosition(h, j)
			if first, ok := seen[p]; ok {
				id, j1, j2 = cand, first, j
				break
			}
			seen[p] = j
		}
	}
	if id == "" {
		t.Fatal("no identity repeats a position in its first 600")
	}
	// Weights whose counts keep both copies, and only the first.
	wBoth, wOne := uint32(0), uint32(0)
	for w := uint32(1); w < 1000 && (wBoth == 0 || wOne == 0); w++ {
		switch c := uint32(ringCount(r0.scale, w)); {
		case c > j2 && wBoth == 0:
			wBoth = w
		case c > j1 && c <= j2 && wOne == 0:
			wOne = w
		}
	}
	if wBoth == 0 || wOne == 0 {
		t.Fatalf("%s (positions %d and %d): no weights to keep one or both", id, j1, j2)
	}
	one := append(slices.Clone(base), endpoint{id: id, weight: wOne})
	both := slices.Clone(one)
	both[len(both)-1].weight = wBoth
	r1 := step(id+" joins", r0, base, one)
	r2 := step(id+" grows past its repeat", r1, one, both)
	step(id+" shrinks below its repeat", r2, both, one)
}

// TestRebuildErrors checks that a rebuild rejects what a fresh build
// rejects: a duplicated identity (whether it duplicates a kept endpoint
// or a new one) and no endpoints.
func TestRebuildErrors(t *testing.T) {
	base := fleet(100)
	prev, err := newRing(base, DefaultMinRingSize, DefaultMaxRingSize, DefaultMaxWeightRatio)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		eps  []endpoint
		want string
	}{
		{"kept twice", append(slices.Clone(base), base[3]), "duplicate endpoint identity"},
		{"new twice", append(slices.Clone(base), endpoint{id: "x", weight: 1}, endpoint{id: "x", weight: 2}), "duplicate endpoint identity"},
		{"kept twice, reordered", append([]endpoint{base[50]}, base...), "duplicate endpoint identity"},
		{"none", nil, "no endpoints"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := updateRing(prev, base, tc.eps, DefaultMinRingSize, DefaultMaxRingSize, DefaultMaxWeightRatio)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("updateRing: %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// rebuildAndFresh is prev (built over from) rebuilt for to, and a fresh
// build over to, both at the default sizes.
func rebuildAndFresh(t *testing.T, prev *ring, from, to []endpoint) (got, want *ring) {
	t.Helper()
	got, err := updateRing(prev, from, to, DefaultMinRingSize, DefaultMaxRingSize, DefaultMaxWeightRatio)
	if err != nil {
		t.Fatal(err)
	}
	if want, err = newRing(to, DefaultMinRingSize, DefaultMaxRingSize, DefaultMaxWeightRatio); err != nil {
		t.Fatal(err)
	}
	return got, want
}
