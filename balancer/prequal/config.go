package prequal

import (
	"encoding/json"
	"fmt"
	"math"
	"time"

	"github.com/pickwise/pickwise/internal/engine"
	"github.com/pickwise/pickwise/lbconfig"
	"google.golang.org/grpc/serviceconfig"
)

// Config is pickwise_prequal's service-config object. Build one in Go from
// DefaultConfig: the fields a struct literal leaves at zero are settings,
// not the defaults, and most of them turn a feature off.
type Config struct {
	serviceconfig.LoadBalancingConfig `json:"-"`

	// PoolSize is how many recent answers the pool keeps. Default 16, as in
	// the Prequal paper; must be in [2, 32].
	PoolSize uint32 `json:"poolSize"`
	// MaxAge is how old an answer may be and still place a call. Default
	// "1s"; must be in [10ms, 1m].
	MaxAge lbconfig.Duration `json:"maxAge"`
	// ReuseBudget is how many calls one answer may place before it is
	// dropped from the pool; a call's own report renews it. Default 1;
	// must be in [1, 1000].
	ReuseBudget uint32 `json:"reuseBudget"`
	// HotQuantile draws the line between hot and cold answers: an answer
	// whose requests in flight are above this quantile of the pool's is
	// hot. Default 0.7; must be in (0, 1].
	HotQuantile float64 `json:"hotQuantile"`
	// MinProbeRate is the probes per call sent while the pool is full of
	// fresh answers; an emptier pool asks for more, at most one per call.
	// Default 0.1; must be in [0, 1].
	MinProbeRate float64 `json:"minProbeRate"`
	// ProbeTimeout bounds one probe. Default "1s"; must be in [1ms, 1m].
	ProbeTimeout lbconfig.Duration `json:"probeTimeout"`
	// ChoiceCount is how many endpoints a pick samples when the pool has
	// fewer than two usable answers, and it compares in-flight counts as
	// pickwise_p2c does. Default 2; values below 2 are rejected and values
	// above 10 become 10.
	ChoiceCount uint32 `json:"choiceCount"`
	// SlowStart, FailurePenalty, Ejection and RemovalGrace are as in every
	// pickwise policy: see the lbconfig package.
	SlowStart      *lbconfig.SlowStartConfig     `json:"slowStart"`
	FailurePenalty lbconfig.FailurePenaltyConfig `json:"failurePenalty"`
	Ejection       lbconfig.EjectionConfig       `json:"ejection"`
	RemovalGrace   lbconfig.Duration             `json:"removalGrace"`
}

// Defaults and bounds of the fields above.
const (
	DefaultPoolSize     = 16
	DefaultMaxAge       = time.Second
	DefaultReuseBudget  = 1
	DefaultHotQuantile  = 0.7
	DefaultMinProbeRate = 0.1
	DefaultProbeTimeout = time.Second
	DefaultChoiceCount  = 2

	minMaxAge, maxMaxAge             = 10 * time.Millisecond, time.Minute
	minProbeTimeout, maxProbeTimeout = time.Millisecond, time.Minute
	maxReuseBudget                   = 1000
)

// DefaultConfig returns the config used for an empty JSON object.
func DefaultConfig() *Config {
	slow := lbconfig.DefaultSlowStart()
	return &Config{
		PoolSize:       DefaultPoolSize,
		MaxAge:         lbconfig.Duration(DefaultMaxAge),
		ReuseBudget:    DefaultReuseBudget,
		HotQuantile:    DefaultHotQuantile,
		MinProbeRate:   DefaultMinProbeRate,
		ProbeTimeout:   lbconfig.Duration(DefaultProbeTimeout),
		ChoiceCount:    DefaultChoiceCount,
		SlowStart:      &slow,
		FailurePenalty: lbconfig.DefaultFailurePenalty(),
		Ejection:       lbconfig.DefaultEjection(),
		RemovalGrace:   lbconfig.Duration(lbconfig.DefaultRemovalGrace),
	}
}

// ParseConfig reads a pickwise_prequal config: defaults first, then the
// user's fields over them, then the rules below. Unknown fields are
// rejected.
func ParseConfig(js json.RawMessage) (serviceconfig.LoadBalancingConfig, error) {
	cfg := DefaultConfig()
	if err := engine.DecodeConfig(Name, js, cfg); err != nil {
		return nil, err
	}
	// The pool is scanned on every pick: its bound keeps a pick's cost
	// near a d-choice pick's.
	if cfg.PoolSize < 2 || cfg.PoolSize > engine.MaxLoadPool {
		return nil, fmt.Errorf("%s: poolSize %d: must be in [2, %d]", Name, cfg.PoolSize, engine.MaxLoadPool)
	}
	if d := time.Duration(cfg.MaxAge); d < minMaxAge || d > maxMaxAge {
		return nil, fmt.Errorf("%s: maxAge %q: must be in [%v, %v]", Name, cfg.MaxAge, minMaxAge, maxMaxAge)
	}
	if cfg.ReuseBudget < 1 || cfg.ReuseBudget > maxReuseBudget {
		return nil, fmt.Errorf("%s: reuseBudget %d: must be in [1, %d]", Name, cfg.ReuseBudget, maxReuseBudget)
	}
	if !(cfg.HotQuantile > 0 && cfg.HotQuantile <= 1) {
		return nil, fmt.Errorf("%s: hotQuantile %v: must be in (0, 1]", Name, cfg.HotQuantile)
	}
	// At most one probe per call: probes are the policy's cost to servers.
	if !(cfg.MinProbeRate >= 0 && cfg.MinProbeRate <= 1) || math.IsNaN(cfg.MinProbeRate) {
		return nil, fmt.Errorf("%s: minProbeRate %v: must be in [0, 1]", Name, cfg.MinProbeRate)
	}
	if d := time.Duration(cfg.ProbeTimeout); d < minProbeTimeout || d > maxProbeTimeout {
		return nil, fmt.Errorf("%s: probeTimeout %q: must be in [%v, %v]", Name, cfg.ProbeTimeout, minProbeTimeout, maxProbeTimeout)
	}
	if err := engine.ClampChoiceCount(Name, &cfg.ChoiceCount); err != nil {
		return nil, err
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

// probing is the engine's form of the config's probing fields.
func (c *Config) probing() *engine.LoadProbingConfig {
	return &engine.LoadProbingConfig{
		PoolSize:     int(c.PoolSize),
		MaxAge:       time.Duration(c.MaxAge),
		ReuseBudget:  int(c.ReuseBudget),
		HotQuantile:  c.HotQuantile,
		MinProbeRate: c.MinProbeRate,
		Timeout:      time.Duration(c.ProbeTimeout),
	}
}
