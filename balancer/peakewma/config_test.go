package peakewma_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/pickwise/pickwise/balancer/peakewma"
	"github.com/pickwise/pickwise/internal/engine"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/serviceconfig"
)

func TestParseConfig(t *testing.T) {
	with := func(f func(*peakewma.Config)) *peakewma.Config {
		c := peakewma.DefaultConfig()
		f(c)
		return c
	}
	tests := []struct {
		name    string
		json    string
		want    *peakewma.Config
		wantErr string
	}{
		{name: "empty object", json: `{}`, want: peakewma.DefaultConfig()},
		{name: "empty input", json: ``, want: peakewma.DefaultConfig()},
		{name: "all fields", json: `{"choiceCount": 3, "decayTime": "2s", "defaultRtt": "5ms", "slowStart": {"window": "10s"}, "failurePenalty": {"enabled": false}}`,
			want: with(func(c *peakewma.Config) {
				c.ChoiceCount = 3
				c.DecayTime = engine.Duration(2 * time.Second)
				c.DefaultRTT = engine.Duration(5 * time.Millisecond)
				c.SlowStart = &engine.SlowStartConfig{Window: engine.Duration(10 * time.Second), Aggression: 1, MinWeightPercent: 10}
				c.FailurePenalty.Enabled = false
			})},
		{name: "choiceCount 1", json: `{"choiceCount": 1}`, wantErr: "pickwise_peak_ewma: choiceCount 1: must be >= 2"},
		{name: "choiceCount clamped", json: `{"choiceCount": 50}`, want: with(func(c *peakewma.Config) { c.ChoiceCount = 10 })},
		{name: "decayTime too short", json: `{"decayTime": "1ms"}`, wantErr: `pickwise_peak_ewma: decayTime "1ms": must be in [10ms, 1h0m0s]`},
		{name: "decayTime too long", json: `{"decayTime": "2h"}`, wantErr: `pickwise_peak_ewma: decayTime "2h0m0s": must be in [10ms, 1h0m0s]`},
		{name: "decayTime not a string", json: `{"decayTime": 10}`, wantErr: `pickwise_peak_ewma: duration must be a string`},
		{name: "defaultRtt zero", json: `{"defaultRtt": "0s"}`, wantErr: `pickwise_peak_ewma: defaultRtt "0s": must be in [1µs, 1m0s]`},
		{name: "defaultRtt too long", json: `{"defaultRtt": "2m"}`, wantErr: `pickwise_peak_ewma: defaultRtt "2m0s": must be in [1µs, 1m0s]`},
		{name: "bad slowStart", json: `{"slowStart": {"aggression": 0}}`, wantErr: "pickwise_peak_ewma: slowStart.aggression 0: must be > 0 and finite"},
		{name: "bad failurePenalty", json: `{"failurePenalty": {"maxMultiplier": 0}}`, wantErr: "pickwise_peak_ewma: failurePenalty.maxMultiplier 0: must be in [1, 1e6]"},
		{name: "unknown field", json: `{"decay": "1s"}`, wantErr: `pickwise_peak_ewma: unknown field "decay"`},
		{name: "malformed", json: `{"decayTime": `, wantErr: "pickwise_peak_ewma: unexpected EOF"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := peakewma.ParseConfig(json.RawMessage(tt.json))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParseConfig(%s) error = %v, want one containing %q", tt.json, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseConfig(%s): %v", tt.json, err)
			}
			if diff := cmp.Diff(tt.want, got, cmpopts.IgnoreInterfaces(struct {
				serviceconfig.LoadBalancingConfig
			}{})); diff != "" {
				t.Errorf("ParseConfig(%s) mismatch (-want +got):\n%s", tt.json, diff)
			}
		})
	}
}

func TestServiceConfigRejectedAtDial(t *testing.T) {
	_, err := grpc.NewClient("passthrough:///127.0.0.1:1",
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultServiceConfig(`{"loadBalancingConfig":[{"pickwise_peak_ewma":{"decayTime":"0s"}}]}`))
	if err == nil || !strings.Contains(err.Error(), "pickwise_peak_ewma: decayTime") {
		t.Fatalf("grpc.NewClient error = %v, want one naming pickwise_peak_ewma and decayTime", err)
	}
}
