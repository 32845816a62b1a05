package lbconfig

import (
	"fmt"
	"time"
)

// DefaultRemovalGrace is the default "removalGrace" of the load-aware
// policies (pickwise_p2c, pickwise_peak_ewma, pickwise_orca_wrr): how long
// the READY connection of an endpoint the resolver removed is kept in case
// the endpoint returns; no picker published after the removal places calls
// on it. One that returns on the connection it left with is the same
// process that served before: it comes back with its statistics, its
// failure evidence and its weight, not decayed or updated while it was
// out, and no new slow-start ramp starts. The connection is closed when
// the grace is over, or at once if it drops meanwhile. "0s" closes
// connections when their endpoints are removed, as grpc's own policies do.
// A config that changes the grace applies it to the connections already
// kept, each counted from its endpoint's removal.
const DefaultRemovalGrace = 10 * time.Second

// MaxRemovalGrace is the longest removalGrace accepted.
const MaxRemovalGrace = 10 * time.Minute

// ValidateRemovalGrace rejects a removalGrace outside [0, MaxRemovalGrace].
// policy prefixes the message.
func ValidateRemovalGrace(policy string, d Duration) error {
	if d < 0 || time.Duration(d) > MaxRemovalGrace {
		return fmt.Errorf("%s: removalGrace %q: must be in [0s, %v]", policy, d, MaxRemovalGrace)
	}
	return nil
}
