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
	bits := rnd.Uint64()
	i := reduce(uint32(bits), n)
	j := reduce(uint32(bits>>32), n-1)
	if j >= i {
		j++
	}
	return i, j
}
