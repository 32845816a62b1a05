package p2c_test

import (
	"testing"

	"github.com/pickwise/pickwise/balancer/p2c"
	"github.com/pickwise/pickwise/internal/testkit"
)

// The p2c tests use the shared harness under the short names below.

const testTimeout = testkit.Timeout

type harness = testkit.Harness

func newHarness(t *testing.T, cfgJSON string) *harness {
	return testkit.NewHarness(t, p2c.Name, cfgJSON)
}

var (
	addrs       = testkit.Addrs
	endpoint    = testkit.Endpoint
	endpointsOf = testkit.Endpoints
	finish      = testkit.Finish
	outcome     = testkit.Outcome
)
