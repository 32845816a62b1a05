package e2e_test

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pickwise/pickwise/internal/fleet"
	"github.com/pickwise/pickwise/internal/testkit"
	"github.com/pickwise/pickwise/metrics"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"
)

// drainingMessage is the message grpc ends a stream with when its server
// refused it unprocessed, in a GOAWAY: the engine's drainingMessage, which
// this file holds to grpc's.
const drainingMessage = "the connection is draining"

// TestRefusedByADrain: a backend that drains as net/http's HTTP/2 server
// does, with a single GOAWAY whose last stream is the one before those in
// transit, refuses them unprocessed. grpc retries them elsewhere at once,
// so no call fails, and tells the balancer of each as an attempt that was
// sent and failed Unavailable. The backend here refuses the first stream
// of every connection it takes, so that every call it gets is such an
// attempt: no pickwise policy may count them against it.
func TestRefusedByADrain(t *testing.T) {
	for _, p := range loadAware {
		if !p.ours {
			continue
		}
		t.Run(p.name, func(t *testing.T) {
			ctx := fleet.Context(t, e2eTimeout)
			f := fleet.StartT(t, 2)
			setLatency(f, 2*time.Millisecond)
			r := startRefuser(t)
			m := testkit.NewMetrics()
			as := &attemptErrors{}
			c := fleet.DialT(t, append(f.Addrs(), r.addr()), p.config, grpc.WithStatsHandler(m), grpc.WithStatsHandler(as))
			warm(t, ctx, c, f, nil)
			// Each of the refuser's drains takes it about a second and a
			// quarter: down for downFor, then grpc's reconnect backoff.
			res := merged(drive(ctx, c, 8, scale(5*time.Second, 3*time.Second), time.Second, nil))
			if err := m.Collect(); err != nil {
				t.Fatal(err)
			}
			sent, msgs := as.failed()
			t.Logf("%d calls, %d failed; %d drains refused %d streams; %d attempts failed after their stream was sent: %v",
				res.total, res.failed, r.drains.Load(), r.refused.Load(), sent, msgs)
			if res.failed != 0 {
				t.Errorf("%d of %d calls failed, want none: grpc retries a refused stream", res.failed, res.total)
			}
			// The scenario: drains that refused streams, which grpc
			// reported as sent and failed with the message the engine
			// knows them by.
			if r.drains.Load() < 2 || sent < 2 {
				t.Fatalf("%d drains, %d attempts reported failed after being sent: want at least 2 of each", r.drains.Load(), sent)
			}
			for msg := range msgs {
				if msg != drainingMessage {
					t.Errorf("an attempt the backend refused ended %q, want Unavailable %q, which the engine takes as no evidence", msg, drainingMessage)
				}
			}
			var ejections, avoided float64
			for _, name := range metrics.Names() {
				switch {
				case strings.HasSuffix(name, ".ejections"):
					ejections += m.Total(name)
				case strings.HasSuffix(name, ".picks"):
					for _, rec := range m.Records(name) {
						if rec.Labels["pickwise.reason"] == "avoided_failing" {
							avoided += rec.Value
						}
					}
				}
			}
			if ejections != 0 || avoided != 0 {
				t.Errorf("refused streams counted against the backend: %v ejections, %v picks passed over a failing endpoint; want none", ejections, avoided)
			}
		})
	}
}

// attemptErrors is a stats handler that collects the errors of the
// attempts that failed after grpc created their stream: what a balancer's
// Done is told of as sent (DoneInfo.BytesSent).
type attemptErrors struct {
	mu   sync.Mutex
	n    int
	msgs map[string]int // by "code: message"
}

type streamedKey struct{}

func (a *attemptErrors) failed() (int, map[string]int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := map[string]int{}
	for k, v := range a.msgs {
		out[k] = v
	}
	return a.n, out
}

func (a *attemptErrors) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context {
	return context.WithValue(ctx, streamedKey{}, new(atomic.Bool))
}

func (a *attemptErrors) HandleRPC(ctx context.Context, s stats.RPCStats) {
	streamed, _ := ctx.Value(streamedKey{}).(*atomic.Bool)
	if streamed == nil {
		return
	}
	switch s := s.(type) {
	case *stats.OutHeader:
		streamed.Store(true)
	case *stats.End:
		if s.Error == nil || !streamed.Load() {
			return
		}
		st := status.Convert(s.Error)
		msg := st.Message()
		if st.Code() != codes.Unavailable {
			msg = st.Code().String() + ": " + msg
		}
		a.mu.Lock()
		defer a.mu.Unlock()
		if a.msgs == nil {
			a.msgs = map[string]int{}
		}
		a.n++
		a.msgs[msg]++
	}
}

func (a *attemptErrors) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context {
	return ctx
}

func (a *attemptErrors) HandleConn(context.Context, stats.ConnStats) {}

