package engine

// MaxChoices is the most candidates a d-choice picker samples. gRFC A48
// clamps least_request's choice_count to 10: beyond that the gain over two
// choices is negligible and every pick pays for each extra read.
const MaxChoices = 10

// reduce maps a uniform 32-bit value onto [0, n) without division (Lemire's
// multiply-shift); the bias is below n/2^32, invisible at any fleet size.
func reduce(x uint32, n int) int {
	return int((uint64(x) * uint64(n)) >> 32)
}

// sampleDistinct writes d distinct indices in [0, n) into out, in the
// order drawn, and returns out[:d]. Requires 2 <= d <= MaxChoices and d < n.
//
// Each index is drawn uniformly from the ones not yet taken: draw x among
// the n-k remaining positions, then step x over the k taken indices (kept
// sorted) that are <= x. The cost is O(d^2) comparisons on a stack array,
// independent of n, with no rejection loop. The draw order is itself
// uniformly random, which matters because ties go to the first draw.
func sampleDistinct(rnd Rand, n, d int, out *[MaxChoices]int) []int {
	var sorted [MaxChoices]int
	var bits uint64
	for k := 0; k < d; k++ {
		// One 64-bit draw feeds two indices.
		if k%2 == 0 {
			bits = rnd.Uint64()
		} else {
			bits >>= 32
		}
		x := reduce(uint32(bits), n-k)
		pos := 0
		for pos < k && sorted[pos] <= x {
			x++
			pos++
		}
		copy(sorted[pos+1:k+1], sorted[pos:k])
		sorted[pos] = x
		out[k] = x
	}
	return out[:d]
}

// samplePair is sampleDistinct for d = 2, the common case, with one draw and
// no loop.
func samplePair(rnd Rand, n int) (int, int) {
	i, j, _ := samplePairSpare(rnd, n)
	return i, j
}

// samplePairSpare is samplePair that also returns spare randomness from
// the same draw: the low halves of the two multiply-shift products, which
// reduce discards. Each is uniform over its 32 bits but for its low
// log2(n) bits, whatever index it gave, so their XOR's top 24 bits are a
// uniform draw independent of the pair. A pick that needs a coin (a close
// call) takes it from there instead of drawing again.
func samplePairSpare(rnd Rand, n int) (i, j int, spare uint32) {
	return pairFrom(rnd.Uint64(), n)
}

// pairFrom is samplePairSpare given the draw, for a picker that draws
// without the Rand interface (SystemRand).
func pairFrom(bits uint64, n int) (i, j int, spare uint32) {
	lo, hi := uint64(uint32(bits))*uint64(n), uint64(uint32(bits>>32))*uint64(n-1)
	i, j = int(lo>>32), int(hi>>32)
	if j >= i {
		j++
	}
	return i, j, uint32(lo) ^ uint32(hi)
}
