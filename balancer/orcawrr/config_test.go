package orcawrr_test

import (
	"testing"
	"time"

	"github.com/pickwise/pickwise/balancer/orcawrr"
	"github.com/pickwise/pickwise/internal/engine"
	"github.com/pickwise/pickwise/internal/testkit"
)

func TestParseConfig(t *testing.T) {
	def := orcawrr.DefaultConfig
	with := func(f func(*orcawrr.Config)) *orcawrr.Config {
		c := def()
		f(c)
		return c
	}
	testkit.CheckParseConfig(t, orcawrr.ParseConfig, []testkit.ParseCase[*orcawrr.Config]{
		{Name: "empty object gives A58 defaults", JSON: `{}`, Want: def()},
		{Name: "empty input", JSON: ``, Want: def()},
		{Name: "null", JSON: `null`, Want: def()},
		{Name: "every A58 field", JSON: `{"enableOobLoadReport": true, "oobReportingPeriod": "2s", "blackoutPeriod": "0s",
			"weightExpirationPeriod": "1m", "weightUpdatePeriod": "500ms", "errorUtilizationPenalty": 0.5}`,
			Want: with(func(c *orcawrr.Config) {
				c.EnableOOBLoadReport = true
				c.OOBReportingPeriod = engine.Duration(2 * time.Second)
				c.BlackoutPeriod = 0
				c.WeightExpirationPeriod = engine.Duration(time.Minute)
				c.WeightUpdatePeriod = engine.Duration(500 * time.Millisecond)
				c.ErrorUtilizationPenalty = 0.5
			})},
		{Name: "null duration keeps the default", JSON: `{"blackoutPeriod": null}`, Want: def()},
		{Name: "smoothing off", JSON: `{"weightHalfLife": "0s"}`, Want: with(func(c *orcawrr.Config) { c.WeightHalfLife = 0 })},
		{Name: "named utilization metrics", JSON: `{"metricNamesForComputingUtilization": ["gpu", "mem"]}`,
			Want: with(func(c *orcawrr.Config) { c.MetricNamesForComputingUtilization = []string{"gpu", "mem"} })},
		{Name: "slow start", JSON: `{"slowStart": {"window": "30s"}}`,
			Want: with(func(c *orcawrr.Config) {
				c.SlowStart = &engine.SlowStartConfig{Enabled: true, Window: engine.Duration(30 * time.Second), Aggression: 1, MinWeightPercent: 10}
			})},
		// gRFC A58: a period below 100ms is raised to 100ms, not rejected.
		{Name: "update period raised to 100ms", JSON: `{"weightUpdatePeriod": "10ms"}`,
			Want: with(func(c *orcawrr.Config) { c.WeightUpdatePeriod = engine.Duration(100 * time.Millisecond) })},
		{Name: "zero penalty allowed", JSON: `{"errorUtilizationPenalty": 0}`,
			Want: with(func(c *orcawrr.Config) { c.ErrorUtilizationPenalty = 0 })},
		{Name: "negative penalty", JSON: `{"errorUtilizationPenalty": -1}`, WantErr: "pickwise_orca_wrr: errorUtilizationPenalty -1: must be a finite number >= 0"},
		{Name: "zero OOB period", JSON: `{"oobReportingPeriod": "0s"}`, WantErr: `pickwise_orca_wrr: oobReportingPeriod "0s": must be > 0`},
		{Name: "negative blackout", JSON: `{"blackoutPeriod": "-1s"}`, WantErr: `pickwise_orca_wrr: blackoutPeriod "-1s": must be >= 0`},
		{Name: "negative removalGrace", JSON: `{"removalGrace": "-1s"}`, WantErr: `pickwise_orca_wrr: removalGrace "-1s": must be in [0s, 10m0s]`},
		{Name: "zero expiration", JSON: `{"weightExpirationPeriod": "0s"}`, WantErr: `pickwise_orca_wrr: weightExpirationPeriod "0s": must be > 0`},
		{Name: "negative half-life", JSON: `{"weightHalfLife": "-5s"}`, WantErr: `pickwise_orca_wrr: weightHalfLife "-5s": must be in [0s, 1h0m0s]`},
		{Name: "half-life too long", JSON: `{"weightHalfLife": "2h"}`, WantErr: `pickwise_orca_wrr: weightHalfLife "2h0m0s"`},
		{Name: "empty metric name", JSON: `{"metricNamesForComputingUtilization": ["cpu", ""]}`, WantErr: "pickwise_orca_wrr: metricNamesForComputingUtilization: empty metric name"},
		{Name: "bad slow start", JSON: `{"slowStart": {"window": "0s"}}`, WantErr: "pickwise_orca_wrr: slowStart"},
		{Name: "failure penalty off", JSON: `{"failurePenalty": {"enabled": false}}`,
			Want: with(func(c *orcawrr.Config) { c.FailurePenalty.Enabled = false })},
		{Name: "bad failure penalty", JSON: `{"failurePenalty": {"maxMultiplier": 0.5}}`, WantErr: "pickwise_orca_wrr: failurePenalty.maxMultiplier"},
		{Name: "failure penalty codes", JSON: `{"failurePenalty": {"codes": ["UNAVAILABLE", "PERMISSION_DENIED"]}}`,
			Want: with(func(c *orcawrr.Config) { c.FailurePenalty.Codes = []string{"UNAVAILABLE", "PERMISSION_DENIED"} })},
		{Name: "duration not a string", JSON: `{"blackoutPeriod": 10}`, WantErr: "pickwise_orca_wrr"},
		{Name: "bad duration", JSON: `{"blackoutPeriod": "ten seconds"}`, WantErr: "pickwise_orca_wrr"},
		{Name: "unknown field", JSON: `{"blackoutPeriods": "1s"}`, WantErr: `pickwise_orca_wrr: unknown field "blackoutPeriods"`},
		{Name: "wrong type", JSON: `{"enableOobLoadReport": "yes"}`, WantErr: "pickwise_orca_wrr"},
		{Name: "malformed JSON", JSON: `{"blackoutPeriod": }`, WantErr: "pickwise_orca_wrr"},
		{Name: "not an object", JSON: `[1]`, WantErr: "pickwise_orca_wrr"},
		{Name: "trailing data", JSON: `{}{}`, WantErr: "pickwise_orca_wrr"},
	})
}

func TestBadConfigRejectedAtDial(t *testing.T) {
	testkit.CheckRejectedAtDial(t, `{"loadBalancingConfig":[{"pickwise_orca_wrr":{"errorUtilizationPenalty":-2}}]}`, "pickwise_orca_wrr: errorUtilizationPenalty -2")
}
