package fleet

import (
	"fmt"
	"time"

	"github.com/pickwise/pickwise/interop/server"
	"google.golang.org/grpc/codes"
)

// Behavior is how a backend answers: the part of the server's behavior
// model (server.Behavior) that most end-to-end tests need, in Go's types
// (time.Duration, codes.Code) rather than the JSON-friendly ones the lab's
// patches use. Load-balancing policies are judged by how they react to slow and
// failing servers, so tests need to turn a healthy backend into a slow one
// or a black hole without restarting it. The zero value answers every call
// at once and never fails.
type Behavior struct {
	// Latency is how long a successful call takes, to model slow servers.
	// Negative values count as 0.
	Latency time.Duration
	// ErrorRate is the fraction of calls, in [0,1], that fail with ErrorCode;
	// 1 (or more) fails every call. Values at or below 0 never fail.
	ErrorRate float64
	// ErrorCode is the status of injected failures. codes.OK would not be a
	// failure, so it stands for codes.Unavailable.
	ErrorCode codes.Code
	// ErrorLatency is how long a failing call takes before it returns. It is
	// separate from Latency because a broken server usually fails fast (a
	// black hole), which is what makes naive balancers send it more traffic.
	ErrorLatency time.Duration
}

// toServer is where a fleet Behavior becomes the server's. Out-of-range
// values are clamped to the nearest the server accepts rather than
// rejected, because Backend.SetBehavior has no error to return and a test
// computing a latency or a rate should not have to guard against, say, a
// negative one.
func (bh Behavior) toServer() server.Behavior {
	rate := bh.ErrorRate
	if !(rate > 0) { // NaN too
		rate = 0
	}
	code := bh.ErrorCode
	if code == codes.OK {
		code = codes.Unavailable
	}
	name := server.CodeName(code)
	if name == "" {
		// A number outside gRPC's codes has no name; Unknown is what a
		// client makes of one.
		name = server.CodeName(codes.Unknown)
	}
	return server.Behavior{
		Latency:      server.Duration(max(bh.Latency, 0)),
		ErrorRate:    min(rate, 1),
		ErrorCode:    name,
		ErrorLatency: server.Duration(max(bh.ErrorLatency, 0)),
	}
}

// fromServer reads back the fields of sb that Behavior models, with the
// server's defaults filled in.
func fromServer(sb server.Behavior) Behavior {
	return Behavior{
		Latency:      time.Duration(sb.Latency),
		ErrorRate:    sb.ErrorRate,
		ErrorCode:    sb.Code(),
		ErrorLatency: time.Duration(sb.ErrorLatency),
	}
}

// Backend is one loopback backend: an interop/server Server (package
// github.com/pickwise/pickwise/interop/server), the backend the lab and
// pickwise-backend run, so tests exercise the same server. Its address
// survives Stop and Restart so that a client holding the address sees the
// same endpoint go away and come back, as it would with a rebooted server.
type Backend struct {
	srv *server.Server // immutable after Start
}

// newBackend starts a server named name on an ephemeral loopback port.
func newBackend(name string) (*Backend, error) {
	srv, err := server.New(name, server.Behavior{})
	if err != nil {
		return nil, err
	}
	if _, err := srv.Start("127.0.0.1:0"); err != nil {
		srv.Stop()
		return nil, err
	}
	return &Backend{srv: srv}, nil
}

// Name identifies the backend in replies, trailers and counts; it is
// "backend-<index>" so results read naturally in test failures.
func (b *Backend) Name() string { return b.srv.Name() }

// Addr is the "127.0.0.1:port" the backend listens on. It stays the same
// across Restart so resolver state built from it remains valid.
func (b *Backend) Addr() string { return b.srv.Addr() }

// SetBehavior swaps how the backend answers. It is safe while calls are in
// flight: each call reads the behavior once when it arrives.
func (b *Backend) SetBehavior(bh Behavior) {
	if err := b.srv.SetBehavior(bh.toServer()); err != nil {
		// toServer clamps every field into the server's bounds, so this is
		// a bug in toServer, not in the caller.
		panic(fmt.Sprintf("fleet: %s: %v", b.Name(), err))
	}
}

// Behavior reports the current behavior, with the server's defaults filled
// in (an ErrorCode of codes.OK reads as codes.Unavailable), so tests can
// tweak one field.
func (b *Backend) Behavior() Behavior { return fromServer(b.srv.Behavior()) }

// Served counts calls that reached the backend, successful or injected
// failures, counted on arrival (server.Stats.Received). It is the server's
// own view, which tests compare with what the client believes happened.
func (b *Backend) Served() int64 { return b.srv.Stats().Received }

// Accepted counts the TCP connections the backend has accepted since it
// started, across restarts: the server's view of which clients connect to
// it, for tests of policies that choose which backends to connect to.
func (b *Backend) Accepted() int64 { return b.srv.Stats().Connections }

// FailNext makes the next n calls fail at once with the behavior's
// ErrorCode (Unavailable unless set), whatever its ErrorRate: a transient
// blip, exactly n failures. n <= 0 does nothing.
func (b *Backend) FailNext(n int) {
	if n <= 0 {
		return
	}
	// Read, modify, write: fleet tests change a backend from one goroutine,
	// so nothing else writes in between.
	sb := b.srv.Behavior()
	sb.FailNext = n
	if err := b.srv.SetBehavior(sb); err != nil {
		panic(fmt.Sprintf("fleet: %s: %v", b.Name(), err))
	}
}

// ResetCounts zeroes Served, so a test can measure one phase (for example
// after a warm-up) on its own. Accepted is kept: connections outlive the
// phase.
func (b *Backend) ResetCounts() { b.srv.Reset(false) }

// Running reports whether the backend is serving, i.e. not stopped.
func (b *Backend) Running() bool { return b.srv.Running() }

// Stop kills the server abruptly: the listener and every connection close
// and in-flight calls fail, which is how a crashed server looks to a client.
// It returns once all handlers have finished. Stopping a stopped backend
// does nothing.
func (b *Backend) Stop() { b.srv.Stop() }

// Restart serves again on the same address after Stop, with the same
// behavior, so a client can reconnect without any resolver change.
// Restarting a running backend does nothing.
func (b *Backend) Restart() error { return b.srv.Restart() }
