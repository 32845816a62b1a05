package p2c

import (
	"github.com/pickwise/pickwise/internal/engine"
)

// Name is the policy's name in service configs.
const Name = "pickwise_p2c"

// The policy is the engine's d-choice picker over the in-flight load
// metric.
func init() {
	engine.RegisterLeastLoaded(engine.LeastLoadedSpec[*Config]{
		Name:        Name,
		ParseConfig: ParseConfig,
		Defaults:    DefaultConfig,
		Settings: func(c *Config) engine.Settings {
			return engine.Settings{SlowStart: c.SlowStart, FailurePenalty: c.FailurePenalty}
		},
		Choices: func(c *Config) int { return int(c.ChoiceCount) },
		Metric:  func(c *Config, _ *engine.Snapshot) engine.LoadMetric { return loadMetric(c.ActiveRequestBias) },
	})
}
