package sim

import "testing"

func TestSubsetHardware(t *testing.T) {
	scenarioTest(t, "hardware-generations-subsetting")
	r, err := SubsetHardware(testScale())
	if err != nil {
		t.Fatal(err)
	}
	logTable(t, "hardware-generations-subsetting", r.Table)
	col := func(name string) int { return column(t, r.Policies, name) }
	all, bal, rnd := col("pickwise_p2c (all-to-all)"), col("pickwise_subset (balanced)"), col("pickwise_subset (no index)")
	n := r.NewCount + r.OldCount

	// Connections: every balancer on every backend; exactly the mean in
	// balanced mode; scattered like balls into bins without an index
	// (about Binomial(clients, size/n): 13-26 reduced, 176-223 full).
	if r.ConnMin[all] != r.Clients || r.ConnMax[all] != r.Clients {
		t.Errorf("all-to-all: %d-%d connections per backend, want %d", r.ConnMin[all], r.ConnMax[all], r.Clients)
	}
	if mean := r.Clients * r.SubsetSize / n; r.ConnMin[bal] != mean || r.ConnMax[bal] != mean {
		t.Errorf("pickwise_subset (balanced): %d-%d connections per backend, want %d", r.ConnMin[bal], r.ConnMax[bal], mean)
	}
	if r.ConnMax[rnd]-r.ConnMin[rnd] < 5 {
		t.Errorf("pickwise_subset (no index): %d-%d connections per backend, want a statistical scatter", r.ConnMin[rnd], r.ConnMax[rnd])
	}

	for i, p := range r.Policies {
		// The new generation has room to spare in every column: it is the
		// old one that the thin signal overloads.
		if u := r.NewUtil[i]; u < 0.7 || u > 0.9 {
			t.Errorf("%s: new-generation utilization %.3f, want near 0.8", p, u)
		}
		// With this many balancers pickwise_p2c's local counts are thin
		// and the old generation ends near saturation, but still well below
		// round robin's 125% (HardwareGenerations).
		if o := r.OldOffered[i]; o > 1.1 {
			t.Errorf("%s: old-generation offered load %.3f, want at most 1.1", p, o)
		}
	}
	// A subset concentrates a balancer's traffic on fewer backends, so its
	// counter for each reads more, and it steers at least as well as
	// all-to-all: no more load on the old generation and a lower p99
	// (measured, reduced/full: 74/495 ms all-to-all, 30/123 ms balanced).
	for _, c := range []int{bal, rnd} {
		if r.InFlight[c] <= r.InFlight[all] {
			t.Errorf("%s: %.3f in flight per connection, all-to-all %.3f; want the subset's signal denser", r.Policies[c], r.InFlight[c], r.InFlight[all])
		}
		if r.OldOffered[c] > r.OldOffered[all]+0.02 {
			t.Errorf("%s: old-generation offered load %.3f, all-to-all %.3f; want no more", r.Policies[c], r.OldOffered[c], r.OldOffered[all])
		}
	}
	if r.P99[bal] >= r.P99[all] {
		t.Errorf("p99: pickwise_subset (balanced) %v, all-to-all %v; want the subset lower", r.P99[bal], r.P99[all])
	}
}

// TestSubsetHardwareDeterministic: every column is seeded (pickwise_p2c
// through the run's source, the subsets by index or clientId), so two runs
// agree exactly.
func TestSubsetHardwareDeterministic(t *testing.T) {
	t.Parallel()
	a, err := SubsetHardware(Reduced)
	if err != nil {
		t.Fatal(err)
	}
	b, err := SubsetHardware(Reduced)
	if err != nil {
		t.Fatal(err)
	}
	if a.Table.String() != b.Table.String() {
		t.Errorf("two runs with the same seed differ:\n%s\n%s", a.Table, b.Table)
	}
}
