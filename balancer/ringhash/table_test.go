package ringhash

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/pickwise/pickwise/internal/mix"
)

// The tests here treat the tables as pure functions over deterministic
// endpoint sets: fixed identities, fixed key sets,
// fixed shuffle seeds. Statistical checks use tolerances several standard
// deviations wide, so they state a property rather than pin one outcome.

// kind is one table algorithm, built with its default parameters.
type kind struct {
	name  string
	build func([]endpoint) (table, error)
}

// kinds lists the three tables at the defaults the balancer will use.
var kinds = []kind{
	{"ring", func(eps []endpoint) (table, error) {
		return newRing(eps, DefaultMinRingSize, DefaultMaxRingSize, DefaultMaxWeightRatio)
	}},
	{"maglev", func(eps []endpoint) (table, error) {
		return newMaglev(eps, DefaultMaglevTableSize, DefaultMaxWeightRatio)
	}},
	{"rendezvous", func(eps []endpoint) (table, error) {
		return newRendezvous(eps, DefaultMaxWeightRatio)
	}},
}

// fleet returns n endpoints of weight 1 with address-like identities.
func fleet(n int) []endpoint {
	eps := make([]endpoint, n)
	for i := range eps {
		eps[i] = endpoint{id: fmt.Sprintf("10.0.%d.%d:8080", i/250, i%250+1), weight: 1}
	}
	return eps
}

// testKeys returns the hashes of n distinct request keys.
func testKeys(n int) []uint64 {
	keys := make([]uint64, n)
	for i := range keys {
		keys[i] = hashKey(fmt.Sprintf("user-%d", i))
	}
	return keys
}

// mustBuild builds k over eps or fails the test.
func mustBuild(t testing.TB, k kind, eps []endpoint) table {
	t.Helper()
	tb, err := k.build(eps)
	if err != nil {
		t.Fatalf("%s: build over %d endpoints: %v", k.name, len(eps), err)
	}
	return tb
}

// owner is the identity of key's first candidate.
func owner(tb table, eps []endpoint, key uint64) string {
	return eps[tb.first(key).endpoint].id
}

// walk returns the identities of every candidate a walk from key offers.
func walk(tb table, eps []endpoint, key uint64) []string {
	c := tb.first(key)
	ids := []string{eps[c.endpoint].id}
	for {
		var ok bool
		if c, ok = tb.next(c); !ok {
			return ids
		}
		ids = append(ids, eps[c.endpoint].id)
	}
}

// shuffled returns a copy of eps in a random order drawn from seed.
func shuffled(eps []endpoint, seed uint64) []endpoint {
	out := slices.Clone(eps)
	rnd := rand.New(rand.NewPCG(seed, 0x5eed))
	rnd.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

// keySpaceShares returns each endpoint's exact share of the 64-bit key
// space for the ring and Maglev, by caller index, and false for rendezvous,
// whose shares can only be sampled.
func keySpaceShares(tb table) ([]float64, bool) {
	shares := make([]float64, tb.size())
	switch t := tb.(type) {
	case *ring:
		// Entry i owns the keys whose top 32 bits are in the arc
		// (hashes[i-1], hashes[i]], and entry 0 also the wrap-around past
		// the top, which uint32 subtraction computes for free.
		prev := t.hashes[len(t.hashes)-1]
		for i, h := range t.hashes {
			shares[t.owner(uint32(i))] += float64(h-prev) / math.Exp2(32)
			prev = h
		}
		if len(t.hashes) == 1 {
			shares[t.owner(0)] = 1
		}
		return shares, true
	case *maglev:
		for s := range t.m {
			shares[t.at(s)]++
		}
		for i := range shares {
			shares[i] /= float64(t.m)
		}
		return shares, true
	}
	return nil, false
}

// sampledShares returns each endpoint's share of keys.
func sampledShares(tb table, keys []uint64) []float64 {
	shares := make([]float64, tb.size())
	for _, k := range keys {
		shares[tb.first(k).endpoint]++
	}
	for i := range shares {
		shares[i] /= float64(len(keys))
	}
	return shares
}

// shares returns key-space shares where exact, sampled ones otherwise, and
// says which.
func shares(tb table, keys []uint64) ([]float64, string) {
	if s, ok := keySpaceShares(tb); ok {
		return s, "key space"
	}
	return sampledShares(tb, keys), fmt.Sprintf("%d keys", len(keys))
}

// spread returns the smallest and largest of shares, relative to 1/n.
func spread(shares []float64) (lo, hi float64) {
	n := float64(len(shares))
	lo, hi = math.Inf(1), math.Inf(-1)
	for _, s := range shares {
		lo, hi = min(lo, s*n), max(hi, s*n)
	}
	return lo, hi
}

func TestDeterminism(t *testing.T) {
	eps := fleet(25)
	eps[3].weight, eps[7].weight, eps[11].weight = 2, 5, 3
	keys := testKeys(20000)
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			base := mustBuild(t, k, eps)
			for _, seed := range []uint64{0, 1, 2, 3} {
				other := eps
				if seed > 0 {
					other = shuffled(eps, seed)
				}
				tb := mustBuild(t, k, other)
				for _, key := range keys {
					if a, b := owner(base, eps, key), owner(tb, other, key); a != b {
						t.Fatalf("seed %d: key %#x: %s in the listed order, %s in the shuffled one", seed, key, a, b)
					}
				}
				// The whole walk, not only its head, must not depend on
				// list order: the picker's fallback is part of placement.
				for _, key := range keys[:200] {
					if a, b := walk(base, eps, key), walk(tb, other, key); !slices.Equal(a, b) {
						t.Fatalf("seed %d: key %#x: walks differ:\n%v\n%v", seed, key, a, b)
					}
				}
			}
		})
	}
}

