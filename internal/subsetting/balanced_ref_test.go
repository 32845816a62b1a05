package subsetting

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// assignRef is the balanced assignment as it was first written, kept as
// the reference that Balanced must match exactly: every row scores
// and sorts every backend. It computes rows 0..last of the global
// assignment of k of the len(h) backends (identity hashes h) to each of
// count clients, k < len(h), every backend ending with floor or ceil of
// count*k/len(h) clients. Row c depends only on the rows before it, so
// rows after last are not computed. Rows hold backend indices, in no
// particular order.
//
// Cost: per row, len(h) score mixes and a sort, so
// O(count * len(h) * log len(h)) time: 14 s for the last of 10,000
// clients over 10,000 backends, which is why it is no longer used.
func assignRef(h []uint64, k, count, last int) [][]int32 {
	nb := len(h)
	total := count * k
	lo, hi := total/nb, (total+nb-1)/nb
	n := make([]int, nb) // clients assigned so far, per backend
	order := make([]int32, nb)
	score := make([]uint64, nb)
	taken := make([]bool, nb)
	rows := make([][]int32, last+1)
	flat := make([]int32, (last+1)*k)
	for c := 0; c <= last; c++ {
		left := count - c // clients still to serve, this one included
		seed := clientSeed(c)
		for b := range nb {
			order[b] = int32(b)
			score[b] = balancedScore(seed, h[b])
		}
		slices.SortFunc(order, func(a, b int32) int {
			if score[a] > score[b] {
				return -1
			}
			if score[a] < score[b] {
				return 1
			}
			return int(a - b)
		})
		row := flat[c*k : c*k : (c+1)*k]
		clear(taken)
		// The clients after this one can complete the assignment iff
		// (Gale-Ryser, all rows summing to k) every backend can still
		// reach lo, the deficits to lo fit in their (left-1)*k picks, and
		// the room below hi (at most left-1 per backend) holds them. So:
		// a backend short of lo by left must be taken now (forced); at
		// least needDef picks must go to backends short of lo; and at most
		// maxLow to backends whose room is below left, since only those
		// lose usable room when taken.
		deficit, usable := 0, 0
		for b := range nb {
			short := lo - n[b]
			deficit += max(short, 0)
			usable += min(hi-n[b], left-1)
			if short == left {
				row = append(row, int32(b))
				taken[b] = true
			}
		}
		needDef := deficit - len(row) - (left-1)*k
		maxLow := usable - (left-1)*k
		room := k - len(row)
		for _, b := range order {
			if room == 0 {
				break
			}
			if taken[b] || n[b] >= hi {
				continue
			}
			isDef, isLow := n[b] < lo, hi-n[b] < left
			if isLow && maxLow <= 0 {
				continue
			}
			if !isDef && room <= needDef {
				continue // the remaining picks are reserved for deficits
			}
			row = append(row, b)
			taken[b] = true
			room--
			if isDef {
				needDef--
			}
			if isLow {
				maxLow--
			}
		}
		if room != 0 {
			// Unreachable: the invariant above guarantees a valid pick.
			panic(fmt.Sprintf("subset: internal error: no feasible subset for client %d of %d (k=%d, backends=%d)", c, count, k, nb))
		}
		for _, b := range row {
			n[b]++
		}
		rows[c] = row
	}
	return rows
}

// balancedScore is pairScore with the bucket and its rank computed
// directly, one pair at a time, as the reference wants: the assignment
// never scores that way.
func balancedScore(seed, h uint64) uint64 {
	return pairScore(bucketRank(seed, bucketOf(h)), seed, h)
}

// bucketRank is bucket g's rank in client seed's order (buckets-1 first),
// the Feistel network evaluated directly from roundWord, one mix per
// round: what bucketOrder's tables must agree with.
func bucketRank(seed uint64, g uint16) uint16 {
	l, r := g>>halfBits, g&halfMask
	for i := range rounds {
		l, r = r, l^roundValue(seed, i, r)
	}
	return l<<halfBits | r
}

// roundValue is round i's function at x for client seed: byte x%8 of
// word x/8, as bucketOrder tables it.
func roundValue(seed uint64, i int, x uint16) uint16 {
	return uint16(roundWord(seed, i, int(x>>3))>>(8*(x&7))) & halfMask
}

