package subsetting

import (
	"errors"
	"fmt"
	"math/bits"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestBalancedMatchesAll checks that a client computing only its own
// row gets the row of the full assignment.
func TestBalancedMatchesAll(t *testing.T) {
	ids := backendIDs(37)
	all, err := BalancedAll(ids, 5, 50)
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range []int{0, 1, 24, 48, 49} {
		got, err := Balanced(ids, 5, i, 50)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(all[i], got); diff != "" {
			t.Errorf("client %d: (-all +own) %s", i, diff)
		}
	}
}

// TestBalanceSweep checks, over many small fleet shapes, that the balanced
// mode never fails to complete and always lands every backend on floor or
// ceil of the mean: the feasibility argument in assign, tested.
func TestBalanceSweep(t *testing.T) {
	for nb := 1; nb <= 24; nb++ {
		ids := backendIDs(nb)
		for clients := 1; clients <= 40; clients += 3 {
			for k := 1; k <= nb; k++ {
				rows, err := BalancedAll(ids, k, clients)
				if err != nil {
					t.Fatal(err)
				}
				checkRows(t, rows, k)
				lo, hi := spread(ids, rows)
				total := clients * k
				if lo != total/nb || hi != (total+nb-1)/nb {
					t.Fatalf("%d clients, %d backends, k=%d: loads %d..%d, want %d..%d", clients, nb, k, lo, hi, total/nb, (total+nb-1)/nb)
				}
			}
		}
	}
}

// TestOrderIndependence checks that the resolver's order and repeated
// identities do not change any subset.
func TestOrderIndependence(t *testing.T) {
	ids := backendIDs(60)
	r := rand.New(rand.NewPCG(1, 2))
	shuffled := slices.Clone(ids)
	r.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	duplicated := append(slices.Clone(shuffled), ids[3], ids[17], ids[3])
	for _, a := range algos {
		want, err := a.all(ids, 7, 40)
		if err != nil {
			t.Fatal(err)
		}
		for name, list := range map[string][]string{"shuffled": shuffled, "duplicated": duplicated} {
			got, err := a.all(list, 7, 40)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("%s, %s list: (-sorted +%s) %s", a.name, name, name, diff)
			}
		}
	}
	if !slices.Equal(shuffled[:3], duplicated[:3]) {
		t.Fatal("input was modified")
	}
}

// TestEdgeCases covers the small and the invalid.
func TestEdgeCases(t *testing.T) {
	ids := backendIDs(5)
	for _, a := range algos {
		// subsetSize >= backends: everyone gets everything.
		for _, k := range []int{5, 6, 100} {
			rows, err := a.all(ids, k, 4)
			if err != nil {
				t.Fatal(err)
			}
			for i, row := range rows {
				if diff := cmp.Diff(ids, row); diff != "" {
					t.Errorf("%s k=%d client %d: (-all +got) %s", a.name, k, i, diff)
				}
			}
		}
		// One backend.
		rows, err := a.all(ids[:1], 3, 4)
		if err != nil {
			t.Fatal(err)
		}
		for i, row := range rows {
			if !slices.Equal(row, ids[:1]) {
				t.Errorf("%s one backend, client %d: %v", a.name, i, row)
			}
		}
		// No backends: empty subsets, no error.
		rows, err = a.all(nil, 3, 2)
		if err != nil {
			t.Fatal(err)
		}
		for i, row := range rows {
			if len(row) != 0 {
				t.Errorf("%s no backends, client %d: %v", a.name, i, row)
			}
		}
	}
	// One client gets its k backends.
	rows, err := BalancedAll(ids, 2, 1)
	if err != nil || len(rows) != 1 || len(rows[0]) != 2 {
		t.Errorf("one client: %v, %v", rows, err)
	}

	for _, tc := range []struct {
		name               string
		size, index, count int
		want               error
		deterministicOnly  bool
	}{
		{"index negative", 2, -1, 3, ErrClientIndex, false},
		{"index == count", 2, 3, 3, ErrClientIndex, false},
		{"count zero", 2, 0, 0, ErrClientIndex, false},
		{"size zero", 0, 0, 3, ErrSubsetSize, false},
		{"size negative", -1, 0, 3, ErrSubsetSize, false},
	} {
		for name, f := range map[string]func([]string, int, int, int) ([]string, error){
			"Balanced": Balanced, "Stable": Stable, "SRE": SRE[string],
		} {
			if _, err := f(ids, tc.size, tc.index, tc.count); !errors.Is(err, tc.want) {
				t.Errorf("%s %s: error %v, want %v", name, tc.name, err, tc.want)
			}
		}
	}
	if _, err := BalancedAll(ids, 2, 0); !errors.Is(err, ErrClientIndex) {
		t.Errorf("BalancedAll count 0: %v", err)
	}
	if _, err := Rendezvous(ids, 0, "a"); !errors.Is(err, ErrSubsetSize) {
		t.Errorf("Rendezvous size 0: %v", err)
	}
}

