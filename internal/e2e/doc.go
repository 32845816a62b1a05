// Package e2e holds end-to-end tests of the failure model over real gRPC
// on loopback: every pickwise policy beside grpc-go's built-ins in the
// same run, on the failure model's scenarios (a lone transient failure, a
// black hole, recovery, a hash black hole, retries). It has no code of its
// own.
package e2e