// refNormalize is Normalize by comparisons: the reference must not share
// the radix sort it checks.
func refNormalize(ids []string) []string {
	ids = slices.Clone(ids)
	slices.Sort(ids)
	return slices.Compact(ids)
}

// refRow is client index's subset under the reference algorithm.
func refRow(ids []string, k, index, count int) []string {
	ids = refNormalize(ids)
	if k >= len(ids) {
		return ids
	}
	row := assignRef(idHashes(ids), k, count, index)[index]
	out := make([]string, len(row))
	for i, b := range row {
		out[i] = ids[b]
	}
	slices.Sort(out)
	return out
}

// refAll is every client's subset under the reference algorithm.
func refAll(ids []string, k, count int) [][]string {
	ids = refNormalize(ids)
	out := make([][]string, count)
	if k >= len(ids) {
		for i := range out {
			out[i] = slices.Clone(ids)
		}
		return out
	}
	for i, row := range assignRef(idHashes(ids), k, count, count-1) {
		out[i] = make([]string, len(row))
		for j, b := range row {
			out[i][j] = ids[b]
		}
		slices.Sort(out[i])
	}
	return out
}

// wants are the candidate-list lengths the comparisons run with (the
// hooks listWant and noExtend): the default, lists so short that nearly
// every row extends its list, and short lists that are never extended,
// so that nearly every row's walk goes on in overflow.
var wants = []listHooks{
	{"default", 0, false}, {"want=1", 1, false}, {"want=3", 3, false}, {"want=3,overflow", 3, true},
}

// listHooks is one setting of the list hooks, named for the failures.
type listHooks struct {
	name     string
	want     int // 0: computed; else also the size of every extension
	noExtend bool
}

// set sets the hooks and returns a function that restores them.
func (w listHooks) set() (restore func()) {
	want, no := listWant, noExtend
	listWant, noExtend = w.want, w.noExtend
	return func() { listWant, noExtend = want, no }
}

// TestBalancedMatchesReference compares Balanced and BalancedAll with the
// reference algorithm over many fleet shapes, from scratch: the same
// subsets, not merely subsets with the same properties.
func TestBalancedMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	type tc struct{ backends, count, k, index int }
	var cases []tc
	for nb := 2; nb <= 40; nb += 3 {
		for _, count := range []int{1, 2, 7, 50} {
			for _, k := range []int{1, 2, nb / 2, nb - 1} {
				if k >= 1 && k < nb {
					cases = append(cases, tc{nb, count, k, r.IntN(count)})
				}
			}
		}
	}
	// Larger shapes, including those where backends have few clients
	// (q < 5), many (q in the hundreds) and where most rows are steered
	// by capacity.
	for range 30 {
		nb := 20 + r.IntN(300)
		count := 1 + r.IntN(500)
		k := 1 + r.IntN(min(nb-1, 40))
		cases = append(cases, tc{nb, count, k, r.IntN(count)})
	}
	cases = append(cases, tc{100, 1000, 20, 999}, tc{300, 300, 10, 299}, tc{1000, 200, 20, 199}, tc{2000, 300, 3, 299})
	for _, c := range cases {
		ids := backendIDs(c.backends)
		// The reference's rows up to index, or all of them for the
		// smaller fleets, which are checked both ways.
		all := c.count <= 300
		var ref [][]string
		if all {
			ref = refAll(ids, c.k, c.count)
		} else {
			ref = make([][]string, c.index+1)
			ref[c.index] = refRow(ids, c.k, c.index, c.count)
		}
		for _, w := range wants {
			name := fmt.Sprintf("%s/%dx%d/k=%d/index=%d", w.name, c.count, c.backends, c.k, c.index)
			func() {
				defer w.set()()
				got, err := Balanced(ids, c.k, c.index, c.count)
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(ref[c.index], got); diff != "" {
					t.Fatalf("%s: Balanced (-reference +got):\n%s", name, diff)
				}
				if !all {
					return
				}
				rows, err := BalancedAll(ids, c.k, c.count)
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(ref, rows); diff != "" {
					t.Fatalf("%s: all rows (-reference +got):\n%s", name, diff)
				}
			}()
		}
	}
}

