package fakecc

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/status"
)

// SubConn is a fake balancer.SubConn whose connectivity its caller (a test,
// the simulator) sets.
type SubConn struct {
	// Embedded to satisfy balancer.SubConn's unexported method.
	balancer.SubConn

	// Immutable after creation.
	cc       *ClientConn
	id       int
	addrs    []resolver.Address
	listener func(balancer.SubConnState)

	mu       sync.Mutex
	health   func(balancer.SubConnState)
	connects int
	shutdown bool
	streams  []string // methods of the streams producers opened, in order
	closed   int      // producers closed
}

// ID is the SubConn's number: the order in which the fake made it, from
// 0, never reused.
func (sc *SubConn) ID() int { return sc.id }

// Addr is the SubConn's first address.
func (sc *SubConn) Addr() string { return sc.addrs[0].Addr }

// String names the SubConn in test failures.
func (sc *SubConn) String() string { return fmt.Sprintf("subconn-%d(%s)", sc.id, sc.Addr()) }

// Connect counts connection requests and wakes the ClientConn's waiters;
// the caller decides what happens next.
func (sc *SubConn) Connect() {
	sc.mu.Lock()
	sc.connects++
	sc.mu.Unlock()
	sc.cc.mu.Lock()
	sc.cc.notifyLocked()
	sc.cc.mu.Unlock()
}

// Connects is how many times the balancer asked to connect.
func (sc *SubConn) Connects() int {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	return sc.connects
}

// UpdateAddresses is not used by pickfirst children.
func (sc *SubConn) UpdateAddresses([]resolver.Address) {}

// GetOrBuildProducer builds pb's producer over a fake connection on which
// every call fails with Unimplemented, as on a server without the service:
// grpc's ORCA producer then opens its stream once and gives up. The stream
// is recorded (Streams), and so is the producer's close (ProducersClosed),
// so a test sees whether a balancer asked for out-of-band reports and
// stopped asking.
func (sc *SubConn) GetOrBuildProducer(pb balancer.ProducerBuilder) (balancer.Producer, func()) {
	p, closeFn := pb.Build(fakeConn{sc})
	return p, func() {
		closeFn()
		sc.mu.Lock()
		sc.closed++
		sc.mu.Unlock()
	}
}

// Streams lists the methods of the streams producers opened on sc.
func (sc *SubConn) Streams() []string {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	return slices.Clone(sc.streams)
}

// ProducersClosed is how many producers built on sc were closed.
func (sc *SubConn) ProducersClosed() int {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	return sc.closed
}

// fakeConn is the connection a producer on a fake SubConn talks over.
type fakeConn struct{ sc *SubConn }

func (c fakeConn) Invoke(_ context.Context, method string, _, _ any, _ ...grpc.CallOption) error {
	return status.Errorf(codes.Unimplemented, "fakecc: %s is not served", method)
}

func (c fakeConn) NewStream(_ context.Context, _ *grpc.StreamDesc, method string, _ ...grpc.CallOption) (grpc.ClientStream, error) {
	c.sc.mu.Lock()
	c.sc.streams = append(c.sc.streams, method)
	c.sc.mu.Unlock()
	return nil, status.Errorf(codes.Unimplemented, "fakecc: %s is not served", method)
}

// RegisterHealthListener keeps the listener; UpdateState reports READY to
// it, as grpc does when no health check is configured.
func (sc *SubConn) RegisterHealthListener(l func(balancer.SubConnState)) {
	sc.mu.Lock()
	sc.health = l
	sc.mu.Unlock()
}

// Shutdown marks the SubConn as gone. Unlike grpc, it does not report
// SHUTDOWN to the listener: grpc does so later on its own serializer, while
// here the call would re-enter pickfirst under its lock.
func (sc *SubConn) Shutdown() {
	sc.mu.Lock()
	sc.shutdown = true
	sc.mu.Unlock()
}

// IsShutdown reports whether the balancer shut the SubConn down.
func (sc *SubConn) IsShutdown() bool { return sc.isShutdown() }

func (sc *SubConn) isShutdown() bool {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	return sc.shutdown
}

// UpdateState delivers a connectivity change to the balancer. A READY change
// is followed by a READY health update, once pickfirst has registered its
// health listener.
func (sc *SubConn) UpdateState(s balancer.SubConnState) {
	if sc.isShutdown() {
		return
	}
	sc.listener(s)
	if s.ConnectivityState != connectivity.Ready {
		return
	}
	sc.mu.Lock()
	h := sc.health
	sc.mu.Unlock()
	if h != nil {
		h(balancer.SubConnState{ConnectivityState: connectivity.Ready})
	}
}

// SendHealth delivers a health report to the listener the balancer
// registered, if any, as grpc's health producer would.
func (sc *SubConn) SendHealth(s balancer.SubConnState) {
	sc.mu.Lock()
	h := sc.health
	sc.mu.Unlock()
	if h != nil {
		h(s)
	}
}