// TestMovement measures the share of keys that change endpoint when the
// fleet grows from 10 to 11 endpoints and shrinks from 11 to 10 (a middle
// endpoint leaving, not the newest), beside modulo hashing.
func TestMovement(t *testing.T) {
	keys := testKeys(100000)
	eleven := fleet(11)
	ten := eleven[:10]
	// Shrinking removes endpoint 4, so the shrink is not the grow replayed.
	shrunk := slices.Concat(eleven[:4], eleven[5:])
	ideal := 1.0 / 11

	// moved counts keys whose endpoint differs, and those that moved
	// between two endpoints present in both sets: pure churn, which a
	// consistent hash should keep near zero.
	moved := func(before, after func(uint64) string, inBoth func(string) bool) (all, between float64) {
		for _, k := range keys {
			a, b := before(k), after(k)
			if a != b {
				all++
				if inBoth(a) && inBoth(b) {
					between++
				}
			}
		}
		return all / float64(len(keys)), between / float64(len(keys))
	}
	notID := func(id string) func(string) bool { return func(s string) bool { return s != id } }
	modulo := func(eps []endpoint) func(uint64) string {
		return func(k uint64) string { return eps[k%uint64(len(eps))].id }
	}
	grow, growBetween := moved(modulo(ten), modulo(eleven), notID(eleven[10].id))
	shrink, shrinkBetween := moved(modulo(eleven), modulo(shrunk), notID(eleven[4].id))
	t.Logf("modulo:      grow 10->11 moved %5.2f%% (between survivors %5.2f%%), shrink 11->10 moved %5.2f%% (%5.2f%%); ideal %.2f%%",
		100*grow, 100*growBetween, 100*shrink, 100*shrinkBetween, 100*ideal)

	type variant struct {
		name  string
		build func([]endpoint) (table, error)
		limit float64
	}
	variants := []variant{
		{"ring", kinds[0].build, ideal + 0.02},
		{"maglev", kinds[1].build, 2 * ideal},
		{"rendezvous", kinds[2].build, ideal + 0.02},
		// The ring Envoy and grpc-go build (no per-endpoint floor), for
		// the record: its per-endpoint count shrinks as the fleet grows.
		{"envoy-sized ring", func(eps []endpoint) (table, error) {
			return buildRing(eps, DefaultMinRingSize, DefaultMaxRingSize, 1, DefaultMaxWeightRatio)
		}, 1},
	}
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			lookup := func(eps []endpoint) func(uint64) string {
				tb, err := v.build(eps)
				if err != nil {
					t.Fatal(err)
				}
				return func(k uint64) string { return owner(tb, eps, k) }
			}
			grow, growBetween := moved(lookup(ten), lookup(eleven), notID(eleven[10].id))
			shrink, shrinkBetween := moved(lookup(eleven), lookup(shrunk), notID(eleven[4].id))
			t.Logf("%-16s grow 10->11 moved %5.2f%% (between survivors %5.2f%%), shrink 11->10 moved %5.2f%% (%5.2f%%); limit %.2f%%",
				v.name+":", 100*grow, 100*growBetween, 100*shrink, 100*shrinkBetween, 100*v.limit)
			if grow > v.limit || shrink > v.limit {
				t.Errorf("moved %.2f%% growing and %.2f%% shrinking: want at most %.2f%%", 100*grow, 100*shrink, 100*v.limit)
			}
		})
	}
}