// TestBalancedChangesMatchReference follows sequences of backend-list
// changes (removals, additions, replacements, rolling restarts that
// rename a tenth of the fleet, a change of index, count or subset size),
// each given in a shuffled order, and compares every answer with the
// reference's.
func TestBalancedChangesMatchReference(t *testing.T) {
	for _, w := range wants {
		t.Run(w.name, func(t *testing.T) {
			defer w.set()()
			for seed := range uint64(6) {
				r := rand.New(rand.NewPCG(seed, 3))
				next := 0
				fresh := func() string {
					next++
					return fmt.Sprintf("10.%d.%d.%d:9090", 100+seed, next/250, next%250)
				}
				ids := backendIDs(30 + r.IntN(250))
				count := 20 + r.IntN(400)
				k := 1 + r.IntN(25)
				index := r.IntN(count)
				for step := range 25 {
					switch r.IntN(8) {
					case 0: // remove a few
						for range 1 + r.IntN(4) {
							if len(ids) > 2 {
								i := r.IntN(len(ids))
								ids = slices.Delete(ids, i, i+1)
							}
						}
					case 1: // add a few
						for range 1 + r.IntN(4) {
							ids = append(ids, fresh())
						}
					case 2: // replace one
						ids[r.IntN(len(ids))] = fresh()
					case 3: // rename a tenth
						for range max(1, len(ids)/10) {
							ids[r.IntN(len(ids))] = fresh()
						}
					case 4: // another client of the fleet
						index = r.IntN(count)
					case 5: // the fleet grows or shrinks
						count = 1 + r.IntN(500)
						index = r.IntN(count)
					case 6: // another subset size
						k = 1 + r.IntN(25)
					case 7: // nothing changes: the answer must not either
					}
					// The resolver's order is not the identity order.
					shuffled := slices.Clone(ids)
					r.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
					got, err := Balanced(shuffled, k, index, count)
					if err != nil {
						t.Fatal(err)
					}
					if diff := cmp.Diff(refRow(ids, k, index, count), got); diff != "" {
						t.Fatalf("%s, seed %d, step %d (%d backends, %d clients, k=%d, index %d): (-reference +got):\n%s",
							w.name, seed, step, len(ids), count, k, index, diff)
					}
				}
			}
		})
	}
}

