package engine

import (
	"testing"
	"unsafe"
)

// TestEndpointLayout guards the padding arithmetic in Endpoint: the hot
// words fill the first cache line and nothing else, and the object is a
// whole number of lines, so every endpoint's hot line is aligned.
func TestEndpointLayout(t *testing.T) {
	var e Endpoint
	if got := unsafe.Offsetof(e.endpointCold); got != cacheLine {
		t.Errorf("cold fields start at offset %d, want %d", got, cacheLine)
	}
	if size := unsafe.Sizeof(e); size%cacheLine != 0 {
		t.Errorf("Endpoint is %d bytes, not a multiple of %d", size, cacheLine)
	}
	for i := 0; i < 64; i++ {
		if addr := uintptr(unsafe.Pointer(newEndpoint("x", nil, false))); addr%cacheLine != 0 {
			t.Fatalf("endpoint allocated at %#x, not on a cache line", addr)
		}
	}
}
