package subset

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/pickwise/pickwise/internal/childpolicy"
	"github.com/pickwise/pickwise/internal/engine"
	"github.com/pickwise/pickwise/lbconfig"
	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/serviceconfig"
)

// Mode chooses the algorithm used when the client index is known.
type Mode string

// The modes; see the package documentation for the algorithms and the
// trade-off.
const (
	// ModeBalanced, the default, is a capacity-bounded rendezvous
	// assignment over the whole fleet: every backend within ±1 client of
	// the mean, more pairs moved on a change when few clients share a
	// backend.
	ModeBalanced Mode = "balanced"
	// ModeStable is rendezvous hashing on the client index: the minimum
	// churn, statistical balance.
	ModeStable Mode = "stable"
)

// DefaultChildPolicy is the child used when childPolicy is absent. The
// parent does not import it: a parent policy builds its child through
// grpc's balancer registry, so that it works with any child and a program
// links only the policies it uses. The program must therefore register it
// with a blank import of github.com/pickwise/pickwise/balancer/p2c or name
// another child.
const DefaultChildPolicy = "pickwise_p2c"

// defaultChild is DefaultChildPolicy, a variable so that a test can check
// the error for an unregistered default (p2c is registered in the test
// binary, and grpc has no public way to unregister it).
var defaultChild = DefaultChildPolicy

// MaxBalancedClientCount bounds clientCount in balanced mode: every client
// computes the assignment of all clients before it, and the channel's
// balancer calls wait for it, so an absurd count would stall the channel.
// Each change of the backend list walks every row up to this client's: at
// the bound, the last client takes about 13 ms with 100 backends, 11 to
// 13 ms with 1,000, 7 ms with 10,000 and 17 to 20 ms with 50,000
// (BenchmarkBalanced and BenchmarkBalancedUpdate in internal/subsetting,
// subsets of 20), and nothing is kept between changes. Beyond the bound
// use ModeStable, whose cost does not depend on the index.
const MaxBalancedClientCount = 10000

// MaxNesting bounds how many parent configs (pickwise_subset and
// pickwise_shadow, in any mix) may nest inside each other through their
// child policies, the outermost counting as one. A subset of a
// subset has no use beyond a level or two (both filter the same list),
// and each level's parser is handed its child's JSON by grpc's registry
// and decodes it again, so the work grows with the square of the depth:
// 3,300 levels (190 KB) took 8 s and 2.8 GB of allocations to parse
// before the bound, and are now rejected in 0.1 ms. At the bound, a
// config is decoded at most 16 times over.
const MaxNesting = 16

// Config is pickwise_subset's service-config object.
type Config struct {
	serviceconfig.LoadBalancingConfig `json:"-"`

	// SubsetSize is how many backends this client connects to. Required,
	// > 0; when the resolver returns no more than that, the child gets them
	// all.
	SubsetSize int `json:"subsetSize"`
	// ClientIndex and ClientCount, given together with 0 <= index < count,
	// select the index-based modes: this client's row of the assignment of
	// count clients. Every client of the fleet must use the same count and
	// a distinct index (see [IndexFromHostname]).
	ClientIndex *int `json:"clientIndex,omitempty"`
	ClientCount *int `json:"clientCount,omitempty"`
	// ClientID seeds the rendezvous ranking used when no index is given,
	// so the subset survives restarts. Empty means a random seed drawn when
	// the balancer is built and kept for its lifetime (gRFC A68). Ignored
	// when an index is given.
	ClientID string `json:"clientId,omitempty"`
	// Mode is ModeBalanced (the default) or ModeStable; it applies only
	// with an index.
	Mode Mode `json:"mode,omitempty"`
	// ChildPolicy is the policy that balances over the subset, written as
	// a loadBalancingConfig list: the first registered policy is taken and
	// its config is parsed by its own parser. Default
	// [{"pickwise_p2c":{}}].
	ChildPolicy ChildPolicy `json:"childPolicy"`
	// RejoinHold is how long a backend that left the list and came back
	// stays out of the subsets: a backend that flaps then does not take
	// its slots back, and move the clients that use them, on every return.
	// A backend never seen before joins at once. Default DefaultRejoinHold;
	// "0s" readmits at once.
	RejoinHold lbconfig.Duration `json:"rejoinHold"`
}

// DefaultRejoinHold is RejoinHold's default, as pickwise_ring_hash's.
const DefaultRejoinHold = 30 * time.Second

// ChildPolicy is the child chosen from a loadBalancingConfig list.
type ChildPolicy struct {
	// Name is the registered name of the child policy.
	Name string
	// Config is what the child's ParseConfig returned, nil for a policy
	// without a config parser.
	Config serviceconfig.LoadBalancingConfig
}

