package pause

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestFor(t *testing.T) {
	if err := For(context.Background(), 0); err != nil {
		t.Errorf("For(0) = %v, want nil", err)
	}
	if err := For(context.Background(), time.Millisecond); err != nil {
		t.Errorf("For(1ms) = %v, want nil", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := For(ctx, time.Hour); status.Code(err) != codes.Canceled {
		t.Errorf("For on a cancelled context = %v, want Canceled", err)
	}
}
