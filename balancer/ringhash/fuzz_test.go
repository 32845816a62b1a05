package ringhash

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/pickwise/pickwise/internal/testkit"
	"google.golang.org/grpc/metadata"
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
			{"ring", func(eps []endpoint) (table, error) { return newRing(eps, 64, 1<<12, DefaultMaxWeightRatio) }},
			{"maglev", func(eps []endpoint) (table, error) { return newMaglev(eps, 257, DefaultMaxWeightRatio) }},
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

// FuzzParseConfig checks that every input is either rejected with an error
// that names the policy, or yields a valid config that a balancer runs
// with: keyed picks over three endpoints succeed and stick.
func FuzzParseConfig(f *testing.F) {
	for _, seed := range []string{
		`{}`, ``, `null`, `[]`, `{"table": "ring"}`, `{"table": "maglev"}`, `{"table": "rendezvous"}`, `{"table": "x"}`,
		`{"minRingSize": 1, "maxRingSize": 1}`, `{"minRingSize": 8388608}`, `{"maxRingSize": 8388609}`, `{"minRingSize": 5, "maxRingSize": 4}`,
		`{"table": "maglev", "maglevTableSize": 3}`, `{"maglevTableSize": 4}`, `{"maglevTableSize": 5000011}`, `{"maglevTableSize": 262139}`,
		`{"maxWeightRatio": 1}`, `{"maxWeightRatio": 4294967296}`, `{"table": "maglev", "maxWeightRatio": 2}`,
		`{"requestHashHeader": "X-Key"}`, `{"requestHashHeader": "a-bin"}`, `{"requestHashHeader": ":authority"}`, `{"requestHashHeader": "é"}`,
		`{"balanceFactor": 1}`, `{"balanceFactor": 1.25}`, `{"balanceFactor": 0.99}`, `{"balanceFactor": -0}`, `{"balanceFactor": 1e308}`,
		`{"table": "rendezvous", "balanceFactor": 2, "requestHashHeader": "k"}`, `{"unknown": 1}`, `{} {}`, `{"table": null}`,
		`{"strictAffinity": true}`, `{"ejection": {"enabled": false}}`, `{"ejection": {"maxEjectionPercent": 0}}`,
		`{"failurePenalty": {"codes": ["UNAVAILABLE", "INVALID_ARGUMENT"]}}`, `{"failurePenalty": {"codes": ["OK"]}}`, `{"failurePenalty": {"codes": []}}`,
	} {
		f.Add(seed)
	}
	as := testkit.Addrs(3)
	f.Fuzz(func(t *testing.T, in string) {
		parsed := testkit.FuzzParse(t, Name, ParseConfig, in)
		if parsed == nil {
			return
		}
		cfg := parsed.(*Config)
		switch {
		case cfg.Table != TableRing && cfg.Table != TableMaglev && cfg.Table != TableRendezvous:
			t.Fatalf("accepted table %q", cfg.Table)
		case cfg.MinRingSize < 1 || cfg.MinRingSize > cfg.MaxRingSize || cfg.MaxRingSize > maxRingSizeLimit:
			t.Fatalf("accepted ring sizes %d, %d", cfg.MinRingSize, cfg.MaxRingSize)
		case !isPrime(cfg.MaglevTableSize) || cfg.MaglevTableSize > maxMaglevTableSize:
			t.Fatalf("accepted maglevTableSize %d", cfg.MaglevTableSize)
		case cfg.MaxWeightRatio < 1 || cfg.MaxWeightRatio > math.MaxUint32:
			t.Fatalf("accepted maxWeightRatio %d", cfg.MaxWeightRatio)
		case cfg.BalanceFactor != 0 && !(cfg.BalanceFactor >= 1):
			t.Fatalf("accepted balanceFactor %v", cfg.BalanceFactor)
		case validateHeaderKey(cfg.RequestHashHeader) != nil || strings.HasSuffix(cfg.RequestHashHeader, "-bin"):
			t.Fatalf("accepted requestHashHeader %q", cfg.RequestHashHeader)
		}
		if cfg.MinRingSize > 1<<16 || cfg.MaglevTableSize > 1<<17 {
			// Valid, but a table of millions of entries per input would
			// slow the fuzzer to a crawl; the tables' own tests cover
			// large sizes.
			return
		}
		h := start(t, in, testkit.Endpoints(as))
		for i := range 20 {
			k := fmt.Sprint("k", i)
			if a, b := pickKey(t, h, k), pickKey(t, h, k); a != b {
				t.Fatalf("key %q picked %s then %s", k, a, b)
			}
		}
	})
}

// FuzzRequestHash checks the request hash header decoder on any header
// values (they come from callers, possibly relayed from outside): no
// panic, and several values hash exactly as their ","-join does, which is
// grpc-go's rule (gRFC A76). vals is split on "\n" into values.
func FuzzRequestHash(f *testing.F) {
	f.Add("user-1")
	f.Add("a\nb")
	f.Add("")
	f.Add("\n\n")
	f.Add("é,x\n\x00")
	f.Fuzz(func(t *testing.T, vals string) {
		vs := strings.Split(vals, "\n")
		md := metadata.MD{}
		md.Append("x-key", vs...)
		ctx := metadata.NewOutgoingContext(context.Background(), md)
		h, ok := requestHash(ctx, "x-key")
		if !ok {
			t.Fatalf("no key from %q", vs)
		}
		if want := hashKey(strings.Join(vs, ",")); h != want {
			t.Fatalf("hash of %q = %#x, want that of the joined values %#x", vs, h, want)
		}
		if _, ok := requestHash(ctx, "other"); ok {
			t.Fatalf("a key from a header that is not set")
		}
		if h2, ok := requestHash(WithKey(ctx, vals), "x-key"); !ok || h2 != hashKey(vals) {
			t.Fatalf("WithKey did not win over the header")
		}
	})
}
