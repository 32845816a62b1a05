package ringhash

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// FuzzTables builds every table over endpoint identities and weights taken
// from the fuzzer (identities come from outside, as A76 hash keys set by a
// control plane) and checks the placement contract: no panic, list order
// does not matter, and the walk offers every endpoint within its bound.
//
// ids is a comma-separated identity list; seed draws the weights and the
// shuffle.
func FuzzTables(f *testing.F) {
	f.Add("a,b,c", uint64(1), uint64(0))
	f.Add("10.0.0.1:443,10.0.0.2:443,10.0.0.3:443,10.0.0.4:443", uint64(7), uint64(1<<63))
	f.Add("only", uint64(0), uint64(42))
	f.Add(",x,,y", uint64(3), uint64(99)) // empty identities are identities too
	f.Add("dup,dup", uint64(5), uint64(1))
	f.Add("\x00,\xff,é,e\u0301", uint64(11), uint64(12345))
	f.Fuzz(func(t *testing.T, ids string, seed, key uint64) {
		names := strings.Split(ids, ",")
		if len(names) > 64 {
			names = names[:64]
		}
		rnd := rand.New(rand.NewPCG(seed, 0xf022))
		eps := make([]endpoint, len(names))
		dup := map[string]bool{}
		duplicated := false
		for i, id := range names {
			// Weights from 0 (read as 1) up to heavy, mostly small.
			w := uint32(rnd.IntN(4))
			if rnd.IntN(8) == 0 {
				w = rnd.Uint32()
			}
			eps[i] = endpoint{id: id, weight: w}
			duplicated = duplicated || dup[id]
			dup[id] = true
		}
		perm := shuffled(eps, seed)
		builders := []kind{
			// A small ring cap keeps heavy fuzzed weights from building
			// 8M-entry rings; the capped path is the one worth fuzzing.
			{"ring", func(eps []endpoint) (table, error) { return newRing(eps, 64, 1<<12) }},
			{"maglev", func(eps []endpoint) (table, error) { return newMaglev(eps, 257) }},
			kinds[2],
		}
		for _, k := range builders {
			a, err := k.build(eps)
			if duplicated {
				if err == nil {
					t.Fatalf("%s: built over duplicate identities %q", k.name, names)
				}
				continue
			}
			if err != nil {
				t.Fatalf("%s: %v", k.name, err)
			}
			b, err := k.build(perm)
			if err != nil {
				t.Fatalf("%s: permuted: %v", k.name, err)
			}
			wa, wb := walk(a, eps, key), walk(b, perm, key)
			if strings.Join(wa, "\x00") != strings.Join(wb, "\x00") {
				t.Fatalf("%s: key %#x: walk depends on list order:\n%q\n%q", k.name, key, wa, wb)
			}
			if len(wa) > a.walkBound() {
				t.Fatalf("%s: walk of %d candidates, bound %d", k.name, len(wa), a.walkBound())
			}
			seen := map[string]bool{}
			for _, id := range wa {
				seen[id] = true
			}
			if len(seen) != len(eps) {
				t.Fatalf("%s: key %#x: walk met %d of %d endpoints", k.name, key, len(seen), len(eps))
			}
		}
	})
}
