package subsetting

import (
	"fmt"
	"slices"
	"testing"
)

type size struct{ clients, backends, subset int }

func (s size) String() string {
	return fmt.Sprintf("%dx%d/k=%d", s.clients, s.backends, s.subset)
}

// The two fleet shapes the policy's documentation quotes, plus the
// simulator's (sim/scenario_subset.go).
var sizes = []size{{300, 300, 10}, {1000, 100, 20}, {300, 100, 10}}

// churnBound is the most churn, as a multiple of the minimum, that the
// balanced mode is allowed per fleet shape; BalancedAll's doc comment
// gives the measured values (a little headroom here so that an unrelated
// change of hash does not fail the test, not enough to hide a regression).
func churnBound(sz size, change string) float64 {
	switch q := sz.clients * sz.subset / sz.backends; {
	case q < 30: // few clients per backend: capacity steering dominates
		return 7
	case q < 100:
		return 4
	case change == "replace":
		return 2.5
	}
	return 2
}

// TestSpreadAndChurn logs, for every algorithm, the clients per backend and
// the (client, backend) pairs that change when one backend is removed,
// added or replaced, against the minimum: the removed backend's clients
// (remove), the added backend's (add), or the larger of the two (replace:
// every row keeps its size, so pairs dropped equal pairs gained).
func TestSpreadAndChurn(t *testing.T) {
	for _, sz := range sizes {
		ids := backendIDs(sz.backends)
		removed := ids[sz.backends/2]
		added := "10.9.9.9:8080"
		without := slices.DeleteFunc(slices.Clone(ids), func(s string) bool { return s == removed })
		with := append(slices.Clone(ids), added)
		replaced := append(slices.Clone(without), added)
		for _, a := range algos {
			before, err := a.all(ids, sz.subset, sz.clients)
			if err != nil {
				t.Fatal(err)
			}
			checkRows(t, before, sz.subset)
			lo, hi := spread(ids, before)
			t.Logf("%-14v %-10s connections per backend: min %3d max %3d spread %2d", sz, a.name, lo, hi, hi-lo)
			if a.name == "balanced" && hi-lo > 1 {
				t.Errorf("%v %s: spread %d, want <= 1", sz, a.name, hi-lo)
			}
			for _, ch := range []struct {
				name string
				list []string
				min  func(after [][]string) int
			}{
				{"remove", without, func([][]string) int { return load(before, removed) }},
				{"add", with, func(after [][]string) int { return load(after, added) }},
				{"replace", replaced, func(after [][]string) int { return max(load(before, removed), load(after, added)) }},
			} {
				after, err := a.all(ch.list, sz.subset, sz.clients)
				if err != nil {
					t.Fatal(err)
				}
				checkRows(t, after, sz.subset)
				lo, hi := spread(ch.list, after)
				c, m := churn(before, after), ch.min(after)
				ratio := float64(c) / float64(max(m, 1))
				t.Logf("%-14v %-10s %-7s changed pairs %5d, minimum %4d, ratio %6.2f, spread after %2d", sz, a.name, ch.name, c, m, ratio, hi-lo)
				switch a.name {
				case "balanced":
					if hi-lo > 1 {
						t.Errorf("%v %s %s: spread after %d, want <= 1", sz, a.name, ch.name, hi-lo)
					}
					if b := churnBound(sz, ch.name); ratio > b {
						t.Errorf("%v %s %s: churn %d is %.2fx the minimum %d, want <= %.1fx", sz, a.name, ch.name, c, ratio, m, b)
					}
				case "stable":
					// Rendezvous moves exactly the pairs it must: the
					// removed backend's and the added backend's.
					want := 0
					if ch.name != "add" {
						want += load(before, removed)
					}
					if ch.name != "remove" {
						want += load(after, added)
					}
					if ch.name == "replace" {
						// A client that had the removed backend and
						// ranks the new one in its subset changes one pair.
						want = 0
						for i := range before {
							if slices.Contains(before[i], removed) || slices.Contains(after[i], added) {
								want++
							}
						}
					}
					if c != want {
						t.Errorf("%v %s %s: churn %d, want exactly %d", sz, a.name, ch.name, c, want)
					}
				}
			}
		}
	}
}

