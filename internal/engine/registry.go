package engine

import (
	"encoding/json"
	"sync"

	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/serviceconfig"
)

// This file is where policies meet grpc: Register puts a Spec in grpc's
// balancer registry and ours, and the typed helpers build a Spec from a
// config type and a picker constructor. It sits above everything else in
// the engine, since registering a policy means being able to build its
// balancer.

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
	bal := b.spec.Build(cc, bOpts, Options{})
	if eb, ok := bal.(*engineBalancer); ok {
		// Only grpc's balancers are listed for introspection: the
		// simulator's and tests' own are not the process's channels.
		registerLive(eb)
	}
	return bal
}

func (b builder) ParseConfig(js json.RawMessage) (serviceconfig.LoadBalancingConfig, error) {
	return b.spec.ParseConfig(js)
}

// LeastLoadedSpec describes a policy that is the engine's d-choice picker
// over a load metric: a config type and how to read it. Everything else,
// from connections to slow start, is the engine's.
type LeastLoadedSpec[C serviceconfig.LoadBalancingConfig] struct {
	Name        string
	ParseConfig func(json.RawMessage) (serviceconfig.LoadBalancingConfig, error)
	// Defaults is the config of a policy built without one.
	Defaults func() C
	// Settings are the engine settings a config asks for.
	Settings func(C) Settings
	// Choices is the config's choiceCount.
	Choices func(C) int
	// Metric is the load metric pickers over snap compare.
	Metric func(cfg C, snap *Snapshot) LoadMetric
	// Metrics are the policy's metrics (RegisterMetrics with
	// LeastLoadedReasons); nil records none.
	Metrics *Metrics
}

// RegisterLeastLoaded registers a d-choice policy (see Register).
func RegisterLeastLoaded[C serviceconfig.LoadBalancingConfig](s LeastLoadedSpec[C]) {
	// A d-choice picker compares in-flight counts with each other: a
	// parent's calls are load like its own (Spec.ParentLoad).
	registerTyped(s.Name, s.ParseConfig, s.Metrics, true, s.Defaults, s.Settings, func(cfg C, snap *Snapshot, _ any) (balancer.Picker, any) {
		return NewLeastLoaded(snap, s.Choices(cfg), s.Metric(cfg, snap)), nil
	})
}

// RegisterPrequal registers a policy whose picker is Prequal over the
// answers of load probes (Settings.LoadProbing); Metric is unused.
func RegisterPrequal[C serviceconfig.LoadBalancingConfig](s LeastLoadedSpec[C]) {
	registerTyped(s.Name, s.ParseConfig, s.Metrics, true, s.Defaults, s.Settings, func(cfg C, snap *Snapshot, _ any) (balancer.Picker, any) {
		return NewPrequal(snap, s.Choices(cfg)), nil
	})
}

// registerTyped registers a policy whose config is a C: the engine's
// policies differ only in their settings and in the picker they build.
func registerTyped[C serviceconfig.LoadBalancingConfig](name string, parse func(json.RawMessage) (serviceconfig.LoadBalancingConfig, error),
	metrics *Metrics, parentLoad bool, defaults func() C, settings func(C) Settings, newPicker func(C, *Snapshot, any) (balancer.Picker, any)) {
	Register(Spec{
		Name:        name,
		ParseConfig: parse,
		Metrics:     metrics,
		ParentLoad:  parentLoad,
		NewPolicy: func() Policy {
			return &typedPolicy[C]{name: name, defaults: defaults, settings: settings, newPicker: newPicker, cfg: defaults()}
		},
	})
}

// typedPolicy is the Policy of a registerTyped policy. cfg and carry are
// guarded by the engine's lock, like every Policy's state; the rest is
// immutable.
type typedPolicy[C serviceconfig.LoadBalancingConfig] struct {
	name     string
	defaults func() C
	settings func(C) Settings
	// newPicker builds a picker over a snapshot, given what the last
	// one it built left for it (nil before the first), and returns what
	// this one leaves for the next: nil for a policy whose pickers do not
	// take over from each other.
	newPicker func(cfg C, snap *Snapshot, carry any) (balancer.Picker, any)
	cfg       C
	carry     any
}

func (p *typedPolicy[C]) Configure(c serviceconfig.LoadBalancingConfig) (Settings, error) {
	cfg, err := ConfigAs(p.name, c, p.defaults)
	if err != nil {
		return Settings{}, err
	}
	p.cfg = cfg
	return p.settings(cfg), nil
}

func (p *typedPolicy[C]) NewPicker(snap *Snapshot) balancer.Picker {
	picker, carry := p.newPicker(p.cfg, snap, p.carry)
	p.carry = carry
	return picker
}

// WeightedSpec describes a policy that is the engine's smooth weighted
// round robin over weights the engine keeps (Settings.Weights) or static
// ones.
type WeightedSpec[C serviceconfig.LoadBalancingConfig] struct {
	Name        string
	ParseConfig func(json.RawMessage) (serviceconfig.LoadBalancingConfig, error)
	// Defaults is the config of a policy built without one.
	Defaults func() C
	// Settings are the engine settings a config asks for.
	Settings func(C) Settings
	// Metrics are the policy's metrics (RegisterMetrics with
	// WeightedReasons); nil records none.
	Metrics *Metrics
}

// RegisterWeighted registers a weighted round-robin policy (see Register).
func RegisterWeighted[C serviceconfig.LoadBalancingConfig](s WeightedSpec[C]) {
	// Its placement reads no in-flight count (Spec.ParentLoad off).
	registerTyped(s.Name, s.ParseConfig, s.Metrics, false, s.Defaults, s.Settings, weightedPicker[C])
}

// weightedPicker is a weighted policy's picker over snap, taking over from
// where its previous one stood, and where this one stands, for the next:
// the position, not the picker, which would keep its snapshot alive
// while no endpoint is READY and no picker replaces it.
func weightedPicker[C any](_ C, snap *Snapshot, carry any) (balancer.Picker, any) {
	from, _ := carry.(*WeightedRRPosition)
	p := NewWeightedRRAfter(snap, from)
	return p, p.Position()
}
