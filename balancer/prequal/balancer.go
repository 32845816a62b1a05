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
	Cost:       "The cost pickwise_prequal compares between the two best answers of its pool: the server's reported latency in seconds for a cold answer, 1e9 plus its requests in flight for a hot one or none, divided by the endpoint's weight, times its failure penalty; while the pool holds fewer than two answers, in-flight calls plus one, as pickwise_p2c's.",
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
