package fakecc

import (
	"context"
	"fmt"
	"sync"

	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/connectivity"
	estats "google.golang.org/grpc/experimental/stats"
	"google.golang.org/grpc/resolver"
)

// ClientConn is a fake balancer.ClientConn. It records the SubConns a
// balancer creates and the states it reports, and never blocks the
// balancer: the latest state is kept and waiters are woken through a
// one-slot channel.
type ClientConn struct {
	// Embedded so the type satisfies balancer.ClientConn's unexported
	// method; calling a method not overridden below panics, which is what a
	// test or a simulated run should do when a balancer uses something the
	// fake lacks.
	balancer.ClientConn

	// Metrics is what MetricsRecorder returns.
	Metrics *Metrics

	mu       sync.Mutex
	subConns []*SubConn
	state    balancer.State
	updates  int
	wake     chan struct{}
}

// NewClientConn returns an empty fake.
func NewClientConn() *ClientConn {
	return &ClientConn{wake: make(chan struct{}, 1), Metrics: NewMetrics()}
}

// MetricsRecorder returns cc.Metrics, or no recorder when it is nil.
func (cc *ClientConn) MetricsRecorder() estats.MetricsRecorder {
	if cc.Metrics == nil {
		return nil // a nil *Metrics would be a non-nil recorder that panics
	}
	return cc.Metrics
}

// NewSubConn records a SubConn for addrs.
func (cc *ClientConn) NewSubConn(addrs []resolver.Address, opts balancer.NewSubConnOptions) (balancer.SubConn, error) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	sc := &SubConn{cc: cc, addrs: addrs, listener: opts.StateListener, id: len(cc.subConns)}
	cc.subConns = append(cc.subConns, sc)
	cc.notifyLocked()
	return sc, nil
}

// RemoveSubConn is deprecated in grpc and must not be called.
func (cc *ClientConn) RemoveSubConn(balancer.SubConn) {
	panic("fakecc: RemoveSubConn is deprecated")
}

// UpdateAddresses is deprecated in grpc and must not be called.
func (cc *ClientConn) UpdateAddresses(balancer.SubConn, []resolver.Address) {
	panic("fakecc: UpdateAddresses is deprecated")
}

// UpdateState records the balancer's latest state and picker.
func (cc *ClientConn) UpdateState(s balancer.State) {
	cc.mu.Lock()
	cc.state = s
	cc.updates++
	cc.notifyLocked()
	cc.mu.Unlock()
}

// ResolveNow is a no-op.
func (cc *ClientConn) ResolveNow(resolver.ResolveNowOptions) {}

// Target returns a fixed target.
func (cc *ClientConn) Target() string { return "fakecc:///fake" }

func (cc *ClientConn) notifyLocked() {
	select {
	case cc.wake <- struct{}{}:
	default:
	}
}

// State returns the latest state the balancer reported.
func (cc *ClientConn) State() balancer.State {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	return cc.state
}

// Updates counts the balancer's UpdateState calls.
func (cc *ClientConn) Updates() int {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	return cc.updates
}

// SubConns returns every SubConn created so far, oldest first.
func (cc *ClientConn) SubConns() []*SubConn { return cc.SubConnsFrom(0) }

// SubConnsFrom is SubConns()[from:] (nil if there are no more), without
// copying the ones before: a harness that waits for new SubConns one at a
// time over a large fleet would otherwise spend its time copying.
func (cc *ClientConn) SubConnsFrom(from int) []*SubConn {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if from >= len(cc.subConns) {
		return nil
	}
	return append([]*SubConn(nil), cc.subConns[from:]...)
}

// NumSubConns is len(SubConns()).
func (cc *ClientConn) NumSubConns() int {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	return len(cc.subConns)
}

// SubConnFor returns the newest SubConn for addr that has not been shut
// down, or nil.
func (cc *ClientConn) SubConnFor(addr string) *SubConn {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	for i := len(cc.subConns) - 1; i >= 0; i-- {
		sc := cc.subConns[i]
		if sc.addrs[0].Addr == addr && !sc.isShutdown() {
			return sc
		}
	}
	return nil
}

// WaitFor blocks until cond holds for the latest state or ctx ends; it
// returns cond's last error in that case. It checks cond again after every
// state update, new SubConn and connection request.
func (cc *ClientConn) WaitFor(ctx context.Context, cond func(balancer.State) error) error {
	for {
		err := cond(cc.State())
		if err == nil {
			return nil
		}
		select {
		case <-cc.wake:
		case <-ctx.Done():
			return fmt.Errorf("%w: last check: %v", ctx.Err(), err)
		}
	}
}

// WaitForState blocks until the balancer reports want.
func (cc *ClientConn) WaitForState(ctx context.Context, want connectivity.State) error {
	return cc.WaitFor(ctx, func(s balancer.State) error {
		if s.ConnectivityState != want {
			return fmt.Errorf("state %v, want %v", s.ConnectivityState, want)
		}
		return nil
	})
}

// WaitForSubConn blocks until a live SubConn for addr exists.
func (cc *ClientConn) WaitForSubConn(ctx context.Context, addr string) (*SubConn, error) {
	var sc *SubConn
	err := cc.WaitFor(ctx, func(balancer.State) error {
		if sc = cc.SubConnFor(addr); sc == nil {
			return fmt.Errorf("no SubConn for %s", addr)
		}
		return nil
	})
	return sc, err
}

// WaitForPicks blocks until n picks from the latest picker all satisfy
// check, and returns that picker.
func (cc *ClientConn) WaitForPicks(ctx context.Context, n int, check func(balancer.PickResult, error) error) (balancer.Picker, error) {
	var p balancer.Picker
	err := cc.WaitFor(ctx, func(s balancer.State) error {
		p = s.Picker
		if p == nil {
			return fmt.Errorf("no picker yet")
		}
		for i := 0; i < n; i++ {
			res, err := p.Pick(balancer.PickInfo{})
			if err == nil && res.Done != nil {
				res.Done(balancer.DoneInfo{})
			}
			if cerr := check(res, err); cerr != nil {
				return cerr
			}
		}
		return nil
	})
	return p, err
}

// SetReady drives the SubConn of each address through CONNECTING to READY,
// waiting for each to be created first.
func (cc *ClientConn) SetReady(ctx context.Context, addrs ...string) error {
	for _, a := range addrs {
		sc, err := cc.WaitForSubConn(ctx, a)
		if err != nil {
			return err
		}
		sc.UpdateState(balancer.SubConnState{ConnectivityState: connectivity.Connecting})
		sc.UpdateState(balancer.SubConnState{ConnectivityState: connectivity.Ready})
	}
	return nil
}
