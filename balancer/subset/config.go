package subset

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/pickwise/pickwise/internal/engine"
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
// computes the assignment of all clients before it, O(clientIndex *
// backends * log backends) time and O(clientIndex * subsetSize) memory on
// each backend change, and the channel's balancer calls wait for it, so an
// absurd count would stall the channel. At the bound, the last client
// takes about 0.17 s with 100 backends and 0.9 s with 1,000 (measured,
// subsets of 20); beyond it use ModeStable, whose cost does not depend on
// the index.
const MaxBalancedClientCount = 10000

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
}

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
	return &Config{Mode: ModeBalanced}
}

// ParseConfig reads a pickwise_subset config: defaults first, then the
// user's fields over them, then the rules below. Unknown fields are
// rejected.
func ParseConfig(js json.RawMessage) (serviceconfig.LoadBalancingConfig, error) {
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
// channel's own (internal/balancer/gracefulswitch.ParseConfig, which is
// internal to grpc): entries naming unregistered policies are skipped, the
// first registered one is taken and its config is validated by its own
// parser, so a child's error reaches the user with the child's message.
// null keeps the default.
func (c *ChildPolicy) UnmarshalJSON(b []byte) error {
	if bytes.Equal(bytes.TrimSpace(b), []byte("null")) {
		return nil
	}
	cp, err := parseChildPolicy(b)
	if err != nil {
		return err
	}
	*c = cp
	return nil
}

// errChildList is the message for a childPolicy that is not a list of
// single-key objects.
var errChildList = errors.New(`childPolicy: must be a list like [{"pickwise_p2c": {}}]`)

func parseChildPolicy(b []byte) (ChildPolicy, error) {
	var list []map[string]json.RawMessage
	if err := json.Unmarshal(b, &list); err != nil {
		return ChildPolicy{}, errChildList
	}
	var names []string
	for i, entry := range list {
		if len(entry) != 1 {
			return ChildPolicy{}, fmt.Errorf("childPolicy[%d]: must have exactly one policy name, has %d", i, len(entry))
		}
		for name, raw := range entry {
			names = append(names, name)
			builder := balancer.Get(name)
			if builder == nil {
				continue // as in grpc: a later entry is the fallback
			}
			parser, ok := builder.(balancer.ConfigParser)
			if !ok {
				return ChildPolicy{Name: name}, nil
			}
			cfg, err := parser.ParseConfig(raw)
			if err != nil {
				return ChildPolicy{}, fmt.Errorf("childPolicy %q: %v", name, err)
			}
			return ChildPolicy{Name: name, Config: cfg}, nil
		}
	}
	return ChildPolicy{}, fmt.Errorf("childPolicy: no registered policy among %q", names)
}

// MarshalJSON writes the child as the one-entry loadBalancingConfig list
// ParseConfig reads, so that a parsed Config survives a JSON round trip (grpc's
// xDS cluster resolver marshals parsed child configs and parses them again).
func (c ChildPolicy) MarshalJSON() ([]byte, error) {
	if c.Name == "" {
		return []byte("null"), nil
	}
	cfg := json.RawMessage("{}")
	if c.Config != nil {
		b, err := json.Marshal(c.Config)
		if err != nil {
			return nil, err
		}
		cfg = b
	}
	return json.Marshal([]map[string]json.RawMessage{{c.Name: cfg}})
}
