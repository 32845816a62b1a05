package p2c_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/pickwise/pickwise/balancer/p2c"
	"github.com/pickwise/pickwise/internal/engine"
	"github.com/pickwise/pickwise/internal/testkit"
	"google.golang.org/grpc/balancer"
)

func TestParseConfig(t *testing.T) {
	defaults := p2c.DefaultConfig()
	with := func(f func(*p2c.Config)) *p2c.Config {
		c := p2c.DefaultConfig()
		f(c)
		return c
	}
	testkit.CheckParseConfig(t, p2c.ParseConfig, []testkit.ParseCase[*p2c.Config]{
		{Name: "empty object", JSON: `{}`, Want: defaults},
		{Name: "empty input", JSON: ``, Want: defaults},
		{Name: "null", JSON: `null`, Want: defaults},
		{Name: "choiceCount 3", JSON: `{"choiceCount": 3}`, Want: with(func(c *p2c.Config) { c.ChoiceCount = 3 })},
		{Name: "choiceCount 1 rejected", JSON: `{"choiceCount": 1}`, WantErr: "pickwise_p2c: choiceCount 1: must be >= 2"},
		{Name: "choiceCount 0 rejected", JSON: `{"choiceCount": 0}`, WantErr: "pickwise_p2c: choiceCount 0: must be >= 2"},
		{Name: "choiceCount 11 clamped", JSON: `{"choiceCount": 11}`, Want: with(func(c *p2c.Config) { c.ChoiceCount = 10 })},
		{Name: "choiceCount huge clamped", JSON: `{"choiceCount": 4294967295}`, Want: with(func(c *p2c.Config) { c.ChoiceCount = 10 })},
		{Name: "choiceCount negative", JSON: `{"choiceCount": -1}`, WantErr: `pickwise_p2c: field "choiceCount"`},
		{Name: "choiceCount string", JSON: `{"choiceCount": "2"}`, WantErr: `pickwise_p2c: field "choiceCount": cannot use JSON string`},
		{Name: "bias 0", JSON: `{"activeRequestBias": 0}`, Want: with(func(c *p2c.Config) { c.ActiveRequestBias = 0 })},
		{Name: "bias 1.5", JSON: `{"activeRequestBias": 1.5}`, Want: with(func(c *p2c.Config) { c.ActiveRequestBias = 1.5 })},
		{Name: "bias negative", JSON: `{"activeRequestBias": -0.5}`, WantErr: "pickwise_p2c: activeRequestBias -0.5: must be in [0, 100]"},
		{Name: "bias too large", JSON: `{"activeRequestBias": 1000}`, WantErr: "pickwise_p2c: activeRequestBias 1000: must be in [0, 100]"},
		{Name: "slowStart defaults", JSON: `{"slowStart": {}}`, Want: with(func(c *p2c.Config) {
			c.SlowStart = &engine.SlowStartConfig{Enabled: true, Window: engine.Duration(30 * time.Second), Aggression: 1, MinWeightPercent: 10}
		})},
		{Name: "slowStart full", JSON: `{"slowStart": {"window": "10s", "aggression": 2.5, "minWeightPercent": 5}}`, Want: with(func(c *p2c.Config) {
			c.SlowStart = &engine.SlowStartConfig{Enabled: true, Window: engine.Duration(10 * time.Second), Aggression: 2.5, MinWeightPercent: 5}
		})},
		{Name: "slowStart protobuf duration", JSON: `{"slowStart": {"window": "0.250s"}}`, Want: with(func(c *p2c.Config) {
			c.SlowStart = &engine.SlowStartConfig{Enabled: true, Window: engine.Duration(250 * time.Millisecond), Aggression: 1, MinWeightPercent: 10}
		})},
		{Name: "slowStart window zero", JSON: `{"slowStart": {"window": "0s"}}`, WantErr: `pickwise_p2c: slowStart.window "0s": must be > 0`},
		{Name: "slowStart window negative", JSON: `{"slowStart": {"window": "-1s"}}`, WantErr: `pickwise_p2c: slowStart.window "-1s": must be > 0`},
		{Name: "slowStart window not a duration", JSON: `{"slowStart": {"window": "soon"}}`, WantErr: `pickwise_p2c: slowStart: field "window": cannot use JSON "soon": not a duration such as "30s"`},
		{Name: "slowStart window number", JSON: `{"slowStart": {"window": 30}}`, WantErr: `pickwise_p2c: slowStart: field "window": cannot use JSON 30: a duration must be a string`},
		{Name: "slowStart aggression zero", JSON: `{"slowStart": {"aggression": 0}}`, WantErr: "pickwise_p2c: slowStart.aggression 0: must be > 0 and finite"},
		{Name: "slowStart minWeightPercent zero", JSON: `{"slowStart": {"minWeightPercent": 0}}`, WantErr: "pickwise_p2c: slowStart.minWeightPercent 0: must be in (0, 100]"},
		{Name: "slowStart minWeightPercent 101", JSON: `{"slowStart": {"minWeightPercent": 101}}`, WantErr: "pickwise_p2c: slowStart.minWeightPercent 101: must be in (0, 100]"},
		{Name: "slowStart unknown field", JSON: `{"slowStart": {"windows": "1s"}}`, WantErr: `pickwise_p2c: slowStart: unknown field "windows"`},
		{Name: "slowStart off", JSON: `{"slowStart": {"enabled": false}}`, Want: with(func(c *p2c.Config) { c.SlowStart = &engine.SlowStartConfig{} })},
		{Name: "slowStart off with a ramp", JSON: `{"slowStart": {"enabled": false, "window": "5s"}}`, WantErr: `pickwise_p2c: slowStart: enabled is false but other fields are set`},
		{Name: "slowStart off with zero fields", JSON: `{"slowStart": {"enabled": false, "window": "0s", "aggression": 0, "minWeightPercent": 0}}`, Want: with(func(c *p2c.Config) { c.SlowStart = &engine.SlowStartConfig{} })},
		{Name: "slowStart null", JSON: `{"slowStart": null}`, Want: with(func(c *p2c.Config) { c.SlowStart = nil })},
		{Name: "slowStart timeOnly", JSON: `{"slowStart": {"timeOnly": true}}`, Want: with(func(c *p2c.Config) { c.SlowStart.TimeOnly = true })},
		{Name: "slowStart off with timeOnly", JSON: `{"slowStart": {"enabled": false, "timeOnly": true}}`, WantErr: `pickwise_p2c: slowStart: enabled is false but other fields are set`},
		{Name: "slowStart timeOnly string", JSON: `{"slowStart": {"timeOnly": "yes"}}`, WantErr: `pickwise_p2c: slowStart: field "timeOnly"`},
		{Name: "slowStart enabled string", JSON: `{"slowStart": {"enabled": "no"}}`, WantErr: `pickwise_p2c: slowStart: field "enabled"`},
		{Name: "failurePenalty off", JSON: `{"failurePenalty": {"enabled": false}}`, Want: with(func(c *p2c.Config) { c.FailurePenalty.Enabled = false })},
		{Name: "failurePenalty tuned", JSON: `{"failurePenalty": {"window": 50, "maxMultiplier": 10, "halfLife": "30s"}}`, Want: with(func(c *p2c.Config) {
			c.FailurePenalty = engine.FailurePenaltyConfig{Enabled: true, Window: 50, MaxMultiplier: 10, HalfLife: engine.Duration(30 * time.Second),
				Codes: []string{"UNAVAILABLE", "INTERNAL", "UNKNOWN", "DEADLINE_EXCEEDED", "RESOURCE_EXHAUSTED"}}
		})},
		{Name: "failurePenalty codes", JSON: `{"failurePenalty": {"codes": ["UNAVAILABLE", "PERMISSION_DENIED"]}}`, Want: with(func(c *p2c.Config) {
			c.FailurePenalty.Codes = []string{"UNAVAILABLE", "PERMISSION_DENIED"}
		})},
		{Name: "failurePenalty codes unknown", JSON: `{"failurePenalty": {"codes": ["UNAVAILABLE", "INTERNAL", "NOPE"]}}`, WantErr: `pickwise_p2c: failurePenalty.codes[2] "NOPE": not a gRPC status code`},
		{Name: "failurePenalty codes OK", JSON: `{"failurePenalty": {"codes": ["OK"]}}`, WantErr: `pickwise_p2c: failurePenalty.codes[0] "OK": a success is not a failure`},
		{Name: "failurePenalty codes empty", JSON: `{"failurePenalty": {"codes": []}}`, WantErr: `pickwise_p2c: failurePenalty.codes: must list at least one code`},
		{Name: "failurePenalty codes number", JSON: `{"failurePenalty": {"codes": [14]}}`, WantErr: `pickwise_p2c: failurePenalty: field "codes`},
		{Name: "failurePenalty codes off skips checks", JSON: `{"failurePenalty": {"enabled": false, "codes": []}}`, Want: with(func(c *p2c.Config) {
			c.FailurePenalty.Enabled = false
			c.FailurePenalty.Codes = []string{}
		})},
		{Name: "failurePenalty window clamped", JSON: `{"failurePenalty": {"window": 1000000}}`, Want: with(func(c *p2c.Config) { c.FailurePenalty.Window = 10000 })},
		{Name: "failurePenalty window zero", JSON: `{"failurePenalty": {"window": 0}}`, WantErr: "pickwise_p2c: failurePenalty.window 0: must be >= 1"},
		{Name: "failurePenalty maxMultiplier below 1", JSON: `{"failurePenalty": {"maxMultiplier": 0.5}}`, WantErr: "pickwise_p2c: failurePenalty.maxMultiplier 0.5: must be in [1, 1e6]"},
		{Name: "failurePenalty halfLife too short", JSON: `{"failurePenalty": {"halfLife": "10ms"}}`, WantErr: `pickwise_p2c: failurePenalty.halfLife "10ms": must be in [100ms, 1h0m0s]`},
		{Name: "failurePenalty halfLife too long", JSON: `{"failurePenalty": {"halfLife": "2h"}}`, WantErr: `pickwise_p2c: failurePenalty.halfLife "2h0m0s": must be in [100ms, 1h0m0s]`},
		{Name: "failurePenalty halfLife not a duration", JSON: `{"failurePenalty": {"halfLife": 5}}`, WantErr: `pickwise_p2c: failurePenalty: field "halfLife": cannot use JSON 5: a duration must be a string`},
		{Name: "failurePenalty unknown field", JSON: `{"failurePenalty": {"probePercent": 1}}`, WantErr: `pickwise_p2c: failurePenalty: unknown field "probePercent"`},
		{Name: "failurePenalty off skips checks", JSON: `{"failurePenalty": {"enabled": false, "window": 0}}`, Want: with(func(c *p2c.Config) {
			c.FailurePenalty.Enabled = false
			c.FailurePenalty.Window = 0
		})},
		{Name: "ejection off", JSON: `{"ejection": {"enabled": false}}`, Want: with(func(c *p2c.Config) { c.Ejection.Enabled = false })},
		{Name: "ejection tuned", JSON: `{"ejection": {"threshold": 0.8, "minFailures": 10, "baseEjectionTime": "5s", "maxEjectionTime": "5m", "maxEjectionPercent": 50, "probeInterval": "1s", "probeSuccesses": 5}}`,
			Want: with(func(c *p2c.Config) {
				c.Ejection = engine.EjectionConfig{Enabled: true, Threshold: 0.8, MinFailures: 10, BaseEjectionTime: engine.Duration(5 * time.Second),
					MaxEjectionTime: engine.Duration(5 * time.Minute), MaxEjectionPercent: 50, ProbeInterval: engine.Duration(time.Second), ProbeSuccesses: 5}
			})},
		{Name: "ejection threshold zero", JSON: `{"ejection": {"threshold": 0}}`, WantErr: "pickwise_p2c: ejection.threshold 0: must be in (0, 1]"},
		{Name: "ejection threshold above 1", JSON: `{"ejection": {"threshold": 1.5}}`, WantErr: "pickwise_p2c: ejection.threshold 1.5: must be in (0, 1]"},
		{Name: "ejection minFailures zero", JSON: `{"ejection": {"minFailures": 0}}`, WantErr: "pickwise_p2c: ejection.minFailures 0: must be in [1, 1000]"},
		{Name: "ejection base too short", JSON: `{"ejection": {"baseEjectionTime": "1ms"}}`, WantErr: `pickwise_p2c: ejection.baseEjectionTime "1ms": must be in [10ms, 1h]`},
		{Name: "ejection max below base", JSON: `{"ejection": {"baseEjectionTime": "10s", "maxEjectionTime": "5s"}}`, WantErr: `pickwise_p2c: ejection.maxEjectionTime "5s": must be in [baseEjectionTime, 24h]`},
		{Name: "ejection percent above 100", JSON: `{"ejection": {"maxEjectionPercent": 101}}`, WantErr: "pickwise_p2c: ejection.maxEjectionPercent 101: must be in [0, 100]"},
		{Name: "ejection probeInterval zero", JSON: `{"ejection": {"probeInterval": "0s"}}`, WantErr: `pickwise_p2c: ejection.probeInterval "0s": must be in [1ms, 1m]`},
		{Name: "ejection probeSuccesses zero", JSON: `{"ejection": {"probeSuccesses": 0}}`, WantErr: "pickwise_p2c: ejection.probeSuccesses 0: must be in [1, 100]"},
		{Name: "ejection unknown field", JSON: `{"ejection": {"interval": "10s"}}`, WantErr: `pickwise_p2c: ejection: unknown field "interval"`},
		{Name: "ejection NaN-like string", JSON: `{"ejection": {"threshold": "NaN"}}`, WantErr: `pickwise_p2c: ejection: `},
		{Name: "removalGrace off", JSON: `{"removalGrace": "0s"}`, Want: with(func(c *p2c.Config) { c.RemovalGrace = 0 })},
		{Name: "removalGrace negative", JSON: `{"removalGrace": "-1s"}`, WantErr: `pickwise_p2c: removalGrace "-1s": must be in [0s, 10m0s]`},
		{Name: "removalGrace too long", JSON: `{"removalGrace": "11m"}`, WantErr: `pickwise_p2c: removalGrace "11m0s": must be in [0s, 10m0s]`},
		{Name: "removalGrace not a duration", JSON: `{"removalGrace": 10}`, WantErr: `pickwise_p2c: field "removalGrace": cannot use JSON 10: a duration must be a string`},
		{Name: "unknown field", JSON: `{"choiceCounts": 2}`, WantErr: `pickwise_p2c: unknown field "choiceCounts"`},
		{Name: "malformed", JSON: `{"choiceCount": 2`, WantErr: "pickwise_p2c: unexpected EOF"},
		{Name: "not an object", JSON: `[2]`, WantErr: "pickwise_p2c: cannot use JSON array"},
		{Name: "trailing data", JSON: `{} {}`, WantErr: "pickwise_p2c: trailing data"},
	})
}

// TestParseConfigThroughRegistry checks that the registered builder is the
// config parser grpc uses for service configs.
func TestParseConfigThroughRegistry(t *testing.T) {
	parser, ok := balancer.Get(p2c.Name).(balancer.ConfigParser)
	if !ok {
		t.Fatalf("%s is not registered as a balancer.ConfigParser", p2c.Name)
	}
	if _, err := parser.ParseConfig(json.RawMessage(`{"choiceCount": 1}`)); err == nil {
		t.Fatal("registered parser accepted choiceCount 1")
	}
}

// TestServiceConfigRejectedAtDial checks what a user sees: a channel whose
// default service config has a bad pickwise_p2c field fails to build, with a
// message naming the policy and the field.
func TestServiceConfigRejectedAtDial(t *testing.T) {
	testkit.CheckRejectedAtDial(t, `{"loadBalancingConfig":[{"pickwise_p2c":{"slowStart":{"aggression":-1}}}]}`, "pickwise_p2c: slowStart.aggression -1")
}