// TestRendezvousStable checks that a client ID keeps its subset and that
// different IDs spread over the backends.
func TestRendezvousStable(t *testing.T) {
	ids := backendIDs(50)
	a, _ := Rendezvous(ids, 5, "pod-a")
	b, _ := Rendezvous(ids, 5, "pod-a")
	if !slices.Equal(a, b) {
		t.Errorf("same ID, different subsets: %v, %v", a, b)
	}
	seen := map[string]bool{}
	for i := range 100 {
		s, _ := Rendezvous(ids, 5, fmt.Sprint("pod-", i))
		for _, id := range s {
			seen[id] = true
		}
	}
	if len(seen) < 45 {
		t.Errorf("100 clients reached only %d of 50 backends", len(seen))
	}
}

// BenchmarkBalanced is the computation of the last client of the fleet,
// the worst case (it depends on every row before its own), for 10,000
// clients over 100 to 50,000 backends and 1,000 over 50,000, with
// subsets of 20. The identities come in resolver order, so the time
// includes sorting them.
func BenchmarkBalanced(b *testing.B) {
	for _, sz := range []size{
		{10000, 100, 20}, {10000, 1000, 20}, {10000, 10000, 20}, {10000, 50000, 20},
		{1000, 50000, 20},
	} {
		ids := backendIDs(sz.backends)
		b.Run(fmt.Sprintf("clients=%d/backends=%d/k=%d", sz.clients, sz.backends, sz.subset), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Balanced(ids, sz.subset, sz.clients-1, sz.clients); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestBucketOrder checks the client's bucket permutation three ways: the
// direct rank, the tables' rank and the tables' inverse (one bucket at a
// time and by runs of ranks) must agree, and every rank must be some
// bucket's, so that the scores order each client's backends by buckets.
func TestBucketOrder(t *testing.T) {
	for c := range 20 {
		seed := clientSeed(c * 997)
		var o bucketOrder
		o.init(seed)
		seen := make([]bool, buckets)
		for g := range uint16(buckets) {
			r := bucketRank(seed, g)
			if o.rank(g) != r || o.bucket(r) != g {
				t.Fatalf("client %d, bucket %d: rank %d, table rank %d, inverse %d", c, g, r, o.rank(g), o.bucket(r))
			}
			if seen[r] {
				t.Fatalf("client %d: rank %d twice", c, r)
			}
			seen[r] = true
		}
		// Runs within one 64-rank block, across one ({70, 9}) and several
		// ({200, 150}) block boundaries, the whole order down to rank 0,
		// and the empty run below it.
		for _, run := range []struct{ from, n int }{
			{buckets - 1, 64}, {buckets - 1, 1}, {100, 37}, {63, 64}, {70, 9}, {200, 150}, {buckets - 1, buckets}, {-1, 0},
		} {
			gs := make([]uint16, run.n)
			o.buckets(run.from, gs)
			// An order started without the last rounds' words must fill
			// those it reads, and only those.
			var lazy bucketOrder
			lazy.start(seed)
			lazyGs := make([]uint16, run.n)
			lazy.buckets(run.from, lazyGs)
			for j, g := range gs {
				if want := o.bucket(uint16(run.from - j)); g != want || lazyGs[j] != want {
					t.Fatalf("client %d, ranks from %d: rank %d is bucket %d (started lazily: %d), want %d", c, run.from, run.from-j, g, lazyGs[j], want)
				}
			}
			if filled := bits.OnesCount8(lazy.have[0]) + bits.OnesCount8(lazy.have[1]); run.n <= 64 && filled > 9 {
				t.Errorf("client %d, ranks from %d (%d): %d words of the last rounds filled", c, run.from, run.n, filled)
			}
			lazy.full()
			if lazy != o {
				t.Fatalf("client %d: filled lazily, the order differs", c)
			}
		}
	}
}

// TestNormalize compares the radix sort of string identities with
// sorting by comparisons, on lists that exercise its corners: addresses,
// identities that share 16 and 32 bytes and more (so that ties go on to
// the next bytes, twice), identities that are prefixes of others up to
// zero bytes (which tie with them at every depth), duplicates, and sizes
// around the threshold below which it compares instead.
func TestNormalize(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 8))
	gen := []func() string{
		func() string {
			return fmt.Sprintf("10.%d.%d.%d:%d", r.IntN(3), r.IntN(40), r.IntN(256), 8080+r.IntN(2))
		},
		func() string {
			b := make([]byte, r.IntN(40))
			for i := range b {
				b[i] = byte(r.IntN(3)) // zero bytes, and many ties
			}
			return string(b)
		},
		func() string { return fmt.Sprintf("backend-service-%05d.example.com:443", r.IntN(2000)) },
		func() string {
			return fmt.Sprintf("%s-%d", strings.Repeat("long-shared-prefix", 1+r.IntN(3)), r.IntN(300))
		},
		func() string { return strings.Repeat("a", r.IntN(50)) },
	}
	for trial := range 300 {
		n := []int{0, 1, minRadix - 1, minRadix, minRadix + 1, r.IntN(2000)}[trial%6]
		ids := make([]string, n)
		mixes := 1 + r.IntN(len(gen))
		for i := range ids {
			ids[i] = gen[(trial+r.IntN(mixes))%len(gen)]()
		}
		in := slices.Clone(ids)
		want := slices.Clone(ids)
		slices.Sort(want)
		want = slices.Compact(want)
		if got := Normalize(ids); !slices.Equal(got, want) {
			t.Fatalf("trial %d (%d identities): got %q, want %q", trial, n, got, want)
		}
		if !slices.Equal(ids, in) {
			t.Fatalf("trial %d: input modified", trial)
		}
	}
	// Other element types are sorted by comparisons.
	if got := Normalize([]int{3, 1, 3, 2}); !slices.Equal(got, []int{1, 2, 3}) {
		t.Errorf("ints: %v", got)
	}
}

// BenchmarkBalancedUpdate is a resolver update in mode balanced that
// replaces one backend (or puts it back), as a rolling restart does, for
// the last client of the policy's largest fleet (10,000 clients, subsets
// of 20), normalizing included. Nothing is kept from one update to the
// next: docs/design/subsetting.md compares this with the incremental
// cache that did keep the rows' candidates.
func BenchmarkBalancedUpdate(b *testing.B) {
	const clients, k = 10000, 20
	for _, nb := range []int{1000, 10000, 50000} {
		ids := backendIDs(nb)
		other := slices.Clone(ids)
		other[nb/2] = "10.9.9.9:8080"
		b.Run(fmt.Sprintf("backends=%d", nb), func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				list := ids
				if i++; i%2 == 1 {
					list = other
				}
				if _, err := Balanced(list, k, clients-1, clients); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
