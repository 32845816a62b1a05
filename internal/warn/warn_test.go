package warn_test

import (
	"bytes"
	"io"
	"strings"
	"testing"

	"github.com/pickwise/pickwise/internal/warn"
	"google.golang.org/grpc/grpclog"
)

// TestClampedNamesPolicyFieldAndValues: the warning reaches grpc's log at
// warning level and names the policy, the field, the value given and the
// value used.
func TestClampedNamesPolicyFieldAndValues(t *testing.T) {
	var warnings bytes.Buffer
	grpclog.SetLoggerV2(grpclog.NewLoggerV2(io.Discard, &warnings, io.Discard))
	warn.Clamped("pickwise_p2c", "choiceCount", 20, 10)
	want := "pickwise_p2c: choiceCount 20: out of bounds, using 10"
	if !strings.Contains(warnings.String(), want) {
		t.Errorf("warning log %q, want it to contain %q", warnings.String(), want)
	}
}
