package fleet

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pickwise/pickwise/internal/pause"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// rebindTimeout bounds how long Restart keeps trying to listen on the old
// port. The port is normally free the moment Stop returns, but another socket
// may grab it briefly, and callers prefer a slow Restart to a flaky one.
const rebindTimeout = 2 * time.Second

// Behavior is how a backend answers. Load-balancing policies are judged by
// how they react to slow and failing servers, so tests need to turn a healthy
// backend into a slow one or a black hole without restarting it. The zero
// value answers every call at once and never fails.
type Behavior struct {
	// Latency is how long a successful call takes, to model slow servers.
	Latency time.Duration
	// ErrorRate is the fraction of calls, in [0,1], that fail with ErrorCode;
	// 1 fails every call. Values at or below 0 never fail.
	ErrorRate float64
	// ErrorCode is the status of injected failures. codes.OK would not be a
	// failure, so it stands for codes.Unavailable when ErrorRate > 0.
	ErrorCode codes.Code
	// ErrorLatency is how long a failing call takes before it returns. It is
	// separate from Latency because a broken server usually fails fast (a
	// black hole), which is what makes naive balancers send it more traffic.
	ErrorLatency time.Duration
}

// code returns the status code injected failures carry.
func (bh Behavior) code() codes.Code {
	if bh.ErrorCode == codes.OK {
		return codes.Unavailable
	}
	return bh.ErrorCode
}

// Backend is one real gRPC server on a loopback port. Its address survives
// Stop and Restart so that a client holding the address sees the same
// endpoint go away and come back, as it would with a rebooted server.
type Backend struct {
	name string
	addr string

	// behavior and served are touched by every call, so they are atomic
	// rather than guarded by mu, which only serializes Stop and Restart.
	behavior atomic.Pointer[Behavior]
	served   atomic.Int64
	accepted atomic.Int64 // TCP connections accepted, across restarts
	failNext atomic.Int64 // calls still to fail with Unavailable (FailNext)

	mu   sync.Mutex
	srv  *grpc.Server  // nil while stopped
	done chan struct{} // closed when the current Serve goroutine returns
}

// newBackend listens on an ephemeral loopback port and starts serving.
func newBackend(name string) (*Backend, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("fleet: %s: listen: %w", name, err)
	}
	b := &Backend{name: name, addr: ln.Addr().String()}
	b.behavior.Store(&Behavior{})
	b.serveLocked(ln)
	return b, nil
}

// Name identifies the backend in replies, trailers and counts; it is
// "backend-<index>" so results read naturally in test failures.
func (b *Backend) Name() string { return b.name }

// Addr is the "127.0.0.1:port" the backend listens on. It stays the same
// across Restart so resolver state built from it remains valid.
func (b *Backend) Addr() string { return b.addr }

// SetBehavior swaps how the backend answers. It is safe while calls are in
// flight: each call reads the behavior once when it arrives.
func (b *Backend) SetBehavior(bh Behavior) { b.behavior.Store(&bh) }

// Behavior reports the current behavior, so tests can tweak one field.
func (b *Backend) Behavior() Behavior { return *b.behavior.Load() }

// Served counts calls that reached the handler, successful or injected
// failures. It is the server's own view, which tests compare with what the
// client believes happened.
func (b *Backend) Served() int64 { return b.served.Load() }

// Accepted counts the TCP connections the backend has accepted since it
// started, across restarts: the server's view of which clients connect to
// it, for tests of policies that choose which backends to connect to.
func (b *Backend) Accepted() int64 { return b.accepted.Load() }

// FailNext makes the next n calls fail at once with Unavailable, whatever
// the behavior: a transient blip, exactly n failures.
func (b *Backend) FailNext(n int) { b.failNext.Store(int64(n)) }

// ResetCounts zeroes Served, so a test can measure one phase (for example
// after a warm-up) on its own.
func (b *Backend) ResetCounts() { b.served.Store(0) }

// Running reports whether the backend is serving, i.e. not stopped.
func (b *Backend) Running() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.srv != nil
}

// Stop kills the server abruptly: the listener and every connection close
// and in-flight calls fail, which is how a crashed server looks to a client.
// It returns once all handlers have finished. Stopping a stopped backend
// does nothing.
func (b *Backend) Stop() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.srv == nil {
		return
	}
	b.srv.Stop()
	<-b.done
	b.srv, b.done = nil, nil
}

// Restart serves again on the same address after Stop, so a client can
// reconnect without any resolver change. Restarting a running backend does
// nothing.
func (b *Backend) Restart() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.srv != nil {
		return nil
	}
	deadline := time.Now().Add(rebindTimeout)
	for {
		ln, err := net.Listen("tcp", b.addr)
		if err == nil {
			b.serveLocked(ln)
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("fleet: %s: relisten on %s: %w", b.name, b.addr, err)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// serveLocked starts a fresh grpc.Server on ln; a stopped grpc.Server cannot
// be reused. The caller holds b.mu or owns b exclusively.
func (b *Backend) serveLocked(ln net.Listener) {
	// WaitForHandlers makes Stop wait for handlers to return, so no handler
	// goroutine outlives Stop (goleak checks this in tests).
	srv := grpc.NewServer(grpc.WaitForHandlers(true))
	srv.RegisterService(&ServiceDesc, handler{b})
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(countingListener{ln, &b.accepted}) // returns when srv.Stop is called
	}()
	b.srv, b.done = srv, done
}

// handler adapts a Backend to BackendServer without adding a Call method to
// Backend's public API.
type handler struct{ b *Backend }

func (h handler) Call(ctx context.Context, _ *wrapperspb.StringValue) (*wrapperspb.StringValue, error) {
	b := h.b
	b.served.Add(1)
	// Set on success and failure alike: a status error carries no reply, and
	// the trailer is how clients attribute the failure to this backend.
	_ = grpc.SetTrailer(ctx, metadata.Pairs(TrailerBackend, b.name))

	if b.failNext.Load() > 0 && b.failNext.Add(-1) >= 0 {
		return nil, status.Errorf(codes.Unavailable, "fleet: %s: injected one-off failure", b.name)
	}
	bh := b.Behavior()
	if bh.ErrorRate > 0 && rand.Float64() < bh.ErrorRate {
		if err := pause.For(ctx, bh.ErrorLatency); err != nil {
			return nil, err
		}
		return nil, status.Errorf(bh.code(), "fleet: %s: injected failure", b.name)
	}
	if err := pause.For(ctx, bh.Latency); err != nil {
		return nil, err
	}
	return wrapperspb.String(b.name), nil
}

// countingListener counts the connections it accepts.
type countingListener struct {
	net.Listener
	n *atomic.Int64
}

func (l countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.n.Add(1)
	}
	return c, err
}
