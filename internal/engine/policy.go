package engine

import (
	"encoding/json"
	"sync"

	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/serviceconfig"
)

// Policy is what a load-balancing policy supplies to the engine. The engine
// calls both methods with its own lock held, never concurrently, so a
// policy may keep the config it was last given in plain fields.
type Policy interface {
	// Configure applies a config produced by the Spec's ParseConfig and
	// returns the engine-level settings in it.
	Configure(cfg serviceconfig.LoadBalancingConfig) (Settings, error)
	// NewPicker builds an immutable picker over the READY endpoints in snap.
	NewPicker(snap *Snapshot) balancer.Picker
}

// Settings are the parts of a policy's config that the engine applies.
type Settings struct {
	// SlowStart turns slow start on when not nil. It must be validated.
	SlowStart *SlowStartConfig
	// FailurePenalty configures the failure penalty. It must be validated.
	FailurePenalty FailurePenaltyConfig
	// Latency, when not nil, makes the engine time every call and keep the
	// per-endpoint latency average that Snapshot.PeakLoad reads.
	Latency *LatencyConfig
}

// Spec describes one policy: its registry name, its config parser and a
// constructor for its per-balancer Policy.
type Spec struct {
	Name        string
	ParseConfig func(json.RawMessage) (serviceconfig.LoadBalancingConfig, error)
	NewPolicy   func() Policy
}

// Options inject the engine's dependencies. The zero value means the wall
// clock and the runtime's random source.
type Options struct {
	Clock Clock
	Rand  Rand
}

var (
	registryMu sync.Mutex
	registry   = map[string]Spec{}
)

// Register makes spec available to grpc's balancer registry, so that service
// configs can name it, and to Lookup, so that tests and the simulator can
// build it with a virtual clock. Call it from the policy package's init.
func Register(spec Spec) {
	registryMu.Lock()
	registry[spec.Name] = spec
	registryMu.Unlock()
	balancer.Register(builder{spec: spec})
}

// Lookup returns the Spec registered under name.
func Lookup(name string) (Spec, bool) {
	registryMu.Lock()
	defer registryMu.Unlock()
	s, ok := registry[name]
	return s, ok
}

// Build builds a balancer for spec with the given dependencies.
func (s Spec) Build(cc balancer.ClientConn, bOpts balancer.BuildOptions, opts Options) balancer.Balancer {
	if opts.Clock == nil {
		opts.Clock = SystemClock{}
	}
	if opts.Rand == nil {
		opts.Rand = SystemRand{}
	}
	return newBalancer(s, cc, bOpts, opts)
}

// builder adapts a Spec to grpc's balancer.Builder and ConfigParser.
type builder struct{ spec Spec }

func (b builder) Name() string { return b.spec.Name }

func (b builder) Build(cc balancer.ClientConn, bOpts balancer.BuildOptions) balancer.Balancer {
	return b.spec.Build(cc, bOpts, Options{})
}

func (b builder) ParseConfig(js json.RawMessage) (serviceconfig.LoadBalancingConfig, error) {
	return b.spec.ParseConfig(js)
}
