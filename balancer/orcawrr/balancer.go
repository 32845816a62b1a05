package orcawrr

import (
	"github.com/pickwise/pickwise/internal/engine"
	_ "google.golang.org/grpc/orca" // parses per-call ORCA trailers into DoneInfo.ServerLoad
)

// Name is the policy's name in service configs.
const Name = "pickwise_orca_wrr"

// metrics are pickwise.orca_wrr.*; see the metrics package.
var metrics = engine.RegisterMetrics(engine.MetricsSpec{
	Policy:    "orca_wrr",
	Reasons:   engine.WeightedReasons,
	Weights:   true,
	Scheduled: true,
})

// The policy is the engine's smooth weighted round robin over the weights
// the engine keeps from ORCA reports.
func init() {
	engine.RegisterWeighted(engine.WeightedSpec[*Config]{
		Name:        Name,
		Metrics:     metrics,
		ParseConfig: ParseConfig,
		Defaults:    DefaultConfig,
		Settings:    settings,
	})
}