// TestBalance reports each table's spread of shares over equal endpoints.
//
// Maglev is held to within 1% of the fair share 1/n relative (0.99/n to
// 1.01/n), the paper's bound for M > 100n, on the exact key-space share of
// its slots: at M = 65537 an endpoint owns floor or ceil(M/n) slots, 0.15%
// apart at n = 100. The ring's spread is statistical, about 1/sqrt(128) =
// 9% per endpoint at the default floor of 128 entries; it is reported beside
// the ring Envoy and grpc-go build from the same defaults, for which Envoy
// documents no figure but advises setting the sizes explicitly and watching
// the min/max hashes-per-host gauges, because small rings are uneven.
// Rendezvous is sampled.
func TestBalance(t *testing.T) {
	for _, n := range []int{10, 100} {
		eps := fleet(n)
		keys := testKeys(2000 * n)
		for _, k := range append(slices.Clone(kinds), kind{"envoy-sized ring", func(eps []endpoint) (table, error) {
			return buildRing(eps, DefaultMinRingSize, DefaultMaxRingSize, 1, DefaultMaxWeightRatio)
		}}) {
			t.Run(fmt.Sprintf("%s/n=%d", k.name, n), func(t *testing.T) {
				tb := mustBuild(t, k, eps)
				s, how := shares(tb, keys)
				lo, hi := spread(s)
				t.Logf("%-16s n=%-3d entries %-6d share of %s: min %.4f x 1/n, max %.4f x 1/n",
					k.name, n, tb.stats().entries, how, lo, hi)
				switch k.name {
				case "maglev":
					if lo < 0.99 || hi > 1.01 {
						t.Errorf("shares span [%.4f, %.4f] x 1/n: want within [0.99, 1.01]", lo, hi)
					}
				case "ring":
					// About 5 standard deviations of a 128-entry share.
					if lo < 0.55 || hi > 1.45 {
						t.Errorf("shares span [%.4f, %.4f] x 1/n: want within [0.55, 1.45]", lo, hi)
					}
				case "rendezvous":
					// 2000 keys an endpoint: a standard deviation of 2.2%.
					if lo < 0.88 || hi > 1.12 {
						t.Errorf("shares span [%.4f, %.4f] x 1/n: want within [0.88, 1.12]", lo, hi)
					}
				}
			})
		}
	}
}

// TestWeights checks that an endpoint of weight 2 among nine of weight 1
// owns twice their average share, within 10%.
func TestWeights(t *testing.T) {
	eps := fleet(10)
	eps[6].weight = 2
	keys := testKeys(1000000)
	check := func(t *testing.T, tb table) {
		s, how := shares(tb, keys)
		var light float64
		for i, v := range s {
			if i != 6 {
				light += v / 9
			}
		}
		ratio := s[6] / light
		t.Logf("weight 2 owns %.4f of %s, weight 1 %.4f on average: ratio %.3f", s[6], how, light, ratio)
		if ratio < 1.8 || ratio > 2.2 {
			t.Errorf("ratio %.3f: want 2 +- 10%%", ratio)
		}
	}
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) { check(t, mustBuild(t, k, eps)) })
	}
	// At the default sizes the weight-2 endpoint has 256 ring entries, so
	// its share is itself uncertain by about 1/sqrt(256) = 6%: the 10%
	// tolerance is under two deviations there. A ring of 16384 entries
	// (1490 for the weight-2 endpoint) makes the check a real one.
	t.Run("ring/minRingSize=16384", func(t *testing.T) {
		tb, err := newRing(eps, 16384, DefaultMaxRingSize, DefaultMaxWeightRatio)
		if err != nil {
			t.Fatal(err)
		}
		check(t, tb)
	})
}