// refuser speaks just enough HTTP/2 to take a gRPC client's connections
// and drain as a server that sends a single GOAWAY does: refuseAfter
// after the first stream of a connection arrives, a GOAWAY whose last
// stream is the one before it refuses every stream it was sent, none of
// them answered; then the server is down for downFor, as a process
// being restarted, and listens again on the same address.
type refuser struct {
	address string
	refused atomic.Int64 // streams refused
	drains  atomic.Int64

	done chan struct{} // closed by close
	wg   sync.WaitGroup

	mu     sync.Mutex
	lis    net.Listener // nil while down
	conns  map[net.Conn]bool
	closed bool
}

const (
	refuseAfter = 20 * time.Millisecond
	downFor     = 200 * time.Millisecond
)

func startRefuser(t *testing.T) *refuser {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &refuser{address: lis.Addr().String(), lis: lis, conns: map[net.Conn]bool{}, done: make(chan struct{})}
	r.wg.Go(func() { r.accept(lis) })
	t.Cleanup(r.close)
	return r
}

func (r *refuser) addr() string { return r.address }

func (r *refuser) accept(lis net.Listener) {
	for {
		conn, err := lis.Accept()
		if err != nil {
			return
		}
		r.mu.Lock()
		r.conns[conn] = true
		r.mu.Unlock()
		r.wg.Go(func() {
			defer func() {
				r.mu.Lock()
				delete(r.conns, conn)
				r.mu.Unlock()
				conn.Close()
			}()
			r.serve(conn)
		})
	}
}

// drain follows a GOAWAY the caller wrote: it closes the listener and
// listens again downFor later.
func (r *refuser) drain() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.lis == nil || r.closed {
		return
	}
	r.drains.Add(1)
	r.lis.Close()
	r.lis = nil
	// The client closes the connection once it has read the GOAWAY: it
	// has no stream left on it. Closed now, the GOAWAY could be lost
	// under the client's unread data.
	r.wg.Go(func() {
		select {
		case <-time.After(downFor):
		case <-r.done:
			return
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.closed {
			return
		}
		lis, err := net.Listen("tcp", r.address)
		if err != nil {
			return // the address was taken meanwhile: down for good
		}
		r.lis = lis
		r.wg.Go(func() { r.accept(lis) })
	})
}

func (r *refuser) close() {
	close(r.done)
	r.mu.Lock()
	r.closed = true
	if r.lis != nil {
		r.lis.Close()
	}
	for c := range r.conns {
		c.Close()
	}
	r.mu.Unlock()
	r.wg.Wait()
}

// HTTP/2 frame types and flags (RFC 9113, section 6).
const (
	frameHeaders  = 0x1
	frameSettings = 0x4
	framePing     = 0x6
	frameGoAway   = 0x7
	flagAck       = 0x1
)

const clientPreface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

// serve runs one connection until the client closes it.
func (r *refuser) serve(conn net.Conn) {
	preface := make([]byte, len(clientPreface))
	if _, err := io.ReadFull(conn, preface); err != nil || string(preface) != clientPreface {
		return
	}
	var wmu sync.Mutex // the GOAWAY is written from a timer
	write := func(typ, flags byte, payload []byte) error {
		wmu.Lock()
		defer wmu.Unlock()
		return writeFrame(conn, typ, flags, 0, payload)
	}
	if write(frameSettings, 0, nil) != nil {
		return
	}
	header := make([]byte, 9)
	var first uint32 // the connection's first stream, once it came
	for {
		if _, err := io.ReadFull(conn, header); err != nil {
			return
		}
		length := int(header[0])<<16 | int(header[1])<<8 | int(header[2])
		typ, flags := header[3], header[4]
		stream := binary.BigEndian.Uint32(header[5:]) & (1<<31 - 1)
		payload := make([]byte, length)
		if _, err := io.ReadFull(conn, payload); err != nil {
			return
		}
		var err error
		switch {
		case typ == frameSettings && flags&flagAck == 0:
			err = write(frameSettings, flagAck, nil)
		case typ == framePing && flags&flagAck == 0:
			err = write(framePing, flagAck, payload)
		case typ == frameHeaders && first == 0:
			first = stream
			r.refused.Add(1)
			r.wg.Go(func() {
				select {
				case <-time.After(refuseAfter):
				case <-r.done:
					return
				}
				// Last stream: the one before the first; NO_ERROR.
				goAway := make([]byte, 8)
				binary.BigEndian.PutUint32(goAway, max(first, 2)-2)
				_ = write(frameGoAway, 0, goAway)
				r.drain()
			})
		case typ == frameHeaders:
			r.refused.Add(1)
		}
		if err != nil {
			return
		}
	}
}

func writeFrame(w io.Writer, typ, flags byte, stream uint32, payload []byte) error {
	if len(payload) >= 1<<24 {
		return errors.New("frame too large")
	}
	b := make([]byte, 9, 9+len(payload))
	b[0], b[1], b[2] = byte(len(payload)>>16), byte(len(payload)>>8), byte(len(payload))
	b[3], b[4] = typ, flags
	binary.BigEndian.PutUint32(b[5:], stream)
	_, err := w.Write(append(b, payload...))
	return err
}
