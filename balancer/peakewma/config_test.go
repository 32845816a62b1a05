package peakewma_test

import (
	"testing"
	"time"

	"github.com/pickwise/pickwise/balancer/peakewma"
	"github.com/pickwise/pickwise/internal/engine"
	"github.com/pickwise/pickwise/internal/testkit"
)

func TestParseConfig(t *testing.T) {
	with := func(f func(*peakewma.Config)) *peakewma.Config {
		c := peakewma.DefaultConfig()
		f(c)
		return c
	}
	testkit.CheckParseConfig(t, peakewma.ParseConfig, []testkit.ParseCase[*peakewma.Config]{
		{Name: "empty object", JSON: `{}`, Want: peakewma.DefaultConfig()},
		{Name: "empty input", JSON: ``, Want: peakewma.DefaultConfig()},
		{Name: "all fields", JSON: `{"choiceCount": 3, "decayTime": "2s", "defaultRtt": "5ms", "slowStart": {"window": "10s"}, "failurePenalty": {"enabled": false}}`,
			Want: with(func(c *peakewma.Config) {
				c.ChoiceCount = 3
				c.DecayTime = engine.Duration(2 * time.Second)
				c.DefaultRTT = engine.Duration(5 * time.Millisecond)
				c.SlowStart = &engine.SlowStartConfig{Enabled: true, Window: engine.Duration(10 * time.Second), Aggression: 1, MinWeightPercent: 10}
				c.FailurePenalty.Enabled = false
			})},
		{Name: "choiceCount 1", JSON: `{"choiceCount": 1}`, WantErr: "pickwise_peak_ewma: choiceCount 1: must be >= 2"},
		{Name: "choiceCount clamped", JSON: `{"choiceCount": 50}`, Want: with(func(c *peakewma.Config) { c.ChoiceCount = 10 })},
		{Name: "decayTime too short", JSON: `{"decayTime": "1ms"}`, WantErr: `pickwise_peak_ewma: decayTime "1ms": must be in [10ms, 1h0m0s]`},
		{Name: "decayTime too long", JSON: `{"decayTime": "2h"}`, WantErr: `pickwise_peak_ewma: decayTime "2h0m0s": must be in [10ms, 1h0m0s]`},
		{Name: "removalGrace too long", JSON: `{"removalGrace": "1h"}`, WantErr: `pickwise_peak_ewma: removalGrace "1h0m0s": must be in [0s, 10m0s]`},
		{Name: "decayTime not a string", JSON: `{"decayTime": 10}`, WantErr: `pickwise_peak_ewma: field "decayTime": cannot use JSON 10: a duration must be a string`},
		{Name: "defaultRtt zero is unset", JSON: `{"defaultRtt": "0s"}`, Want: peakewma.DefaultConfig()},
		{Name: "defaultRtt too short", JSON: `{"defaultRtt": "100ns"}`, WantErr: `pickwise_peak_ewma: defaultRtt "100ns": must be in [1µs, 1m0s]`},
		{Name: "defaultRtt too long", JSON: `{"defaultRtt": "2m"}`, WantErr: `pickwise_peak_ewma: defaultRtt "2m0s": must be in [1µs, 1m0s]`},
		{Name: "bad slowStart", JSON: `{"slowStart": {"aggression": 0}}`, WantErr: "pickwise_peak_ewma: slowStart.aggression 0: must be > 0 and finite"},
		{Name: "bad failurePenalty", JSON: `{"failurePenalty": {"maxMultiplier": 0}}`, WantErr: "pickwise_peak_ewma: failurePenalty.maxMultiplier 0: must be in [1, 1e6]"},
		{Name: "bad failurePenalty codes", JSON: `{"failurePenalty": {"codes": ["NOPE"]}}`, WantErr: `pickwise_peak_ewma: failurePenalty.codes[0] "NOPE": not a gRPC status code`},
		{Name: "unknown field", JSON: `{"decay": "1s"}`, WantErr: `pickwise_peak_ewma: unknown field "decay"`},
		{Name: "malformed", JSON: `{"decayTime": `, WantErr: "pickwise_peak_ewma: unexpected EOF"},
	})
}

func TestServiceConfigRejectedAtDial(t *testing.T) {
	testkit.CheckRejectedAtDial(t, `{"loadBalancingConfig":[{"pickwise_peak_ewma":{"decayTime":"0s"}}]}`, "pickwise_peak_ewma: decayTime")
}