// TestWalk checks the candidate walk: it offers every endpoint within the
// table's bound, never names an endpoint out of range, and, for the ring,
// starts out in ring order as gRFC A61 expects.
func TestWalk(t *testing.T) {
	sets := map[string][]endpoint{}
	for _, n := range []int{1, 2, 3, 10, 100} {
		sets[fmt.Sprintf("n=%d", n)] = fleet(n)
	}
	// A heavy endpoint's entries crowd the table, and a light one owns
	// little of it: the cases where probing alone would take longest to
	// meet everyone.
	skewed := fleet(20)
	skewed[0].weight = 1000
	skewed[1].weight = 5000
	sets["skewed"] = skewed
	keys := testKeys(300)
	for _, k := range kinds {
		for name, eps := range sets {
			t.Run(k.name+"/"+name, func(t *testing.T) {
				tb := mustBuild(t, k, eps)
				if tb.size() != len(eps) {
					t.Fatalf("size() = %d, want %d", tb.size(), len(eps))
				}
				for _, key := range keys {
					ids := walk(tb, eps, key)
					if len(ids) > tb.walkBound() {
						t.Fatalf("key %#x: walk offered %d candidates, bound %d", key, len(ids), tb.walkBound())
					}
					seen := map[string]bool{}
					for _, id := range ids {
						seen[id] = true
					}
					if len(seen) != len(eps) {
						t.Fatalf("key %#x: walk met %d of %d endpoints: %v", key, len(seen), len(eps), ids)
					}
					for i := 1; i < len(ids); i++ {
						if ids[i] == ids[i-1] {
							t.Fatalf("key %#x: walk offered %s twice in a row: %v", key, ids[i], ids)
						}
					}
					if k.name == "rendezvous" && len(ids) != len(eps) {
						t.Fatalf("key %#x: rendezvous walk offered %d candidates, want each of %d once", key, len(ids), len(eps))
					}
				}
			})
		}
	}

	t.Run("ring order", func(t *testing.T) {
		eps := fleet(10)
		r, err := newRing(eps, DefaultMinRingSize, DefaultMaxRingSize, DefaultMaxWeightRatio)
		if err != nil {
			t.Fatal(err)
		}
		for _, key := range keys {
			// The second candidate is the owner of the first entry
			// clockwise whose owner differs from the first candidate.
			c := r.first(key)
			i := r.locate(key)
			for r.owner(i) == c.endpoint {
				i = (i + 1) % uint32(len(r.hashes))
			}
			c, _ = r.next(c)
			if c.endpoint != r.owner(i) {
				t.Fatalf("key %#x: second candidate %d, want %d, the next owner clockwise", key, c.endpoint, r.owner(i))
			}
		}
	})

	t.Run("rendezvous order", func(t *testing.T) {
		// The walk is the ranking by score, highest first, ties to the
		// lower identity, computed here by brute force: this also checks
		// that the weighted lookup's pruning never changes the answer.
		for _, weighted := range []bool{false, true} {
			eps := fleet(30)
			if weighted {
				eps[2].weight, eps[9].weight = 7, 2
			}
			tb, err := newRendezvous(eps, DefaultMaxWeightRatio)
			if err != nil {
				t.Fatal(err)
			}
			for _, key := range keys {
				type scored struct {
					id string
					x  uint64  // the pair hash: the score with equal weights
					s  float64 // the weighted score
				}
				ranking := make([]scored, len(eps))
				for i, e := range eps {
					x := mix.Mix64(key ^ hashIdentity(e.id))
					ranking[i] = scored{e.id, x, weightedScore(x, 1/float64(e.weight))}
				}
				slices.SortFunc(ranking, func(a, b scored) int {
					switch {
					case weighted && a.s != b.s:
						return cmp.Compare(b.s, a.s)
					case !weighted && a.x != b.x:
						return cmp.Compare(b.x, a.x)
					}
					return strings.Compare(a.id, b.id)
				})
				want := make([]string, len(ranking))
				for i, r := range ranking {
					want[i] = r.id
				}
				if got := walk(tb, eps, key); !slices.Equal(got, want) {
					t.Fatalf("weighted %v, key %#x: walk\n%v\nwant the ranking\n%v", weighted, key, got, want)
				}
			}
		}
	})
}

// TestWalkAllocs checks that neither a lookup nor a whole walk allocates,
// through the table interface as the picker will call it, on every path
// (benchKinds adds weighted rendezvous).
func TestWalkAllocs(t *testing.T) {
	eps := fleet(100)
	keys := testKeys(64)
	for _, k := range benchKinds {
		t.Run(k.name, func(t *testing.T) {
			tb := mustBuild(t, k, eps)
			var sink int32
			i := 0
			allocs := testing.AllocsPerRun(100, func() {
				c := tb.first(keys[i%len(keys)])
				i++
				for ok := true; ok; c, ok = tb.next(c) {
					sink += c.endpoint
				}
			})
			if allocs != 0 {
				t.Errorf("a full walk allocates %v times, want 0", allocs)
			}
			_ = sink
		})
	}
}

