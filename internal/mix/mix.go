// Package mix holds the bit mixer the hashing policies share.
package mix

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
