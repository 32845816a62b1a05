package sim

import (
	"flag"
	"slices"
	"testing"

	"go.uber.org/goleak"
)

// full runs scenarios at their described size instead of CI's reduced one.
var full = flag.Bool("sim.full", false, "run simulated scenarios at full scale")

func testScale() Scale {
	if *full {
		return Full
	}
	return Reduced
}

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// column is the index of the policy called name among policies, the
// columns of a scenario's result.
func column(t *testing.T, policies []string, name string) int {
	t.Helper()
	j := slices.Index(policies, name)
	if j < 0 {
		t.Fatalf("no column %q in %q", name, policies)
	}
	return j
}