func TestOneEndpoint(t *testing.T) {
	eps := fleet(1)
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			tb := mustBuild(t, k, eps)
			for _, key := range testKeys(1000) {
				if ids := walk(tb, eps, key); !slices.Equal(ids, []string{eps[0].id}) {
					t.Fatalf("key %#x: walk %v, want the one endpoint once", key, ids)
				}
			}
		})
	}
}

func TestDuplicateIdentity(t *testing.T) {
	eps := slices.Concat(fleet(3), fleet(1))
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			_, err := k.build(eps)
			if err == nil || !strings.Contains(err.Error(), "duplicate") || !strings.Contains(err.Error(), eps[0].id) {
				t.Fatalf("build with %q twice: error %v, want one naming the duplicate", eps[0].id, err)
			}
		})
	}
}

func TestNoEndpoints(t *testing.T) {
	for _, k := range kinds {
		if _, err := k.build(nil); err != errNoEndpoints {
			t.Errorf("%s: build over no endpoints: error %v, want %v", k.name, err, errNoEndpoints)
		}
	}
}

// TestZeroWeight checks that weight 0 places exactly like weight 1.
func TestZeroWeight(t *testing.T) {
	zero, one := fleet(10), fleet(10)
	zero[3].weight, zero[8].weight = 0, 0
	one[5].weight = 3 // some other weight, so the weighted paths run
	zero[5].weight = 3
	keys := testKeys(20000)
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			a, b := mustBuild(t, k, zero), mustBuild(t, k, one)
			for _, key := range keys {
				if x, y := owner(a, zero, key), owner(b, one, key); x != y {
					t.Fatalf("key %#x: %s with weight 0, %s with weight 1", key, x, y)
				}
			}
		})
	}
}

// TestLargeWeights checks that extreme weights, with the weight cap lifted
// (maxWeightRatio 2^32-1), keep the ring within its cap with every endpoint
// on it, and Maglev with every endpoint in it.
func TestLargeWeights(t *testing.T) {
	eps := fleet(10)
	eps[0].weight = math.MaxUint32
	eps[1].weight = 1 << 20
	const noCap = math.MaxUint32

	t.Run("ring counts", func(t *testing.T) {
		// Building an 8M-entry ring costs 50 MB; the counts alone show
		// the cap holding.
		weights := make([]uint32, len(eps))
		for i, e := range eps {
			weights[i] = e.weight
		}
		for _, maxSize := range []uint64{DefaultMaxRingSize, maxRingSizeLimit} {
			counts, total := ringCounts(weights, 1, DefaultMinRingSize, maxSize, ringTargetEntries)
			var sum uint64
			for i, c := range counts {
				if c == 0 {
					t.Errorf("max %d: endpoint %d has no entries", maxSize, i)
				}
				sum += uint64(c)
			}
			if sum != total || total > maxSize {
				t.Errorf("max %d: counts sum to %d, reported %d: want equal and at most %d", maxSize, sum, total, maxSize)
			}
			t.Logf("max %d: counts %v, total %d", maxSize, counts, total)
		}
	})

	t.Run("ring", func(t *testing.T) {
		const maxSize = 1 << 16
		r, err := newRing(eps, DefaultMinRingSize, maxSize, noCap)
		if err != nil {
			t.Fatal(err)
		}
		if n := len(r.hashes); n > maxSize {
			t.Errorf("ring has %d entries, cap %d", n, maxSize)
		}
		entries := make([]int, len(eps))
		for i := range r.hashes {
			entries[r.owner(uint32(i))]++
		}
		for i, n := range entries {
			if n == 0 {
				t.Errorf("endpoint %d (weight %d) has no entry", i, eps[i].weight)
			}
		}
		t.Logf("entries per endpoint under a cap of %d: %v", maxSize, entries)
	})

	t.Run("maglev", func(t *testing.T) {
		tb, err := newMaglev(eps, DefaultMaglevTableSize, noCap)
		if err != nil {
			t.Fatal(err)
		}
		s, _ := keySpaceShares(tb)
		for i, v := range s {
			if v == 0 {
				t.Errorf("endpoint %d (weight %d) has no slot", i, eps[i].weight)
			}
		}
	})

	t.Run("rendezvous", func(t *testing.T) {
		tb, err := newRendezvous(eps, noCap)
		if err != nil {
			t.Fatal(err)
		}
		// The heavy endpoint wins nearly every key, but the walk still
		// reaches everyone.
		for _, key := range testKeys(100) {
			if ids := walk(tb, eps, key); len(ids) != len(eps) {
				t.Fatalf("key %#x: walk of %d, want %d", key, len(ids), len(eps))
			}
		}
	})
}

