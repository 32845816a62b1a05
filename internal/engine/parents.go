package engine

import (
	"google.golang.org/grpc/balancer"
)

// This file is for pickwise's parent policies (pickwise_shadow), which
// build their children themselves: a parent registered here is built by
// the simulator and by tests with a virtual clock and a seeded source, and
// passes them on to the pickwise children it builds.

// ParentBuilder builds a parent policy's balancer with the engine's
// dependencies.
type ParentBuilder func(cc balancer.ClientConn, bOpts balancer.BuildOptions, opts Options) balancer.Balancer

var parents = map[string]ParentBuilder{} // guarded by registryMu

// RegisterParent makes build available to LookupParent under name. The
// parent registers itself with grpc's registry as well, with a builder
// that calls build with the zero Options (the system clock and source).
func RegisterParent(name string, build ParentBuilder) {
	registryMu.Lock()
	parents[name] = build
	registryMu.Unlock()
}

// LookupParent returns the parent registered under name.
func LookupParent(name string) (ParentBuilder, bool) {
	registryMu.Lock()
	defer registryMu.Unlock()
	b, ok := parents[name]
	return b, ok
}

// BuildChild builds the policy registered as name for a parent: a pickwise
// policy or parent with opts, any other through grpc's registry. It
// returns false if name is not registered.
func BuildChild(name string, cc balancer.ClientConn, bOpts balancer.BuildOptions, opts Options) (balancer.Balancer, bool) {
	if spec, ok := Lookup(name); ok {
		return spec.Build(cc, bOpts, opts), true
	}
	if build, ok := LookupParent(name); ok {
		return build(cc, bOpts, opts), true
	}
	builder := balancer.Get(name)
	if builder == nil {
		return nil, false
	}
	return builder.Build(cc, bOpts), true
}
