package sim

import (
	"strconv"
	"strings"
	"testing"
)

// cell returns the table's value in row (by label prefix) and column.
func cell(t *testing.T, tb *Table, row, col string) string {
	t.Helper()
	c := -1
	for i, name := range tb.Columns {
		if name == col {
			c = i
		}
	}
	if c < 0 {
		t.Fatalf("no column %q in %q", col, tb.Columns)
	}
	for _, r := range tb.Rows {
		if strings.HasPrefix(r.Label, row) {
			return r.Cells[c]
		}
	}
	t.Fatalf("no row %q", row)
	return ""
}

// pct reads a Pct cell as a fraction.
func pct(t *testing.T, s string) float64 {
	t.Helper()
	v, err := strconv.ParseFloat(strings.TrimSuffix(s, "%"), 64)
	if err != nil {
		t.Fatalf("cell %q: %v", s, err)
	}
	return v / 100
}

func num(t *testing.T, s string) float64 {
	t.Helper()
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatalf("cell %q: %v", s, err)
	}
	return v
}

func TestTransientFailure(t *testing.T) {
	scenarioTest(t, "transient-failure")
	tb, err := TransientFailure(testScale())
	if err != nil {
		t.Fatal(err)
	}
	logTable(t, "transient-failure", tb)
	for _, p := range []string{"pickwise_p2c", "pickwise_peak_ewma"} {
		for _, s := range []string{"1", "2", "3"} {
			if v := pct(t, cell(t, tb, "backend-0's share, second "+s, p)); v < 0.15 {
				t.Errorf("%s: backend-0's share in second %s after one failure = %.1f%%, want >= 15%%", p, s, 100*v)
			}
		}
	}
}

func TestFlappingBackend(t *testing.T) {
	scenarioTest(t, "flapping-backend")
	tb, err := FlappingBackend(testScale())
	if err != nil {
		t.Fatal(err)
	}
	logTable(t, "flapping-backend", tb)
	rr := pct(t, cell(t, tb, "errors seen", "round_robin"))
	for _, p := range []string{"pickwise_p2c", "pickwise_peak_ewma", "pickwise_orca_wrr"} {
		if v := pct(t, cell(t, tb, "errors seen", p)); v > rr/5 {
			t.Errorf("%s: client errors %.2f%%, want at most a fifth of round_robin's %.2f%%", p, 100*v, 100*rr)
		}
		if v := pct(t, cell(t, tb, "backend-0's share while it is healthy", p)); v < 0.05 {
			t.Errorf("%s: backend-0's share while healthy %.1f%%, want at least half its fair 10%%", p, 100*v)
		}
	}
}

func TestHashBlackHole(t *testing.T) {
	scenarioTest(t, "hash-black-hole")
	tb, err := HashBlackHole(testScale())
	if err != nil {
		t.Fatal(err)
	}
	logTable(t, "hash-black-hole", tb)
	for _, p := range []string{"pickwise_ring_hash (ring)", "pickwise_ring_hash (maglev)"} {
		if v := pct(t, cell(t, tb, "errors seen", p)); v > 0.02 {
			t.Errorf("%s: client errors while backend-3 fails %.2f%%, want <= 2%%", p, 100*v)
		}
		if v := pct(t, cell(t, tb, "its keys' calls it serves again", p)); v < 0.9 {
			t.Errorf("%s: backend-3 serves %.1f%% of its keys' calls after healing, want >= 90%%", p, 100*v)
		}
	}
	// strictAffinity keeps the broken backend's keys home: their calls
	// fail, as all of ring_hash's do.
	col := "pickwise_ring_hash (ring, strictAffinity)"
	keys := num(t, cell(t, tb, "backend-3's keys", col)) / 300
	if v := pct(t, cell(t, tb, "errors seen", col)); v < 0.8*keys {
		t.Errorf("strictAffinity: client errors %.2f%%, want about its keys' share %.1f%%: keys kept home", 100*v, 100*keys)
	}
}

func TestRetryStorm(t *testing.T) {
	scenarioTest(t, "retry-storm")
	tb, err := RetryStorm(testScale())
	if err != nil {
		t.Fatal(err)
	}
	logTable(t, "retry-storm", tb)
	for _, p := range []string{"pickwise_p2c + attempts", "pickwise_ring_hash + attempts"} {
		if v := pct(t, cell(t, tb, "errors seen", p)); v != 0 {
			t.Errorf("%s: %.2f%% of calls failed, want none", p, 100*v)
		}
	}
	rr := num(t, cell(t, tb, "attempts per successful call", "round_robin"))
	if v := num(t, cell(t, tb, "attempts per successful call", "pickwise_p2c + attempts")); v >= rr {
		t.Errorf("pickwise_p2c + attempts: %.3f attempts per success, want fewer than round_robin's %.3f", v, rr)
	}
}

// TestOneStall: one late answer from a backend as fast as the others does
// not starve it: at idle candidates, its share in each of the three
// seconds after stays near its fair 25%.
func TestOneStall(t *testing.T) {
	scenarioTest(t, "one-stall")
	tb, err := OneStall(testScale())
	if err != nil {
		t.Fatal(err)
	}
	logTable(t, "one-stall", tb)
	for _, p := range []string{"pickwise_p2c", "pickwise_peak_ewma", "pickwise_orca_wrr"} {
		for _, s := range []string{"1", "2", "3"} {
			if v := pct(t, cell(t, tb, "backend-0's share, second "+s, p)); v < 0.18 {
				t.Errorf("%s: backend-0's share in second %s after one late answer = %.1f%%, want >= 18%%", p, s, 100*v)
			}
		}
	}
}
