// Package warn logs, through grpc's logger under the component name
// "pickwise", the config values a policy moves to a bound rather than
// rejects (the few that grpc's specs clamp), so that every policy words
// them alike.
package warn

import "google.golang.org/grpc/grpclog"

var logger = grpclog.Component("pickwise")

// Clamped logs that policy's field, given as got, is used as used.
func Clamped(policy, field string, got, used any) {
	logger.Warningf("%s: %s %v: out of bounds, using %v", policy, field, got, used)
}
