package engine

import "testing"

func TestHealthyBitsIsHealthyPacked(t *testing.T) {
	if got := healthy.pack(); got != healthyBits {
		t.Fatalf("healthy.pack() = %#x, healthyBits = %#x", got, uint64(healthyBits))
	}
}
