package peakewma

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/pickwise/pickwise/internal/engine"
	"github.com/pickwise/pickwise/lbconfig"
	"google.golang.org/grpc/serviceconfig"
)

// Config is pickwise_peak_ewma's service-config object. Build one in Go from
// DefaultConfig: the fields a struct literal leaves at zero are settings,
// not the defaults, and most of them turn a feature off.
type Config struct {
	serviceconfig.LoadBalancingConfig `json:"-"`

	// ChoiceCount is how many distinct endpoints each pick samples. Default
	// 2; below 2 rejected, above 10 clamped to 10 (gRFC A48).
	ChoiceCount uint32 `json:"choiceCount"`
	// DecayTime is the time constant of the latency average. Default "10s"
	// (Finagle's); must be in [10ms, 1h].
	DecayTime lbconfig.Duration `json:"decayTime"`
	// DefaultRTT priced failures as latency before the failure counts
	// judged them by their evidence. It is still accepted, so configs that
	// set it keep parsing, but has no effect. Unset by default; a value
	// other than 0 must be in [1µs, 1m], as before.
	//
	// Deprecated: failures are weighed by failurePenalty and ejection.
	DefaultRTT lbconfig.Duration `json:"defaultRtt,omitempty"`
	// SlowStart ramps the weight of endpoints that join or recover. On by
	// default; {"enabled": false} turns it off, as does nil in Go.
	SlowStart *lbconfig.SlowStartConfig `json:"slowStart"`
	// FailurePenalty passes over endpoints with recent server-side
	// failures with a probability that grows with the evidence against
	// them, as in pickwise_p2c. On by default.
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
	DefaultChoiceCount = 2
	DefaultDecayTime   = 10 * time.Second
)

// Bounds of the durations: below them the average would follow single
// samples, above them it would never forget.
const (
	minDecayTime  = 10 * time.Millisecond
	maxDecayTime  = time.Hour
	minDefaultRTT = time.Microsecond
	maxDefaultRTT = time.Minute
)

// DefaultConfig returns the config used for an empty JSON object.
func DefaultConfig() *Config {
	slow := lbconfig.DefaultSlowStart()
	return &Config{
		ChoiceCount:    DefaultChoiceCount,
		DecayTime:      lbconfig.Duration(DefaultDecayTime),
		SlowStart:      &slow,
		FailurePenalty: lbconfig.DefaultFailurePenalty(),
		Ejection:       lbconfig.DefaultEjection(),
		RemovalGrace:   lbconfig.Duration(lbconfig.DefaultRemovalGrace),
	}
}

// ParseConfig reads a pickwise_peak_ewma config: defaults first, then the
// user's fields over them, then the rules below. Unknown fields are
// rejected.
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
	if d := time.Duration(cfg.DecayTime); d < minDecayTime || d > maxDecayTime {
		return nil, fmt.Errorf("%s: decayTime %q: must be in [%v, %v]", Name, cfg.DecayTime, minDecayTime, maxDecayTime)
	}
	if d := time.Duration(cfg.DefaultRTT); d != 0 && (d < minDefaultRTT || d > maxDefaultRTT) {
		return nil, fmt.Errorf("%s: defaultRtt %q: must be in [%v, %v]", Name, cfg.DefaultRTT, minDefaultRTT, maxDefaultRTT)
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
