package ringhash

import (
	"fmt"
	"testing"
)

// benchSink keeps the compiler from discarding benchmarked lookups.
var benchSink int32

// benchKinds is kinds plus rendezvous with unequal weights, whose lookup
// takes a logarithm per endpoint where the equal-weight one compares raw
// hashes.
var benchKinds = append(kinds[:len(kinds):len(kinds)], kind{"rendezvous-weighted", func(eps []endpoint) (table, error) {
	eps = append([]endpoint(nil), eps...)
	eps[0].weight = 2
	return newRendezvous(eps)
}})

// BenchmarkLookup measures a key's first candidate, the whole cost of a
// pick that needs no fallback, through the table interface as the picker
// will call it.
func BenchmarkLookup(b *testing.B) { benchWalk(b, 0) }

// BenchmarkWalk measures the first candidate and three fallbacks, what a
// bounded-load pick costs when the key's endpoint and two more are full.
func BenchmarkWalk(b *testing.B) { benchWalk(b, 3) }

// benchWalk measures a key's first candidate and the next steps ones, for
// every table kind at 10, 100 and 1000 endpoints.
func benchWalk(b *testing.B, steps int) {
	keys := testKeys(4096)
	for _, k := range benchKinds {
		for _, n := range []int{10, 100, 1000} {
			b.Run(fmt.Sprintf("%s/n=%d", k.name, n), func(b *testing.B) {
				tb := mustBuild(b, k, fleet(n))
				b.ReportAllocs()
				var sink int32
				i := 0
				for b.Loop() {
					c := tb.first(keys[i&(len(keys)-1)])
					i++
					for range steps {
						c, _ = tb.next(c)
					}
					sink += c.endpoint
				}
				benchSink = sink
			})
		}
	}
}

// BenchmarkBuild measures building each table over 1000 endpoints at its
// defaults, and reports its memory: B/entry (all of the table's slices over
// its entries), B/table and entries.
func BenchmarkBuild(b *testing.B) {
	eps := fleet(1000)
	for _, k := range benchKinds {
		b.Run(fmt.Sprintf("%s/n=%d", k.name, len(eps)), func(b *testing.B) {
			b.ReportAllocs()
			var s tableStats
			for b.Loop() {
				s = mustBuild(b, k, eps).stats()
			}
			b.ReportMetric(s.bytesPerEntry(), "B/entry")
			b.ReportMetric(float64(s.bytes), "B/table")
			b.ReportMetric(float64(s.entries), "entries")
		})
	}
}
