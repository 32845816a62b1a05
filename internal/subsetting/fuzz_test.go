package subsetting

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// FuzzBalanced feeds arbitrary backend identities (one per line) and
// sizes: no input may panic, and the balanced mode must keep every row at
// min(k, backends) distinct backends with a spread of at most 1, and give
// exactly the reference algorithm's rows.
func FuzzBalanced(f *testing.F) {
	f.Add("a\nb\nc\nd", uint8(2), uint8(5))
	f.Add("10.0.0.1:80\n10.0.0.1:80\n\n10.0.0.2:80", uint8(1), uint8(3))
	f.Add("x", uint8(3), uint8(1))
	f.Fuzz(func(t *testing.T, list string, k, clients uint8) {
		backends := strings.Split(list, "\n")
		size, count := int(k%16)+1, int(clients%64)+1
		rows, err := BalancedAll(backends, size, count)
		if err != nil {
			t.Fatal(err)
		}
		distinct := len(Normalize(backends))
		checkRows(t, rows, min(size, distinct))
		if lo, hi := spread(Normalize(backends), rows); hi-lo > 1 {
			t.Fatalf("spread %d", hi-lo)
		}
		if size < distinct {
			if diff := cmp.Diff(refAll(backends, size, count), rows); diff != "" {
				t.Fatalf("(-reference +BalancedAll):\n%s", diff)
			}
		}
	})
}
