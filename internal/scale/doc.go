// Package scale holds the fleet-scale benchmarks: what a resolver update,
// a connectivity change and a channel's bring-up cost at 1k, 10k and 50k
// endpoints, for pickwise's policies and grpc-go's peers in the same run,
// over a fake ClientConn. It has no code of its own; see scale_test.go.
package scale