// checkRows fails unless every row has k distinct backends (or all of them
// when there are fewer).
func checkRows(t *testing.T, rows [][]string, k int) {
	t.Helper()
	for i, row := range rows {
		if len(row) != k {
			t.Fatalf("client %d: %d backends, want %d", i, len(row), k)
		}
		if !slices.IsSorted(row) || len(slices.Compact(slices.Clone(row))) != k {
			t.Fatalf("client %d: subset %v not sorted and distinct", i, row)
		}
	}
}

// TestChurnSpread repeats the removal for several backends, since one
// removal is one sample: the log gives the mean and worst churn of the
// balanced mode, as a multiple of the minimum, and each must stay within
// the bound.
func TestChurnSpread(t *testing.T) {
	for _, sz := range sizes[:2] {
		ids := backendIDs(sz.backends)
		before, err := BalancedAll(ids, sz.subset, sz.clients)
		if err != nil {
			t.Fatal(err)
		}
		var sum, worst float64
		const samples = 8
		for i := range samples {
			removed := ids[i*sz.backends/samples]
			without := slices.DeleteFunc(slices.Clone(ids), func(s string) bool { return s == removed })
			after, err := BalancedAll(without, sz.subset, sz.clients)
			if err != nil {
				t.Fatal(err)
			}
			if lo, hi := spread(without, after); hi-lo > 1 {
				t.Errorf("%v without %s: spread %d", sz, removed, hi-lo)
			}
			r := float64(churn(before, after)) / float64(load(before, removed))
			sum += r
			worst = max(worst, r)
			if b := churnBound(sz, "remove"); r > b {
				t.Errorf("%v without %s: churn %.2fx the minimum, want <= %.1fx", sz, removed, r, b)
			}
		}
		t.Logf("%-14v balanced, %d removals: churn mean %.2fx, worst %.2fx the minimum", sz, samples, sum/samples, worst)
	}
}

// BenchmarkChurn measures, rather than times, the churn of the balanced
// mode in fleets too large for the tests, where the buckets hold several
// backends each: 10,000 clients with subsets of 10 or 20 over 5,000 to
// 50,000 backends (40 down to 2 clients per backend), one backend removed
// at a time at 16 places of the list. It reports the mean and the worst
// pairs changed, as a multiple of the minimum (the removed backend's
// clients), which BalancedAll's doc comment quotes. Run it with
// -benchtime 1x.
func BenchmarkChurn(b *testing.B) {
	var fleets []size
	for _, k := range []int{10, 20} {
		for _, nb := range []int{5000, 10000, 20000, 50000} {
			fleets = append(fleets, size{10000, nb, k})
		}
	}
	for _, sz := range fleets {
		b.Run(fmt.Sprintf("clients=%d/backends=%d/k=%d", sz.clients, sz.backends, sz.subset), func(b *testing.B) {
			ids := backendIDs(sz.backends)
			for b.Loop() {
				before, err := BalancedAll(ids, sz.subset, sz.clients)
				if err != nil {
					b.Fatal(err)
				}
				var sum, worst float64
				const samples = 16
				for i := range samples {
					removed := ids[(2*i+1)*sz.backends/(2*samples)]
					without := slices.DeleteFunc(slices.Clone(ids), func(s string) bool { return s == removed })
					after, err := BalancedAll(without, sz.subset, sz.clients)
					if err != nil {
						b.Fatal(err)
					}
					r := float64(churn(before, after)) / float64(max(load(before, removed), 1))
					sum += r
					worst = max(worst, r)
				}
				b.ReportMetric(sum/samples, "churn-mean-x")
				b.ReportMetric(worst, "churn-worst-x")
			}
		})
	}
}
