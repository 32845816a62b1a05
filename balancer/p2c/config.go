package p2c

import (
	"encoding/json"
	"fmt"
	"math"

	"github.com/pickwise/pickwise/internal/engine"
	"github.com/pickwise/pickwise/lbconfig"
	"google.golang.org/grpc/serviceconfig"
)

// Config is pickwise_p2c's service-config object. Build one in Go from
// DefaultConfig: the fields a struct literal leaves at zero are settings,
// not the defaults, and most of them turn a feature off.
type Config struct {
	serviceconfig.LoadBalancingConfig `json:"-"`

	// ChoiceCount is how many distinct endpoints each pick samples. Default
	// 2; values below 2 are rejected and values above 10 become 10 (gRFC
	// A48).
	ChoiceCount uint32 `json:"choiceCount"`
	// ActiveRequestBias is the exponent of (inFlight + 1) in the cost when
	// weights differ: 1 (the default) weighs in-flight requests and weight
	// equally, larger values favour the least loaded endpoint over the
	// heaviest, and 0 leaves in-flight counts out: calls go to endpoints
	// in proportion to their weights (1:3 gives 25% and 75%), as Envoy's
	// active_request_bias 0 does. With equal weights every value compares
	// in-flight counts. Must be in [0, 100].
	ActiveRequestBias float64 `json:"activeRequestBias"`
	// SlowStart ramps the weight of endpoints that join or recover. On by
	// default; {"enabled": false} turns it off, as does nil in Go.
	SlowStart *lbconfig.SlowStartConfig `json:"slowStart"`
	// FailurePenalty passes over endpoints with recent server-side
	// failures with a probability that grows with the evidence against
	// them (see lbconfig.FailurePenaltyConfig). On by default;
	// {"enabled": false} turns it off, and with it ejection.
	FailurePenalty lbconfig.FailurePenaltyConfig `json:"failurePenalty"`
	// Ejection takes an endpoint whose failures stand far above the
	// fleet's out of placement for a while, with probe calls and
	// probation. On by default; {"enabled": false} turns it off.
	Ejection lbconfig.EjectionConfig `json:"ejection"`
	// RemovalGrace is how long the READY connection of an endpoint the
	// resolver removed is kept, in case it returns: one that returns on
	// it keeps its statistics, and no new slow-start ramp starts (see
	// lbconfig.DefaultRemovalGrace). Default "10s"; "0s" closes it at
	// once; at most "10m".
	RemovalGrace lbconfig.Duration `json:"removalGrace"`
}

// Defaults of the fields above.
const (
	DefaultChoiceCount       = 2
	DefaultActiveRequestBias = 1.0
	maxActiveRequestBias     = 100
)

// DefaultConfig returns the config used for an empty JSON object.
func DefaultConfig() *Config {
	slow := lbconfig.DefaultSlowStart()
	return &Config{
		ChoiceCount:       DefaultChoiceCount,
		ActiveRequestBias: DefaultActiveRequestBias,
		SlowStart:         &slow,
		FailurePenalty:    lbconfig.DefaultFailurePenalty(),
		Ejection:          lbconfig.DefaultEjection(),
		RemovalGrace:      lbconfig.Duration(lbconfig.DefaultRemovalGrace),
	}
}

// ParseConfig reads a pickwise_p2c config: defaults first, then the user's
// fields over them, then the rules below. Unknown fields are rejected.
func ParseConfig(js json.RawMessage) (serviceconfig.LoadBalancingConfig, error) {
	// Every policy's ParseConfig has this shape (decode over the
	// defaults, the policy's own rules, then the shared parts' Validate),
	// so that each policy's config reads on its own; the shared parts'
	// rules are written once, in lbconfig.
	cfg := DefaultConfig()
	if err := engine.DecodeConfig(Name, js, cfg); err != nil {
		return nil, err
	}
	if err := engine.ClampChoiceCount(Name, &cfg.ChoiceCount); err != nil {
		return nil, err
	}
	// Envoy requires active_request_bias >= 0. The upper bound is ours: past
	// it (inFlight+1)^bias overflows to +Inf for modest in-flight counts and
	// every candidate would tie.
	if !(cfg.ActiveRequestBias >= 0) || cfg.ActiveRequestBias > maxActiveRequestBias || math.IsInf(cfg.ActiveRequestBias, 0) {
		return nil, fmt.Errorf("%s: activeRequestBias %v: must be in [0, %d]", Name, cfg.ActiveRequestBias, maxActiveRequestBias)
	}
	if err := cfg.SlowStart.Validate(Name); err != nil {
		return nil, err
	}
	if err := cfg.FailurePenalty.Validate(Name); err != nil {
		return nil, err
	}
	if err := cfg.Ejection.Validate(Name); err != nil {
		return nil, err
	}
	if err := lbconfig.ValidateRemovalGrace(Name, cfg.RemovalGrace); err != nil {
		return nil, err
	}
	return cfg, nil
}
