package sim

import (
	"flag"
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
