package peakewma

import (
	"time"

	"github.com/pickwise/pickwise/internal/engine"
)

// A policy's balancer.go is only this: its name, its metrics and its
// registration with the engine, which does the rest. The d-choice policies'
// files therefore look alike, and differ in their load metric.

// Name is the policy's name in service configs.
const Name = "pickwise_peak_ewma"

// The policy is the engine's d-choice picker over its Peak EWMA metric;
// the engine times calls and keeps the latency averages.
// metrics are pickwise.peak_ewma.*; see the metrics package.
var metrics = engine.RegisterMetrics(engine.MetricsSpec{
	Policy:  "peak_ewma",
	Reasons: engine.LeastLoadedReasons,
	Cost:    "The cost pickwise_peak_ewma compares: the endpoint's peak EWMA latency in nanoseconds times (in-flight calls + 1), divided by its weight, times its failure penalty (slow start holds a ramping endpoint to its share of the picks instead of raising its cost).",
})

func init() {
	engine.RegisterLeastLoaded(engine.LeastLoadedSpec[*Config]{
		Name:        Name,
		Metrics:     metrics,
		ParseConfig: ParseConfig,
		Defaults:    DefaultConfig,
		Settings: func(c *Config) engine.Settings {
			return engine.Settings{
				SlowStart:      c.SlowStart,
				FailurePenalty: c.FailurePenalty,
				Ejection:       c.Ejection,
				Latency:        &engine.LatencyConfig{DecayTime: time.Duration(c.DecayTime)},
				RemovalGrace:   time.Duration(c.RemovalGrace),
			}
		},
		Choices: func(c *Config) int { return int(c.ChoiceCount) },
		Metric:  func(_ *Config, snap *engine.Snapshot) engine.LoadMetric { return engine.NewPeakEWMA(snap) },
	})
}
