package prequal

import (
	"time"

	"github.com/pickwise/pickwise/internal/engine"
)

// Name is the policy's name in service configs.
const Name = "pickwise_prequal"

// metrics are pickwise.prequal.*; see the metrics package.
var metrics = engine.RegisterMetrics(engine.MetricsSpec{
	Policy:     "prequal",
	Reasons:    engine.PrequalReasons,
	LoadProbes: true,
})

func init() {
	engine.RegisterPrequal(engine.LeastLoadedSpec[*Config]{
		Name:        Name,
		Metrics:     metrics,
		ParseConfig: ParseConfig,
		Defaults:    DefaultConfig,
		Settings: func(c *Config) engine.Settings {
			return engine.Settings{
				SlowStart:      c.SlowStart,
				FailurePenalty: c.FailurePenalty,
				Ejection:       c.Ejection,
				LoadProbing:    c.probing(),
				RemovalGrace:   time.Duration(c.RemovalGrace),
			}
		},
		Choices: func(c *Config) int { return int(c.ChoiceCount) },
	})
}
