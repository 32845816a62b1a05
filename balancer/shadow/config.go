package shadow

import (
	"encoding/json"
	"fmt"

	"github.com/pickwise/pickwise/internal/childpolicy"
	"github.com/pickwise/pickwise/internal/engine"
	"google.golang.org/grpc/serviceconfig"
)

// MaxNesting bounds how many parent configs (pickwise_shadow and
// pickwise_subset, in any mix) may nest inside each other through their
// child policies, the outermost counting as one: each level's parser
// decodes its children's JSON again, so parsing grows with the square of
// the depth.
const MaxNesting = 16

// DefaultSampleRate is the share of picks on which the candidate is asked
// when sampleRate is absent: enough for its shares to settle within a
// point in a few thousand calls, at a tenth of the candidate's pick cost.
const DefaultSampleRate = 0.1

// Config is pickwise_shadow's service-config object.
type Config struct {
	serviceconfig.LoadBalancingConfig `json:"-"`

	// Live is the policy that places calls, as a loadBalancingConfig list
	// (the first registered entry is taken, checked by its own parser).
	// Required.
	Live ChildPolicy `json:"live"`
	// Candidate is the policy evaluated beside it, in the same form.
	// Required.
	Candidate ChildPolicy `json:"candidate"`
	// SampleRate is the share of picks, in [0, 1], on which the candidate
	// is asked where it would send the call; its answer is recorded and
	// never sent. Default DefaultSampleRate.
	SampleRate float64 `json:"sampleRate"`
	// CanaryPercent is the percentage of calls, in [0, 100], that the
	// candidate places for real. Default 0: a shadow only.
	CanaryPercent float64 `json:"canaryPercent"`
}

// ChildPolicy is a child chosen from a loadBalancingConfig list.
type ChildPolicy struct {
	// Name is the registered name of the child policy.
	Name string
	// Config is what the child's ParseConfig returned, nil for a policy
	// without a config parser.
	Config serviceconfig.LoadBalancingConfig
}

// UnmarshalJSON parses a loadBalancingConfig list the way grpc parses the
// channel's own: entries naming unregistered policies are skipped, and the
// first registered one is taken and checked by its own parser. The field
// name in errors is filled in by ParseConfig.
func (c *ChildPolicy) UnmarshalJSON(b []byte) error {
	if childpolicy.IsNull(b) {
		return nil
	}
	name, cfg, err := childpolicy.Parse("policy", b)
	if err != nil {
		return err
	}
	*c = ChildPolicy{Name: name, Config: cfg}
	return nil
}

// MarshalJSON writes the child as the one-entry list UnmarshalJSON reads,
// so that a parsed Config survives a JSON round trip (grpc's xDS cluster
// resolver marshals parsed child configs and parses them again).
func (c ChildPolicy) MarshalJSON() ([]byte, error) {
	return childpolicy.Marshal(c.Name, c.Config)
}

// DefaultConfig returns the defaults a user's JSON is decoded over. The
// children are required and have no default.
func DefaultConfig() *Config {
	return &Config{SampleRate: DefaultSampleRate}
}

// ParseConfig reads a pickwise_shadow config: defaults first, then the
// user's fields over them, then the rules below. Unknown fields are
// rejected.
func ParseConfig(js json.RawMessage) (serviceconfig.LoadBalancingConfig, error) {
	if childpolicy.TooDeep(js, MaxNesting) {
		return nil, fmt.Errorf("%s: pickwise_shadow and pickwise_subset nested more than %d deep: must be at most %d", Name, MaxNesting, MaxNesting)
	}
	// Each child is decoded on its own, so that an error names the field.
	var raw struct {
		Live          json.RawMessage `json:"live"`
		Candidate     json.RawMessage `json:"candidate"`
		SampleRate    *float64        `json:"sampleRate"`
		CanaryPercent *float64        `json:"canaryPercent"`
	}
	if err := engine.DecodeConfig(Name, js, &raw); err != nil {
		return nil, err
	}
	cfg := DefaultConfig()
	for _, f := range []struct {
		name string
		js   json.RawMessage
		dst  *ChildPolicy
	}{{"live", raw.Live, &cfg.Live}, {"candidate", raw.Candidate, &cfg.Candidate}} {
		if len(f.js) == 0 || childpolicy.IsNull(f.js) {
			return nil, fmt.Errorf(`%s: %s: required, a list like [{"round_robin": {}}]`, Name, f.name)
		}
		name, child, err := childpolicy.Parse(f.name, f.js)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", Name, err)
		}
		*f.dst = ChildPolicy{Name: name, Config: child}
	}
	if raw.SampleRate != nil {
		cfg.SampleRate = *raw.SampleRate
	}
	if raw.CanaryPercent != nil {
		cfg.CanaryPercent = *raw.CanaryPercent
	}
	if !(cfg.SampleRate >= 0 && cfg.SampleRate <= 1) {
		return nil, fmt.Errorf("%s: sampleRate %v: must be in [0, 1]", Name, cfg.SampleRate)
	}
	if !(cfg.CanaryPercent >= 0 && cfg.CanaryPercent <= 100) {
		return nil, fmt.Errorf("%s: canaryPercent %v: must be in [0, 100]", Name, cfg.CanaryPercent)
	}
	return cfg, nil
}