// DefaultConfig returns the defaults that a user's JSON is decoded over.
// ChildPolicy is left empty: ParseConfig resolves the default child
// through the registry, which can fail.
func DefaultConfig() *Config {
	return &Config{Mode: ModeBalanced, RejoinHold: lbconfig.Duration(DefaultRejoinHold)}
}

// ParseConfig reads a pickwise_subset config: defaults first, then the
// user's fields over them, then the rules below. Unknown fields are
// rejected.
func ParseConfig(js json.RawMessage) (serviceconfig.LoadBalancingConfig, error) {
	// Checked before decoding, in one pass, since decoding is what grows
	// with the square of the depth.
	if nestedTooDeep(js) {
		return nil, fmt.Errorf("%s: childPolicy: pickwise_subset and pickwise_shadow nested more than %d deep: must be at most %d", Name, MaxNesting, MaxNesting)
	}
	cfg := DefaultConfig()
	if err := engine.DecodeConfig(Name, js, cfg); err != nil {
		return nil, err
	}
	// A client with no backend cannot send anything; gRFC A68 rejects
	// subset_size 0 the same way.
	if cfg.SubsetSize <= 0 {
		return nil, fmt.Errorf("%s: subsetSize %d: must be > 0 (required)", Name, cfg.SubsetSize)
	}
	switch cfg.Mode {
	case ModeBalanced, ModeStable:
	default:
		return nil, fmt.Errorf("%s: mode %q: must be %q or %q", Name, cfg.Mode, ModeBalanced, ModeStable)
	}
	// The index is meaningless without the count (the assignment has
	// count rows) and vice versa; a half-given pair is a typo, not a
	// request for rendezvous.
	switch idx, cnt := cfg.ClientIndex, cfg.ClientCount; {
	case idx == nil && cnt == nil:
	case cnt == nil:
		return nil, fmt.Errorf("%s: clientIndex %d: requires clientCount", Name, *idx)
	case idx == nil:
		return nil, fmt.Errorf("%s: clientCount %d: requires clientIndex", Name, *cnt)
	case *cnt < 1:
		return nil, fmt.Errorf("%s: clientCount %d: must be >= 1", Name, *cnt)
	case *idx < 0 || *idx >= *cnt:
		return nil, fmt.Errorf("%s: clientIndex %d: must be in [0, clientCount %d)", Name, *idx, *cnt)
	case cfg.Mode == ModeBalanced && *cnt > MaxBalancedClientCount:
		return nil, fmt.Errorf("%s: clientCount %d: must be <= %d in mode %q (use %q)", Name, *cnt, MaxBalancedClientCount, ModeBalanced, ModeStable)
	}
	if h := time.Duration(cfg.RejoinHold); h < 0 || h > time.Hour {
		return nil, fmt.Errorf("%s: rejoinHold %v: must be in [0s, 1h0m0s]", Name, h)
	}
	if cfg.ChildPolicy.Name == "" {
		if balancer.Get(defaultChild) == nil {
			return nil, fmt.Errorf("%s: childPolicy: default child %q is not registered: import github.com/pickwise/pickwise/balancer/p2c or set childPolicy", Name, defaultChild)
		}
		cp, err := parseChildPolicy([]byte(`[{"` + defaultChild + `":{}}]`))
		if err != nil {
			return nil, fmt.Errorf("%s: %v", Name, err)
		}
		cfg.ChildPolicy = cp
	}
	return cfg, nil
}

// UnmarshalJSON parses a loadBalancingConfig list the way grpc parses the
// channel's own (its internal gracefulswitch.ParseConfig): entries naming
// unregistered policies are skipped, the first registered one is taken
// and its config is validated by its own parser, so a child's error
// reaches the user with the child's message. null keeps the default.
func (c *ChildPolicy) UnmarshalJSON(b []byte) error {
	if childpolicy.IsNull(b) {
		return nil
	}
	cp, err := parseChildPolicy(b)
	if err != nil {
		return err
	}
	*c = cp
	return nil
}

func parseChildPolicy(b []byte) (ChildPolicy, error) {
	name, cfg, err := childpolicy.Parse("childPolicy", b)
	return ChildPolicy{Name: name, Config: cfg}, err
}

// MarshalJSON writes the child as the one-entry loadBalancingConfig list
// ParseConfig reads, so that a parsed Config survives a JSON round trip (grpc's
// xDS cluster resolver marshals parsed child configs and parses them again).
func (c ChildPolicy) MarshalJSON() ([]byte, error) {
	return childpolicy.Marshal(c.Name, c.Config)
}

// nestedTooDeep reports whether js nests more than MaxNesting parent
// configs (pickwise_subset and pickwise_shadow, in any mix).
func nestedTooDeep(js []byte) bool { return childpolicy.TooDeep(js, MaxNesting) }

// nesting is childpolicy.Nesting: how many parent configs js holds along
// its deepest path, up to just past limit.
func nesting(js []byte, limit int) int { return childpolicy.Nesting(js, limit) }
