// Package attempts makes every pickwise policy place a retried or hedged
// call away from the endpoints its earlier attempts used.
//
// grpc retries a call (retryPolicy) or hedges it (hedgingPolicy) by asking
// the balancer's picker again, and the picker is told nothing about the
// earlier attempts: a policy that keeps a key on one endpoint, or a load
// signal that still favours the endpoint that just failed, sends the retry
// back where the fault is. Envoy's previous_hosts retry predicate is the
// model. With this package's interceptor on the channel, each call carries
// a small record of where its attempts went; every pickwise policy reads
// it, and an attempt goes elsewhere whenever another candidate exists.
// pickwise_ring_hash sends it to the key's next candidate, unless
// strictAffinity is set.
//
// One line when creating the channel:
//
//	conn, err := grpc.NewClient(target,
//		grpc.WithChainUnaryInterceptor(attempts.UnaryClientInterceptor()),
//		// and for streaming calls:
//		grpc.WithChainStreamInterceptor(attempts.StreamClientInterceptor()),
//		...)
//
// The record costs one small allocation per call, in the interceptor; a
// pick of a first attempt allocates nothing. Calls without the interceptor
// are placed as before.
package attempts

import (
	"context"

	"github.com/pickwise/pickwise/internal/engine"
	"google.golang.org/grpc"
)

// UnaryClientInterceptor returns an interceptor that gives each unary call
// the attempt record pickwise's pickers read.
func UnaryClientInterceptor() grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		return invoker(engine.WithAttempts(ctx), method, req, reply, cc, opts...)
	}
}

// StreamClientInterceptor returns an interceptor that gives each streaming
// call the attempt record pickwise's pickers read.
func StreamClientInterceptor() grpc.StreamClientInterceptor {
	return func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		return streamer(engine.WithAttempts(ctx), desc, cc, method, opts...)
	}
}