func TestBuildErrors(t *testing.T) {
	eps := fleet(3)
	for _, tc := range []struct {
		name  string
		build func() error
		want  string
	}{
		{"ring min 0", func() error { _, err := newRing(eps, 0, 10, DefaultMaxWeightRatio); return err }, "minRingSize 0"},
		{"ring min > max", func() error { _, err := newRing(eps, 100, 10, DefaultMaxWeightRatio); return err }, "minRingSize 100"},
		{"ring max over limit", func() error { _, err := newRing(eps, 1, maxRingSizeLimit+1, DefaultMaxWeightRatio); return err }, "maxRingSize 8388609"},
		{"ring more endpoints than max", func() error { _, err := newRing(eps, 1, 2, DefaultMaxWeightRatio); return err }, "3 endpoints"},
		{"maglev not prime", func() error { _, err := newMaglev(eps, 65536, DefaultMaxWeightRatio); return err }, "must be prime"},
		{"maglev too small", func() error { _, err := newMaglev(eps, 2, DefaultMaxWeightRatio); return err }, "3 endpoints"},
		{"maglev too large", func() error { _, err := newMaglev(eps, maxMaglevTableSize+2, DefaultMaxWeightRatio); return err }, fmt.Sprintf("tableSize %d", maxMaglevTableSize+2)},
		{"ring ratio 0", func() error { _, err := newRing(eps, 1, 10, 0); return err }, "maxWeightRatio 0"},
		{"maglev ratio 0", func() error { _, err := newMaglev(eps, 3, 0); return err }, "maxWeightRatio 0"},
		{"rendezvous ratio 0", func() error { _, err := newRendezvous(eps, 0); return err }, "maxWeightRatio 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.build()
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "pickwise_ring_hash: ") {
				t.Fatalf("error %v, want one prefixed with the policy name and containing %q", err, tc.want)
			}
		})
	}
	// Small tables still work at their exact limits.
	if _, err := newRing(eps, 1, 3, DefaultMaxWeightRatio); err != nil {
		t.Errorf("ring with maxRingSize = endpoints: %v", err)
	}
	if _, err := newMaglev(eps, 3, DefaultMaxWeightRatio); err != nil {
		t.Errorf("maglev with tableSize = endpoints: %v", err)
	}
}

// TestStats reports each table's memory and build time at n = 1000, the
// figures the policy documentation quotes, and checks that a ring entry,
// index included, costs at most 8 bytes (6.5 with 16-bit owners).
func TestStats(t *testing.T) {
	eps := fleet(1000)
	for _, k := range kinds {
		s := mustBuild(t, k, eps).stats()
		t.Logf("%v", s)
		if s.endpoints != len(eps) {
			t.Errorf("%s: stats report %d endpoints, want %d", k.name, s.endpoints, len(eps))
		}
		if k.name == "ring" && s.bytesPerEntry() > 8 {
			t.Errorf("ring costs %.1f bytes per entry, want at most 8", s.bytesPerEntry())
		}
	}
}

// TestSortedWeights checks the radix sort behind the median against the
// standard sort, over sets that exercise each byte being shared or not.
func TestSortedWeights(t *testing.T) {
	rnd := rand.New(rand.NewPCG(5, 6))
	for _, tc := range []struct {
		name string
		w    func() uint32
	}{
		{"1..100", func() uint32 { return 1 + rnd.Uint32N(100) }},
		{"equal", func() uint32 { return 7 }},
		{"any", func() uint32 { return rnd.Uint32() }},
		{"top byte only", func() uint32 { return rnd.Uint32N(4) << 24 }},
		{"two bytes", func() uint32 { return rnd.Uint32N(1 << 16) }},
	} {
		for _, n := range []int{1, 255, 256, 1000, 5000} {
			ws := make([]uint32, n)
			for i := range ws {
				ws[i] = tc.w()
			}
			in := slices.Clone(ws)
			want := slices.Clone(ws)
			slices.Sort(want)
			if got := sortedWeights(ws); !slices.Equal(got, want) {
				t.Errorf("%s, n=%d: sortedWeights differs from slices.Sort", tc.name, n)
			}
			if !slices.Equal(ws, in) {
				t.Errorf("%s, n=%d: sortedWeights changed its input", tc.name, n)
			}
		}
	}
}
