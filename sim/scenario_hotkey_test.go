package sim

import "testing"

func TestHotKey(t *testing.T) {
	r, err := HotKey(testScale())
	if err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + r.Table.String())
	for i, p := range r.Policies {
		if r.Failed[i] != 0 {
			t.Errorf("%s: %d requests failed, want none", p, r.Failed[i])
		}
		// The hottest key alone is ~15% of requests, so its backend gets
		// about 0.15 + 0.85/10 = 23.5%, 2.35 times the mean; measured:
		// 2.86 for modulo hash, 2.40 for ring_hash (other keys add to it).
		if r.MaxOverMean[i] <= 1.5 {
			t.Errorf("%s: busiest backend at %.2f times the mean, want > 1.5 with a hot key", p, r.MaxOverMean[i])
		}
	}
	// Plain hashing always sends a key to its first choice. For ring_hash
	// this also shows that it hashes the key the request carries: with a
	// random hash a request would meet its key's first choice 1 time in 10.
	for i, p := range r.Policies {
		if p != "modulo hash" && p != "ring_hash" {
			continue
		}
		if r.FirstChoice[i] != 1 {
			t.Errorf("%s: %.4f of requests on their key's first choice, want all", p, r.FirstChoice[i])
		}
	}
}

// TestRingHashKeyed checks that grpc-go's ring_hash reads the key from
// HashHeader: one key always lands on one backend, and keys spread over
// all of them.
func TestRingHashKeyed(t *testing.T) {
	var ring Policy
	for _, p := range hashPolicies() {
		if p.Name == "ring_hash" {
			ring = p
		}
	}
	in, err := newClient(ring, 1, make([]Backend, 10), backendIDs(10))
	if err != nil {
		t.Fatal(err)
	}
	defer in.close()
	used := map[int]bool{}
	for k := range 200 {
		first, err := pickKey(in, keyID(k))
		if err != nil {
			t.Fatal(err)
		}
		used[first] = true
		for range 5 {
			if again, err := pickKey(in, keyID(k)); err != nil || again != first {
				t.Fatalf("key %d: picked %d, then %d (%v)", k, first, again, err)
			}
		}
	}
	if len(used) != 10 {
		t.Errorf("200 keys used %d of 10 backends", len(used))
	}
}
