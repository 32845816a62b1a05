package ringhash

import (
	"math"
	"testing"
)

// TestHashKey pins the key and identity hash to XXH64 with seed 0, by the
// reference implementation's published vectors: changing the function
// would remap every key in every deployed fleet at once, so it must be a
// deliberate, visible change.
func TestHashKey(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want uint64
	}{
		{"", 0xef46db3751d8e999},
		{"abc", 0x44bc2cf5ad770999},
	} {
		if got := hashKey(tc.in); got != tc.want {
			t.Errorf("hashKey(%q) = %#x, want %#x", tc.in, got, tc.want)
		}
		if got := hashKeyBytes([]byte(tc.in)); got != tc.want {
			t.Errorf("hashKeyBytes(%q) = %#x, want %#x", tc.in, got, tc.want)
		}
		if got := hashIdentity(tc.in); got != tc.want {
			t.Errorf("hashIdentity(%q) = %#x, want %#x", tc.in, got, tc.want)
		}
	}
}

// TestReduce checks that reduce stays in range at its extremes and splits
// the 64-bit space evenly.
func TestReduce(t *testing.T) {
	for _, n := range []uint64{1, 2, 3, DefaultMaglevTableSize, maxMaglevTableSize, math.MaxUint32} {
		if got := reduce(math.MaxUint64, n); got != n-1 {
			t.Errorf("reduce(max, %d) = %d, want %d", n, got, n-1)
		}
		if got := reduce(0, n); got != 0 {
			t.Errorf("reduce(0, %d) = %d, want 0", n, got)
		}
	}
	// Successive values of a hash stream land evenly on 16 buckets.
	var counts [16]int
	const draws = 160000
	for i := range uint64(draws) {
		counts[reduce(derive(42, i), 16)]++
	}
	for b, c := range counts {
		// A bucket expects 10000 draws, standard deviation about 97.
		if c < 9500 || c > 10500 {
			t.Errorf("bucket %d got %d of %d draws, want about %d", b, c, draws, draws/16)
		}
	}
}
