package subsetting

import (
	"slices"
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

// FuzzNormalize compares the radix sort of string identities with
// sorting by comparisons. The lines of the input are the identities; a
// short list is padded with copies of its lines, some cut short and
// some with a zero byte or a letter appended, so that the radix sort
// (which takes lists of minRadix or more) sees the prefixes, ties and
// duplicates the fuzzer finds.
func FuzzNormalize(f *testing.F) {
	f.Add("10.0.0.1:80\n10.0.0.10:80\n10.0.0.1:8\n10.0.0.1:80\x00")
	f.Add("a\na\x00\na\x00\x00\nab\n")
	f.Fuzz(func(t *testing.T, list string) {
		lines := strings.Split(list, "\n")
		ids := slices.Clone(lines)
		for i := 0; len(ids) < 2*minRadix; i++ {
			s := lines[i%len(lines)]
			switch i % 4 {
			case 1:
				s = s[:len(s)/2]
			case 2:
				s += "\x00"
			case 3:
				s += string(rune('a' + i%3))
			}
			ids = append(ids, s)
		}
		want := slices.Clone(ids)
		slices.Sort(want)
		want = slices.Compact(want)
		if got := Normalize(ids); !slices.Equal(got, want) {
			t.Fatalf("Normalize(%q) = %q, want %q", ids, got, want)
		}
	})
}
