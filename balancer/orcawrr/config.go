package orcawrr

import (
	"encoding/json"
	"fmt"
	"math"
	"time"

	"github.com/pickwise/pickwise/internal/engine"
	"github.com/pickwise/pickwise/internal/warn"
	"github.com/pickwise/pickwise/lbconfig"
	"github.com/pickwise/pickwise/orcaweight"
	"google.golang.org/grpc/serviceconfig"
)

// Config is pickwise_orca_wrr's service-config object. The fields gRFC A58
// defines for grpc's weighted_round_robin have the same names, defaults and
// meaning, so a config moves between the two by changing the policy name.
// Build one in Go from DefaultConfig: the fields a struct literal leaves at
// zero are settings, not the defaults, and most of them turn a feature off.
type Config struct {
	serviceconfig.LoadBalancingConfig `json:"-"`

	// EnableOOBLoadReport takes load reports from an ORCA stream on each
	// connection instead of from each call's trailer. Default false.
	EnableOOBLoadReport bool `json:"enableOobLoadReport"`
	// OOBReportingPeriod is the report interval asked of the backend;
	// the backend may send less often (grpc-go's ORCA service: at most
	// every 30s). Default "10s"; must be > 0. (A58)
	OOBReportingPeriod lbconfig.Duration `json:"oobReportingPeriod"`
	// BlackoutPeriod is how long an endpoint must report before its weight
	// is used, after it connects and after its weight expired. Default
	// "10s"; must be >= 0. (A58)
	BlackoutPeriod lbconfig.Duration `json:"blackoutPeriod"`
	// WeightExpirationPeriod is how long a weight lasts without a report.
	// Default "3m"; must be > 0. (A58)
	WeightExpirationPeriod lbconfig.Duration `json:"weightExpirationPeriod"`
	// WeightUpdatePeriod is how often weights are recomputed and the
	// schedule rebuilt. Default "1s"; below "100ms" it is raised to
	// "100ms". (A58)
	WeightUpdatePeriod lbconfig.Duration `json:"weightUpdatePeriod"`
	// ErrorUtilizationPenalty weighs the error rate (eps/qps) into the
	// utilization. Default 1.0; must be >= 0. (A58)
	ErrorUtilizationPenalty float64 `json:"errorUtilizationPenalty"`
	// WeightHalfLife is the half-life of the average that smooths weights
	// across updates: a report's noise moves traffic less, a real change
	// in capacity is followed within a few half-lives. "0s" uses each
	// update's reports alone, as grpc's weighted_round_robin does. Default
	// "5s"; must be in [0, 1h].
	WeightHalfLife lbconfig.Duration `json:"weightHalfLife"`
	// MetricNamesForComputingUtilization names utilization metrics in the
	// reports' named utilization map; the largest present is the
	// utilization. Default none: application_utilization, then
	// cpu_utilization. (gRFC A114)
	MetricNamesForComputingUtilization []string `json:"metricNamesForComputingUtilization"`
	// SlowStart ramps the weight of endpoints that join or recover. On by
	// default; {"enabled": false} turns it off, as does nil in Go.
	SlowStart *lbconfig.SlowStartConfig `json:"slowStart"`
	// FailurePenalty scales the weight of endpoints whose calls this
	// client saw fail server-side by 1 - avoidance, the probability with
	// which pickwise_p2c passes them over. Reports can hide a black hole
	// (one that reports zero utilization has its reports discarded, A58,
	// and keeps the median weight); what the client sees cannot. On by
	// default.
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

// Defaults of the fields above (gRFC A58's where it has one).
const (
	DefaultOOBReportingPeriod      = 10 * time.Second
	DefaultBlackoutPeriod          = 10 * time.Second
	DefaultWeightExpirationPeriod  = 3 * time.Minute
	DefaultWeightUpdatePeriod      = time.Second
	DefaultErrorUtilizationPenalty = 1.0
	DefaultWeightHalfLife          = 5 * time.Second
)

const (
	// minWeightUpdatePeriod is A58's floor: rebuilding schedules faster
	// costs more than weights can change.
	minWeightUpdatePeriod = 100 * time.Millisecond
	// maxWeightHalfLife bounds the smoothing: beyond it weights would
	// follow nothing.
	maxWeightHalfLife = time.Hour
)

// DefaultConfig returns the config used for an empty JSON object.
func DefaultConfig() *Config {
	slow := lbconfig.DefaultSlowStart()
	return &Config{
		OOBReportingPeriod:      lbconfig.Duration(DefaultOOBReportingPeriod),
		BlackoutPeriod:          lbconfig.Duration(DefaultBlackoutPeriod),
		WeightExpirationPeriod:  lbconfig.Duration(DefaultWeightExpirationPeriod),
		WeightUpdatePeriod:      lbconfig.Duration(DefaultWeightUpdatePeriod),
		ErrorUtilizationPenalty: DefaultErrorUtilizationPenalty,
		WeightHalfLife:          lbconfig.Duration(DefaultWeightHalfLife),
		SlowStart:               &slow,
		FailurePenalty:          lbconfig.DefaultFailurePenalty(),
		Ejection:                lbconfig.DefaultEjection(),
		RemovalGrace:            lbconfig.Duration(lbconfig.DefaultRemovalGrace),
	}
}

// ParseConfig reads a pickwise_orca_wrr config: defaults first, then the
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
	if cfg.OOBReportingPeriod <= 0 {
		return nil, fmt.Errorf("%s: oobReportingPeriod %q: must be > 0", Name, cfg.OOBReportingPeriod)
	}
	if cfg.BlackoutPeriod < 0 {
		return nil, fmt.Errorf("%s: blackoutPeriod %q: must be >= 0", Name, cfg.BlackoutPeriod)
	}
	if cfg.WeightExpirationPeriod <= 0 {
		return nil, fmt.Errorf("%s: weightExpirationPeriod %q: must be > 0", Name, cfg.WeightExpirationPeriod)
	}
	// "weight_update_period ... values less than 100ms will be treated as
	// 100ms" (gRFC A58): raised, not rejected, so configs written for grpc
	// carry over.
	if cfg.WeightUpdatePeriod < lbconfig.Duration(minWeightUpdatePeriod) {
		warn.Clamped(Name, "weightUpdatePeriod", cfg.WeightUpdatePeriod, minWeightUpdatePeriod)
		cfg.WeightUpdatePeriod = lbconfig.Duration(minWeightUpdatePeriod)
	}
	if p := cfg.ErrorUtilizationPenalty; p < 0 || math.IsInf(p, 0) {
		return nil, fmt.Errorf("%s: errorUtilizationPenalty %v: must be a finite number >= 0", Name, p)
	}
	if d := time.Duration(cfg.WeightHalfLife); d < 0 || d > maxWeightHalfLife {
		return nil, fmt.Errorf("%s: weightHalfLife %q: must be in [0s, %v]", Name, cfg.WeightHalfLife, maxWeightHalfLife)
	}
	for _, name := range cfg.MetricNamesForComputingUtilization {
		if name == "" {
			return nil, fmt.Errorf("%s: metricNamesForComputingUtilization: empty metric name", Name)
		}
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

// settings turns a config into the engine's settings.
func settings(c *Config) engine.Settings {
	return engine.Settings{
		SlowStart:      c.SlowStart,
		FailurePenalty: c.FailurePenalty,
		Ejection:       c.Ejection,
		RemovalGrace:   time.Duration(c.RemovalGrace),
		Weights: &engine.WeightsConfig{
			ORCA: orcaweight.Config{
				BlackoutPeriod:          time.Duration(c.BlackoutPeriod),
				WeightExpirationPeriod:  time.Duration(c.WeightExpirationPeriod),
				ErrorUtilizationPenalty: c.ErrorUtilizationPenalty,
				HalfLife:                time.Duration(c.WeightHalfLife),
				UtilizationMetrics:      c.MetricNamesForComputingUtilization,
			},
			OutOfBand:    c.EnableOOBLoadReport,
			OOBPeriod:    time.Duration(c.OOBReportingPeriod),
			UpdatePeriod: time.Duration(c.WeightUpdatePeriod),
		},
	}
}
