package engine

import (
	"testing"
	"unsafe"
)

// TestEndpointLayout guards the padding arithmetic in Endpoint: the hot
// words fill the first cache line and nothing else, the warm ones the
// second, and the object is those two lines, so every endpoint's hot line
// is aligned.
func TestEndpointLayout(t *testing.T) {
	var e Endpoint
	if got := unsafe.Offsetof(e.endpointWarm); got != cacheLine {
		t.Errorf("warm fields start at offset %d, want %d", got, cacheLine)
	}
	if size := unsafe.Sizeof(e); size != 2*cacheLine {
		t.Errorf("Endpoint is %d bytes, want %d", size, 2*cacheLine)
	}
	for i := 0; i < 64; i++ {
		if addr := uintptr(unsafe.Pointer(newEndpoint("x", nil, false))); addr%cacheLine != 0 {
			t.Fatalf("endpoint allocated at %#x, not on a cache line", addr)
		}
	}
}

// TestReadySize guards what every picker copies of each endpoint: two
// Ready to a cache line, so that a publish at 10k endpoints copies 320 KB
// and a pick reads half a line of the array.
func TestReadySize(t *testing.T) {
	if size := unsafe.Sizeof(Ready{}); size != cacheLine/2 {
		t.Errorf("Ready is %d bytes, want %d", size, cacheLine/2)
	}
}
