package subset

import (
	"encoding/json"
	"fmt"
	"sync"

	"github.com/pickwise/pickwise/internal/engine"
	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/serviceconfig"
)

// testChildName is a child policy registered only in this test binary: it
// records what the parent forwards, so the parent's filtering is checked
// without any SubConn.
const testChildName = "pickwise_subset_test_child"

// testChildOther is a second recording policy, for child switches.
const testChildOther = "pickwise_subset_test_child_other"

func init() {
	balancer.Register(recBuilder{testChildName})
	balancer.Register(recBuilder{testChildOther})
}

// recConfig is the recording child's config; {"reject": true} fails to
// parse with a message the parent must pass on.
type recConfig struct {
	serviceconfig.LoadBalancingConfig `json:"-"`
	Reject                            bool   `json:"reject"`
	Tag                               string `json:"tag"`
}

type recBuilder struct{ name string }

func (r recBuilder) Name() string { return r.name }

func (r recBuilder) ParseConfig(js json.RawMessage) (serviceconfig.LoadBalancingConfig, error) {
	cfg := &recConfig{}
	if err := engine.DecodeConfig(r.name, js, cfg); err != nil {
		return nil, err
	}
	if cfg.Reject {
		return nil, fmt.Errorf("%s: reject true: rejected on request", r.name)
	}
	return cfg, nil
}

func (r recBuilder) Build(cc balancer.ClientConn, _ balancer.BuildOptions) balancer.Balancer {
	c := &recChild{name: r.name, cc: cc}
	builtMu.Lock()
	built = append(built, c)
	builtMu.Unlock()
	return c
}

var (
	builtMu sync.Mutex
	built   []*recChild // every recording child, oldest first
)

// lastChild returns the newest recording child.
func lastChild() *recChild {
	builtMu.Lock()
	defer builtMu.Unlock()
	if len(built) == 0 {
		return nil
	}
	return built[len(built)-1]
}

// recChild records the calls it gets. The parent calls it synchronously
// from the test goroutine, but the mutex keeps -race quiet if a test reads
// it from elsewhere.
type recChild struct {
	name string
	cc   balancer.ClientConn

	mu             sync.Mutex
	states         []balancer.ClientConnState
	resolverErrors []error
	exitIdles      int
	closed         bool
}

func (c *recChild) UpdateClientConnState(s balancer.ClientConnState) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.states = append(c.states, s)
	if len(s.ResolverState.Endpoints) == 0 {
		return balancer.ErrBadResolverState
	}
	return nil
}

func (c *recChild) ResolverError(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.resolverErrors = append(c.resolverErrors, err)
}

func (c *recChild) UpdateSubConnState(balancer.SubConn, balancer.SubConnState) {}

func (c *recChild) ExitIdle() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.exitIdles++
}

func (c *recChild) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
}

// last returns the last state the child received.
func (c *recChild) last() balancer.ClientConnState {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.states[len(c.states)-1]
}

// ids returns the identities of the endpoints in the last state, in the
// order received.
func (c *recChild) ids() []string {
	var out []string
	for _, ep := range c.last().ResolverState.Endpoints {
		out = append(out, ep.Addresses[0].Addr)
	}
	return out
}

// endpointsOf builds one single-address endpoint per address.
func endpointsOf(addrs []string) []resolver.Endpoint {
	eps := make([]resolver.Endpoint, len(addrs))
	for i, a := range addrs {
		eps[i] = resolver.Endpoint{Addresses: []resolver.Address{{Addr: a}}}
	}
	return eps
}
