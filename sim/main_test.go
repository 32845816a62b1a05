package sim

import (
	"flag"
	"slices"
	"sync"
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

// ownWidthCheck holds the names of the scenarios whose own tests check
// their table's width at the reduced scale (scenarioTest, logTable), which
// TestScenarioTablesFit then leaves to them instead of running every
// scenario a second time.
var ownWidthCheck sync.Map // string -> bool

// scenarioTest starts the test of scenario name: it runs in parallel with
// the other scenario tests (virtual time, so a neighbour changes nothing
// but how long it takes), and at the reduced scale it checks its table's
// width itself. It must be called first, before the test's run: tests
// call it, in order, before TestScenarioTablesFit runs.
func scenarioTest(t *testing.T, name string) {
	t.Helper()
	if _, err := Lookup(name); err != nil {
		t.Fatal(err)
	}
	if testScale() == Reduced {
		ownWidthCheck.Store(name, true)
	}
	t.Parallel()
}

// logTable logs the table of scenario name's run at testScale, and at
// the reduced scale checks that every line fits (checkWidth).
func logTable(t *testing.T, name string, tb *Table) {
	t.Helper()
	t.Log("\n" + tb.String())
	if testScale() == Reduced {
		checkWidth(t, name, tb.String())
	}
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
