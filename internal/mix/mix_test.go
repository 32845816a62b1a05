package mix

import (
	"math/big"
	"math/bits"
	"testing"
)

func TestMix64Avalanche(t *testing.T) {
	// Flipping one input bit flips about half the output bits, on average
	// over many inputs: the property the policies rely on.
	const inputs = 2000
	total := 0
	x := uint64(Golden)
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

// TestGolden checks the constant against its definition, 2^64 divided by
// the golden ratio (1+sqrt(5))/2 and truncated, and that it is odd, which
// the full period of the Weyl sequence needs.
func TestGolden(t *testing.T) {
	const prec = 256
	phi := new(big.Float).SetPrec(prec).Sqrt(big.NewFloat(5).SetPrec(prec))
	phi.Add(phi, big.NewFloat(1)).Quo(phi, big.NewFloat(2))
	q := new(big.Float).SetPrec(prec).SetInt(new(big.Int).Lsh(big.NewInt(1), 64))
	q.Quo(q, phi)
	want, _ := q.Uint64()
	if Golden != want {
		t.Errorf("Golden = %#x, want floor(2^64/phi) = %#x", uint64(Golden), want)
	}
	if Golden%2 != 1 {
		t.Errorf("Golden = %#x is even", uint64(Golden))
	}
}
