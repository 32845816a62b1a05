// Package mix holds the bit mixer the hashing policies share, and the
// golden-ratio constant that feeds it.
package mix

// Golden is 2^64 divided by the golden ratio, truncated: the Weyl increment
// of SplitMix64. Multiples of it are spread over the 64-bit space as evenly
// as any additive sequence can be (the golden ratio is the number worst
// approximated by fractions, so no prefix of the sequence bunches up), and
// it is odd, so the sequence visits every value before it repeats. Adding
// or multiplying by it turns consecutive integers (indices, ranks, seeds)
// into well-spread inputs for Mix64 or for a fixed-point phase; one named
// constant keeps every user on the same value.
const Golden = 0x9E3779B97F4A7C15

// Mix64 is the SplitMix64 output function (a MurmurHash3-style finalizer):
// a bijection on 64-bit values in which every input bit flips each output
// bit with probability close to one half. Policies use it to derive many
// independent-looking values from one xxHash of an identity (ring
// positions, Maglev permutations) and to combine two hashes into a
// rendezvous score, cheaply enough for a pick's inner loop.
func Mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xBF58476D1CE4E5B9
	x ^= x >> 27
	x *= 0x94D049BB133111EB
	x ^= x >> 31
	return x
}
