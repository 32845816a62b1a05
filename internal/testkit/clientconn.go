package testkit

import "github.com/pickwise/pickwise/internal/fakecc"

// ClientConn is the fake balancer.ClientConn every policy's tests drive by
// hand. It lives in package fakecc, which does not import testing, so that
// the simulator can use it too; the alias keeps the tests' spelling.
type ClientConn = fakecc.ClientConn

// SubConn is the fake balancer.SubConn a ClientConn hands out; see
// ClientConn for why it is an alias.
type SubConn = fakecc.SubConn

// NewClientConn returns an empty fake with a fresh Metrics recorder.
func NewClientConn() *ClientConn { return fakecc.NewClientConn() }
