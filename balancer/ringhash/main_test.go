package ringhash

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that no test leaves a goroutine behind. The tables start
// none, but the check is cheap and keeps this package in line with the rest.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
