package p2c

import (
	"time"

	"github.com/pickwise/pickwise/internal/engine"
)

// A policy's balancer.go is only this: its name, its metrics and its
// registration with the engine, which does the rest. The d-choice policies'
// files therefore look alike, and differ in their load metric.

// Name is the policy's name in service configs.
const Name = "pickwise_p2c"

// The policy is the engine's d-choice picker over the in-flight load
// metric.
// metrics are pickwise.p2c.*; see the metrics package.
var metrics = engine.RegisterMetrics(engine.MetricsSpec{
	Policy:  "p2c",
	Reasons: engine.LeastLoadedReasons,
	Cost:    "The cost pickwise_p2c compares: in-flight calls (scaled by activeRequestBias) plus one, divided by the endpoint's weight, times its failure penalty (slow start holds a ramping endpoint to its share of the picks instead of raising its cost); with activeRequestBias 0, which places by weight alone, the failure penalty only.",
})

func init() {
	engine.RegisterLeastLoaded(engine.LeastLoadedSpec[*Config]{
		Name:        Name,
		Metrics:     metrics,
		ParseConfig: ParseConfig,
		Defaults:    DefaultConfig,
		Settings: func(c *Config) engine.Settings {
			return engine.Settings{SlowStart: c.SlowStart, FailurePenalty: c.FailurePenalty, Ejection: c.Ejection, RemovalGrace: time.Duration(c.RemovalGrace)}
		},
		Choices: func(c *Config) int { return int(c.ChoiceCount) },
		Metric:  func(c *Config, _ *engine.Snapshot) engine.LoadMetric { return loadMetric(c.ActiveRequestBias) },
	})
}
