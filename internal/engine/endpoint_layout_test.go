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

// TestWeightedRRLayout: a WeightedRR picker, which every pick reads, is
// one cache line, and so is each of its cursors, which picks write, so
// that each is allocated on a line of its own and no neighbour's writes
// move it between cores.
func TestWeightedRRLayout(t *testing.T) {
	if size := unsafe.Sizeof(WeightedRR{}); size != cacheLine {
		t.Errorf("WeightedRR is %d bytes, want %d", size, cacheLine)
	}
	if size := unsafe.Sizeof(cursor{}); size != cacheLine {
		t.Errorf("a cursor is %d bytes, want %d", size, cacheLine)
	}
}

// TestReadySize guards what a publish copies of each READY endpoint and a
// pick reads in place: two words, one of them a pointer (the endpoint's
// child picker is on the endpoint), four Ready to a cache line on 64-bit
// machines, so that the array over 10k endpoints is 160 KB.
func TestReadySize(t *testing.T) {
	if size, want := unsafe.Sizeof(Ready{}), 2*unsafe.Sizeof(uintptr(0)); size != want {
		t.Errorf("Ready is %d bytes, want %d", size, want)
	}
}
