package engine

import (
	"testing"

	"google.golang.org/grpc/connectivity"
)

// TestLazyAggregate checks gRFC A61's aggregation rules.
func TestLazyAggregate(t *testing.T) {
	type counts struct{ idle, connecting, ready, failed int }
	for _, tc := range []struct {
		name string
		c    counts
		want connectivity.State
	}{
		{"all idle", counts{idle: 3}, connectivity.Idle},
		{"one ready among failures", counts{ready: 1, failed: 5}, connectivity.Ready},
		{"two failed beat connecting", counts{connecting: 1, failed: 2}, connectivity.TransientFailure},
		{"connecting", counts{idle: 2, connecting: 1}, connectivity.Connecting},
		{"one failed among idle", counts{idle: 2, failed: 1}, connectivity.Connecting},
		{"the only endpoint failed", counts{failed: 1}, connectivity.TransientFailure},
		{"all failed", counts{failed: 3}, connectivity.TransientFailure},
	} {
		var c [connectivity.Shutdown + 1]int
		c[connectivity.Idle], c[connectivity.Connecting], c[connectivity.Ready], c[connectivity.TransientFailure] = tc.c.idle, tc.c.connecting, tc.c.ready, tc.c.failed
		total := tc.c.idle + tc.c.connecting + tc.c.ready + tc.c.failed
		if got := lazyAggregate(c, total); got != tc.want {
			t.Errorf("%s: lazyAggregate = %v, want %v", tc.name, got, tc.want)
		}
	}
}
