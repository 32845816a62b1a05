package p2c_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/pickwise/pickwise/balancer/p2c"
	"github.com/pickwise/pickwise/internal/engine"
	"google.golang.org/grpc"
	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/serviceconfig"
)

func TestParseConfig(t *testing.T) {
	defaults := p2c.DefaultConfig()
	with := func(f func(*p2c.Config)) *p2c.Config {
		c := p2c.DefaultConfig()
		f(c)
		return c
	}
	tests := []struct {
		name    string
		json    string
		want    *p2c.Config
		wantErr string
	}{
		{name: "empty object", json: `{}`, want: defaults},
		{name: "empty input", json: ``, want: defaults},
		{name: "null", json: `null`, want: defaults},
		{name: "choiceCount 3", json: `{"choiceCount": 3}`, want: with(func(c *p2c.Config) { c.ChoiceCount = 3 })},
		{name: "choiceCount 1 rejected", json: `{"choiceCount": 1}`, wantErr: "pickwise_p2c: choiceCount 1: must be >= 2"},
		{name: "choiceCount 0 rejected", json: `{"choiceCount": 0}`, wantErr: "pickwise_p2c: choiceCount 0: must be >= 2"},
		{name: "choiceCount 11 clamped", json: `{"choiceCount": 11}`, want: with(func(c *p2c.Config) { c.ChoiceCount = 10 })},
		{name: "choiceCount huge clamped", json: `{"choiceCount": 4294967295}`, want: with(func(c *p2c.Config) { c.ChoiceCount = 10 })},
		{name: "choiceCount negative", json: `{"choiceCount": -1}`, wantErr: `pickwise_p2c: field "choiceCount"`},
		{name: "choiceCount string", json: `{"choiceCount": "2"}`, wantErr: `pickwise_p2c: field "choiceCount": cannot use JSON string`},
		{name: "bias 0", json: `{"activeRequestBias": 0}`, want: with(func(c *p2c.Config) { c.ActiveRequestBias = 0 })},
		{name: "bias 1.5", json: `{"activeRequestBias": 1.5}`, want: with(func(c *p2c.Config) { c.ActiveRequestBias = 1.5 })},
		{name: "bias negative", json: `{"activeRequestBias": -0.5}`, wantErr: "pickwise_p2c: activeRequestBias -0.5: must be in [0, 100]"},
		{name: "bias too large", json: `{"activeRequestBias": 1000}`, wantErr: "pickwise_p2c: activeRequestBias 1000: must be in [0, 100]"},
		{name: "slowStart defaults", json: `{"slowStart": {}}`, want: with(func(c *p2c.Config) {
			c.SlowStart = &engine.SlowStartConfig{Window: engine.Duration(30 * time.Second), Aggression: 1, MinWeightPercent: 10}
		})},
		{name: "slowStart full", json: `{"slowStart": {"window": "10s", "aggression": 2.5, "minWeightPercent": 5}}`, want: with(func(c *p2c.Config) {
			c.SlowStart = &engine.SlowStartConfig{Window: engine.Duration(10 * time.Second), Aggression: 2.5, MinWeightPercent: 5}
		})},
		{name: "slowStart protobuf duration", json: `{"slowStart": {"window": "0.250s"}}`, want: with(func(c *p2c.Config) {
			c.SlowStart = &engine.SlowStartConfig{Window: engine.Duration(250 * time.Millisecond), Aggression: 1, MinWeightPercent: 10}
		})},
		{name: "slowStart window zero", json: `{"slowStart": {"window": "0s"}}`, wantErr: `pickwise_p2c: slowStart.window "0s": must be > 0`},
		{name: "slowStart window negative", json: `{"slowStart": {"window": "-1s"}}`, wantErr: `pickwise_p2c: slowStart.window "-1s": must be > 0`},
		{name: "slowStart window not a duration", json: `{"slowStart": {"window": "soon"}}`, wantErr: `pickwise_p2c: slowStart: invalid duration "soon"`},
		{name: "slowStart window number", json: `{"slowStart": {"window": 30}}`, wantErr: `pickwise_p2c: slowStart: duration must be a string`},
		{name: "slowStart aggression zero", json: `{"slowStart": {"aggression": 0}}`, wantErr: "pickwise_p2c: slowStart.aggression 0: must be > 0 and finite"},
		{name: "slowStart minWeightPercent zero", json: `{"slowStart": {"minWeightPercent": 0}}`, wantErr: "pickwise_p2c: slowStart.minWeightPercent 0: must be in (0, 100]"},
		{name: "slowStart minWeightPercent 101", json: `{"slowStart": {"minWeightPercent": 101}}`, wantErr: "pickwise_p2c: slowStart.minWeightPercent 101: must be in (0, 100]"},
		{name: "slowStart unknown field", json: `{"slowStart": {"windows": "1s"}}`, wantErr: `pickwise_p2c: slowStart: unknown field "windows"`},
		{name: "failurePenalty off", json: `{"failurePenalty": {"enabled": false}}`, want: with(func(c *p2c.Config) { c.FailurePenalty.Enabled = false })},
		{name: "failurePenalty tuned", json: `{"failurePenalty": {"window": 50, "maxMultiplier": 10, "halfLife": "30s"}}`, want: with(func(c *p2c.Config) {
			c.FailurePenalty = engine.FailurePenaltyConfig{Enabled: true, Window: 50, MaxMultiplier: 10, HalfLife: engine.Duration(30 * time.Second)}
		})},
		{name: "failurePenalty window clamped", json: `{"failurePenalty": {"window": 1000000}}`, want: with(func(c *p2c.Config) { c.FailurePenalty.Window = 10000 })},
		{name: "failurePenalty window zero", json: `{"failurePenalty": {"window": 0}}`, wantErr: "pickwise_p2c: failurePenalty.window 0: must be >= 1"},
		{name: "failurePenalty maxMultiplier below 1", json: `{"failurePenalty": {"maxMultiplier": 0.5}}`, wantErr: "pickwise_p2c: failurePenalty.maxMultiplier 0.5: must be in [1, 1e6]"},
		{name: "failurePenalty halfLife too short", json: `{"failurePenalty": {"halfLife": "10ms"}}`, wantErr: `pickwise_p2c: failurePenalty.halfLife "10ms": must be in [100ms, 1h0m0s]`},
		{name: "failurePenalty halfLife too long", json: `{"failurePenalty": {"halfLife": "2h"}}`, wantErr: `pickwise_p2c: failurePenalty.halfLife "2h0m0s": must be in [100ms, 1h0m0s]`},
		{name: "failurePenalty halfLife not a duration", json: `{"failurePenalty": {"halfLife": 5}}`, wantErr: `pickwise_p2c: failurePenalty: duration must be a string`},
		{name: "failurePenalty unknown field", json: `{"failurePenalty": {"probePercent": 1}}`, wantErr: `pickwise_p2c: failurePenalty: unknown field "probePercent"`},
		{name: "failurePenalty off skips checks", json: `{"failurePenalty": {"enabled": false, "window": 0}}`, want: with(func(c *p2c.Config) {
			c.FailurePenalty.Enabled = false
			c.FailurePenalty.Window = 0
		})},
		{name: "unknown field", json: `{"choiceCounts": 2}`, wantErr: `pickwise_p2c: unknown field "choiceCounts"`},
		{name: "malformed", json: `{"choiceCount": 2`, wantErr: "pickwise_p2c: unexpected EOF"},
		{name: "not an object", json: `[2]`, wantErr: "pickwise_p2c: cannot use JSON array"},
		{name: "trailing data", json: `{} {}`, wantErr: "pickwise_p2c: trailing data"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := p2c.ParseConfig(json.RawMessage(tt.json))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParseConfig(%s) error = %v, want one containing %q", tt.json, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseConfig(%s) unexpected error: %v", tt.json, err)
			}
			if diff := cmp.Diff(tt.want, got, cmpopts.IgnoreInterfaces(struct {
				serviceconfig.LoadBalancingConfig
			}{})); diff != "" {
				t.Errorf("ParseConfig(%s) mismatch (-want +got):\n%s", tt.json, diff)
			}
		})
	}
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
	_, err := grpc.NewClient("passthrough:///127.0.0.1:1",
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultServiceConfig(`{"loadBalancingConfig":[{"pickwise_p2c":{"slowStart":{"aggression":-1}}}]}`))
	if err == nil || !strings.Contains(err.Error(), "pickwise_p2c: slowStart.aggression -1") {
		t.Fatalf("grpc.NewClient error = %v, want one naming pickwise_p2c and slowStart.aggression", err)
	}
}
