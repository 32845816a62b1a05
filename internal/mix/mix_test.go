package mix

import (
	"math/bits"
	"testing"
)

func TestMix64Avalanche(t *testing.T) {
	// Flipping one input bit flips about half the output bits, on average
	// over many inputs: the property the policies rely on.
	const inputs = 2000
	total := 0
	x := uint64(0x9E3779B97F4A7C15)
	for i := 0; i < inputs; i++ {
		x = x*6364136223846793005 + 1442695040888963407
		for b := 0; b < 64; b++ {
			total += bits.OnesCount64(Mix64(x) ^ Mix64(x^(1<<b)))
		}
	}
	if mean := float64(total) / (inputs * 64); mean < 31 || mean > 33 {
		t.Errorf("mean output bits flipped per input bit = %.2f, want about 32", mean)
	}
	if Mix64(0) != 0 || Mix64(1) == 1 {
		t.Errorf("Mix64(0) = %#x, Mix64(1) = %#x", Mix64(0), Mix64(1))
	}
}
