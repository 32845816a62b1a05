// Package pause holds the wait the test backends share.
package pause

import (
	"context"
	"time"

	"google.golang.org/grpc/status"
)

// For waits for d but gives up when ctx ends, returning the gRPC status
// of the context's error, so a slow or queued call never holds a handler
// past the client's deadline or past the server's Stop.
func For(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return status.FromContextError(ctx.Err()).Err()
	}
}
