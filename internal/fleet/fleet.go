// Package fleet runs loopback backends for end-to-end tests and examples,
// and dials balanced channels to them. Each backend is an interop/server
// Server (package github.com/pickwise/pickwise/interop/server), the same
// backend the lab and pickwise-backend run, so there is one server and one
// behavior model; fleet adds what tests want on top: numbered backends,
// Go-typed behaviors, a client whose address list the test controls, and
// helpers that fail the test instead of returning errors.
package fleet

import (
	"errors"
	"fmt"
)

// Fleet is a set of loopback backends that end-to-end tests and examples
// balance across. Using real servers and sockets exercises the whole
// client stack (resolver, balancer, subchannels, transport) rather than a
// fake picker.
type Fleet struct {
	// Backends is indexed like the names: Backends[i].Name() is "backend-i".
	Backends []*Backend
}

// Start launches n backends, each on its own 127.0.0.1 port with the zero
// Behavior. If any backend fails to start, those already started are stopped
// so a failed Start leaks nothing.
func Start(n int) (*Fleet, error) {
	if n < 1 {
		return nil, errors.New("fleet: need at least one backend")
	}
	f := &Fleet{Backends: make([]*Backend, 0, n)}
	for i := range n {
		b, err := newBackend(fmt.Sprintf("backend-%d", i))
		if err != nil {
			f.Close()
			return nil, err
		}
		f.Backends = append(f.Backends, b)
	}
	return f, nil
}

// Addrs lists the backend addresses in index order, ready to pass to Dial.
func (f *Fleet) Addrs() []string {
	addrs := make([]string, len(f.Backends))
	for i, b := range f.Backends {
		addrs[i] = b.Addr()
	}
	return addrs
}

// Close stops every backend. It is idempotent so it can be deferred and also
// called explicitly, and it returns only after all server goroutines exit.
func (f *Fleet) Close() {
	for _, b := range f.Backends {
		b.Stop()
	}
}

// Served snapshots every backend's Served count keyed by name, the server-side
// picture of how load was spread.
func (f *Fleet) Served() map[string]int64 {
	m := make(map[string]int64, len(f.Backends))
	for _, b := range f.Backends {
		m[b.Name()] = b.Served()
	}
	return m
}

// ByAddr finds the backend listening on addr, or nil. Balancers report
// addresses, and tests need the backend behind them to change its behavior.
func (f *Fleet) ByAddr(addr string) *Backend {
	for _, b := range f.Backends {
		if b.Addr() == addr {
			return b
		}
	}
	return nil
}