// TestBalancedCrowded is TestBalancedChangesMatchReference under the
// hooks bucketMask and hashMask, at 800 to 4,800 backends: backends
// crowded into few buckets (hundreds of members each, sorted by
// sortScored, and whole buckets leaving at once) and identities that hash
// alike (scores that tie, at a list's cut and within a bucket, broken by
// identity). Each regime of subset sizes goes through every kind of
// change once, in random order: removals of a few, of more than 16 and of
// every member of a bucket, additions of a few and of a third of the
// fleet, renames, and changes of the client, of the fleet's size and of
// the subset size. Besides subsets of 1 to 25, where lists are cheap to
// extend, subsets of a quarter to a half of the fleet make lists too long
// to find by walking buckets, and subsets of most of it make the rows
// walk to its end. Each step compares the rows of every list length with
// one reference row.
func TestBalancedCrowded(t *testing.T) {
	small, long, most := 0, 1, 2 // the regimes of subset sizes
	hooks := []struct {
		name       string
		bucketMask uint16
		hashMask   uint64
		backends   int // to 1.5 times that
		regimes    []int
	}{
		{"8 buckets", 7, math.MaxUint64, 3200, []int{small, small}},
		// Every list scores the one bucket's every member.
		{"1 bucket", 0, math.MaxUint64, 800, []int{small}},
		{"256 hashes", buckets - 1, 0xff, 800, []int{small, long, most}},
		{"64 buckets", 63, math.MaxUint64, 800, []int{small, long, most}},
	}
	changes := []string{
		"remove a few", "remove 17 to 40", "empty a bucket", "add a few", "add a third",
		"rename a tenth", "another client", "the last client", "another fleet", "another subset size",
	}
	for hi, hook := range hooks {
		t.Run(hook.name, func(t *testing.T) {
			defer func(b uint16, h uint64) { bucketMask, hashMask = b, h }(bucketMask, hashMask)
			bucketMask, hashMask = hook.bucketMask, hook.hashMask
			r := rand.New(rand.NewPCG(uint64(hi), 17))
			next := 0
			fresh := func() string {
				next++
				return fmt.Sprintf("10.%d.%d.%d:9090", 200+hi, next/250, next%250)
			}
			ids := backendIDs(hook.backends + r.IntN(hook.backends/2))
			var regime, k, count, index int
			size := func() {
				switch n := len(ids); regime {
				case small:
					k = 1 + r.IntN(25)
				case long:
					k = n/4 + r.IntN(n/4)
				case most:
					// Lists extended 3 at a time (want=3) reach the
					// fleet's end 2 short of it and run out: without
					// ties, their lengths are multiples of 3.
					for len(ids)%3 != 2 {
						ids = ids[:len(ids)-1]
					}
					k = len(ids) - 1
				}
			}
			// A few clients per backend, and few clients where subsets are
			// large, which keeps both the reference's time and that of the
			// lists extended one backend at a time in bounds.
			fleet := func() {
				count = 1 + r.IntN(max(1, min(200, 4000/k)))
				index = r.IntN(count)
			}
			for _, regime = range hook.regimes {
				r.Shuffle(len(changes), func(i, j int) { changes[i], changes[j] = changes[j], changes[i] })
				for _, change := range append([]string{"regime"}, changes...) {
					switch change {
					case "regime":
						size()
						fleet()
					case "remove a few":
						for range 1 + r.IntN(4) {
							i := r.IntN(len(ids))
							ids = slices.Delete(ids, i, i+1)
						}
					case "remove 17 to 40":
						for range 17 + r.IntN(24) {
							i := r.IntN(len(ids))
							ids = slices.Delete(ids, i, i+1)
						}
					case "empty a bucket":
						// Unless the bucket is most of the fleet (one bucket).
						g := bucketOf(idHash(ids[r.IntN(len(ids))]))
						if kept := slices.DeleteFunc(slices.Clone(ids), func(id string) bool { return bucketOf(idHash(id)) == g }); len(kept) > len(ids)/2 {
							ids = kept
						}
					case "add a few":
						for range 1 + r.IntN(20) {
							ids = append(ids, fresh())
						}
					case "add a third":
						for range len(ids) / 3 {
							ids = append(ids, fresh())
						}
					case "rename a tenth":
						for range len(ids) / 10 {
							ids[r.IntN(len(ids))] = fresh()
						}
					case "another client":
						index = r.IntN(count)
					case "the last client":
						index = count - 1
					case "another fleet":
						fleet()
					case "another subset size":
						size()
						if index >= count || count > 4000/k {
							fleet()
						}
					}
					want := refRow(ids, k, index, count)
					for _, w := range wants {
						restore := w.set()
						got, err := Balanced(ids, k, index, count)
						restore()
						if err != nil {
							t.Fatal(err)
						}
						if diff := cmp.Diff(want, got); diff != "" {
							t.Fatalf("%s, %s (%d backends, %d clients, k=%d, index %d): (-reference +got):\n%s",
								w.name, change, len(ids), count, k, index, diff)
						}
					}
				}
			}
		})
	}
}

// TestBalancedHugeBucket puts more backends in one bucket than the
// positions in a member's sort key can tell apart (4,096), so that the
// walks sort that bucket by comparisons instead, and compares the rows
// with the reference's. The fleet's 250
// clients of 20 take 5,000 slots of 4,200 backends, so every backend is
// in some row, those past position 4,096 of the bucket included.
func TestBalancedHugeBucket(t *testing.T) {
	defer func(b uint16) { bucketMask = b }(bucketMask)
	bucketMask = 0
	ids := backendIDs(4200)
	const k, count = 20, 250
	all := refAll(ids, k, count)
	// Every row depends on the rows before it, so a wrong order anywhere
	// in the bucket shows in the later ones: seven rows, the last first,
	// keep the test short.
	for index := count - 1; index >= 0; index -= 37 {
		want := all[index]
		got, err := Balanced(ids, k, index, count)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("index %d: (-reference +got):\n%s", index, diff)
		}
	}
}

// TestBalancedDenseFleet compares rows with the reference over a fleet
// large enough that most of the 4,096 buckets hold a backend or a few
// (the dense walk, whose small buckets are sorted by networks).
func TestBalancedDenseFleet(t *testing.T) {
	ids := backendIDs(6000)
	const k, count = 20, 40
	all := refAll(ids, k, count)
	for index := range count {
		got, err := Balanced(ids, k, index, count)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(all[index], got); diff != "" {
			t.Fatalf("index %d: (-reference +got):\n%s", index, diff)
		}
	}
}
