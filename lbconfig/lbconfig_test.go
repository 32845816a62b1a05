package lbconfig_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/pickwise/pickwise/balancer/orcawrr"
	"github.com/pickwise/pickwise/balancer/p2c"
	"github.com/pickwise/pickwise/balancer/peakewma"
	"github.com/pickwise/pickwise/balancer/ringhash"
	"github.com/pickwise/pickwise/lbconfig"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/serviceconfig"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestConfigsBuiltInGoRoundTrip builds every policy's config in Go with
// values off the defaults, turns it into JSON, parses it back with the
// policy's ParseConfig, and dials a channel with its service config:
// what a Go user builds is what the policy runs.
func TestConfigsBuiltInGoRoundTrip(t *testing.T) {
	slow := &lbconfig.SlowStartConfig{Enabled: true, Window: lbconfig.Duration(10 * time.Second), Aggression: 2, MinWeightPercent: 5}
	penalty := lbconfig.DefaultFailurePenalty()
	penalty.Window, penalty.HalfLife = 20, lbconfig.Duration(2*time.Second)
	penalty.Codes = append(penalty.Codes, "UNIMPLEMENTED")
	ejection := lbconfig.DefaultEjection()
	ejection.MaxEjectionPercent, ejection.ProbeInterval = 30, lbconfig.Duration(time.Second)

	p2cCfg := p2c.DefaultConfig()
	p2cCfg.ChoiceCount, p2cCfg.SlowStart, p2cCfg.FailurePenalty, p2cCfg.Ejection = 3, slow, penalty, ejection
	peakCfg := peakewma.DefaultConfig()
	peakCfg.DecayTime, peakCfg.SlowStart, peakCfg.FailurePenalty, peakCfg.Ejection = lbconfig.Duration(5*time.Second), slow, penalty, ejection
	orcaCfg := orcawrr.DefaultConfig()
	orcaCfg.BlackoutPeriod, orcaCfg.WeightHalfLife, orcaCfg.FailurePenalty = lbconfig.Duration(time.Second), lbconfig.Duration(0), penalty
	ringCfg := ringhash.DefaultConfig()
	ringCfg.Table, ringCfg.BalanceFactor, ringCfg.StrictAffinity, ringCfg.FailurePenalty, ringCfg.Ejection = ringhash.TableMaglev, 1.25, true, penalty, ejection

	for _, tc := range []struct {
		name  string
		cfg   serviceconfig.LoadBalancingConfig
		parse func(json.RawMessage) (serviceconfig.LoadBalancingConfig, error)
	}{
		{p2c.Name, p2cCfg, p2c.ParseConfig},
		{peakewma.Name, peakCfg, peakewma.ParseConfig},
		{orcawrr.Name, orcaCfg, orcawrr.ParseConfig},
		{ringhash.Name, ringCfg, ringhash.ParseConfig},
	} {
		t.Run(tc.name, func(t *testing.T) {
			js, err := json.Marshal(tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			got, err := tc.parse(js)
			if err != nil {
				t.Fatalf("ParseConfig(%s): %v", js, err)
			}
			if d := cmp.Diff(tc.cfg, got); d != "" {
				t.Errorf("config built in Go and parsed back from %s differs (-built +parsed):\n%s", js, d)
			}
			sc, err := lbconfig.ServiceConfig(tc.name, tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(sc, `{"loadBalancingConfig":[{"`+tc.name+`":{`) {
				t.Errorf("ServiceConfig = %s", sc)
			}
			// grpc parses the service config when the channel is created,
			// and rejects one the policy rejects.
			conn, err := grpc.NewClient("passthrough:///unused", grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithDefaultServiceConfig(sc))
			if err != nil {
				t.Fatalf("grpc rejected %s: %v", sc, err)
			}
			conn.Close()
		})
	}
}

func TestServiceConfigRejectsWhatDoesNotMarshal(t *testing.T) {
	if _, err := lbconfig.ServiceConfig("pickwise_p2c", func() {}); err == nil || !strings.Contains(err.Error(), "pickwise_p2c") {
		t.Errorf("ServiceConfig of a func = %v, want an error naming the policy", err)
	}
}

// TestServiceConfigChecksRegisteredPolicies: a config built in Go that
// its policy would reject (a slow start with a zero aggression, as a
// struct literal leaves it, or one that sets the ramp and leaves Enabled
// false) fails in ServiceConfig with the policy's own message, not only
// when a channel takes it; DefaultSlowStart is the base that passes, and
// a zero SlowStartConfig turns slow start off.
func TestServiceConfigChecksRegisteredPolicies(t *testing.T) {
	cfg := p2c.DefaultConfig()
	cfg.SlowStart = &lbconfig.SlowStartConfig{Enabled: true, Window: lbconfig.Duration(20 * time.Second)}
	if _, err := lbconfig.ServiceConfig(p2c.Name, cfg); err == nil || !strings.Contains(err.Error(), "pickwise_p2c: slowStart.aggression 0") {
		t.Errorf("zero aggression: error %v, want pickwise_p2c's slowStart.aggression message", err)
	}
	cfg.SlowStart = &lbconfig.SlowStartConfig{Window: lbconfig.Duration(20 * time.Second), Aggression: 1, MinWeightPercent: 10}
	if _, err := lbconfig.ServiceConfig(p2c.Name, cfg); err == nil || !strings.Contains(err.Error(), "pickwise_p2c: slowStart: enabled is false but other fields are set") {
		t.Errorf("a ramp without Enabled: error %v, want pickwise_p2c's slowStart.enabled message", err)
	}
	cfg.SlowStart = &lbconfig.SlowStartConfig{}
	if sc, err := lbconfig.ServiceConfig(p2c.Name, cfg); err != nil || !strings.Contains(sc, `"slowStart":{"enabled":false,`) {
		t.Errorf("slow start off: %q, %v; want a config with slowStart.enabled false", sc, err)
	}
	// nil turns it off too, and must not read as absent, which is on.
	cfg.SlowStart = nil
	if sc, err := lbconfig.ServiceConfig(p2c.Name, cfg); err != nil || !strings.Contains(sc, `"slowStart":null`) {
		t.Errorf("slow start nil: %q, %v; want a config with slowStart null", sc, err)
	} else if parsed, err := p2c.ParseConfig(json.RawMessage(strings.TrimSuffix(strings.TrimPrefix(sc, `{"loadBalancingConfig":[{"pickwise_p2c":`), `}]}`))); err != nil || parsed.(*p2c.Config).SlowStart != nil {
		t.Errorf("slow start nil, parsed back: %+v, %v; want SlowStart nil", parsed, err)
	}
	slow := lbconfig.DefaultSlowStart()
	slow.Window = lbconfig.Duration(20 * time.Second)
	cfg.SlowStart = &slow
	if _, err := lbconfig.ServiceConfig(p2c.Name, cfg); err != nil {
		t.Errorf("DefaultSlowStart with a window: %v", err)
	}
}

// TestFailurePenaltyLiteralWithoutCodes: a config built in Go that leaves
// Codes out (as every one written before the field did) has the default
// codes, and its service config parses.
func TestFailurePenaltyLiteralWithoutCodes(t *testing.T) {
	c := lbconfig.FailurePenaltyConfig{Enabled: true, Window: 10, MaxMultiplier: 100, HalfLife: lbconfig.Duration(5 * time.Second)}
	if err := c.Validate("pickwise_p2c"); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(lbconfig.DefaultFailurePenalty().Codes, c.Codes); d != "" {
		t.Errorf("codes of a literal without them (-want +got):\n%s", d)
	}
	cfg := p2c.DefaultConfig()
	cfg.FailurePenalty = lbconfig.FailurePenaltyConfig{Enabled: true, Window: 10, MaxMultiplier: 100, HalfLife: lbconfig.Duration(5 * time.Second)}
	sc, err := lbconfig.ServiceConfig(p2c.Name, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(sc, "codes") {
		t.Errorf("service config %s names codes it was not given", sc)
	}
	js := strings.TrimSuffix(strings.TrimPrefix(sc, `{"loadBalancingConfig":[{"pickwise_p2c":`), `}]}`)
	if parsed, err := p2c.ParseConfig(json.RawMessage(js)); err != nil {
		t.Errorf("the service config of a literal without codes does not parse: %v", err)
	} else if d := cmp.Diff(lbconfig.DefaultFailurePenalty().Codes, parsed.(*p2c.Config).FailurePenalty.Codes); d != "" {
		t.Errorf("codes parsed back (-want +got):\n%s", d)
	}
}

// TestFailurePenaltyCodes reads failurePenalty.codes as every policy's
// ParseConfig does: decoded over the defaults, then validated.
func TestFailurePenaltyCodes(t *testing.T) {
	defaults := lbconfig.DefaultFailurePenalty().Codes
	for _, tc := range []struct {
		name, js string
		want     []string
		wantErr  string
	}{
		{name: "absent", js: `{}`, want: defaults},
		{name: "default spelled out", js: `{"codes": ["UNAVAILABLE", "INTERNAL", "UNKNOWN", "DEADLINE_EXCEEDED", "RESOURCE_EXHAUSTED"]}`, want: defaults},
		{name: "one host's bad deploy", js: `{"codes": ["UNAVAILABLE", "UNIMPLEMENTED"]}`, want: []string{"UNAVAILABLE", "UNIMPLEMENTED"}},
		{name: "every code but OK", js: `{"codes": ["CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND", "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED"]}`,
			want: []string{"CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND", "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED"}},
		{name: "a repeat counts once", js: `{"codes": ["UNAVAILABLE", "UNAVAILABLE"]}`, want: []string{"UNAVAILABLE", "UNAVAILABLE"}},
		{name: "not a code", js: `{"codes": ["UNAVAILABLE", "INTERNAL", "NOPE"]}`, wantErr: `pickwise_p2c: failurePenalty.codes[2] "NOPE": not a gRPC status code`},
		{name: "Go spelling", js: `{"codes": ["PermissionDenied"]}`, wantErr: `pickwise_p2c: failurePenalty.codes[0] "PermissionDenied": not a gRPC status code; did you mean "PERMISSION_DENIED"`},
		{name: "lower case", js: `{"codes": ["unavailable"]}`, wantErr: `pickwise_p2c: failurePenalty.codes[0] "unavailable": not a gRPC status code; did you mean "UNAVAILABLE"`},
		{name: "American spelling", js: `{"codes": ["CANCELED"]}`, wantErr: `pickwise_p2c: failurePenalty.codes[0] "CANCELED": not a gRPC status code`},
		{name: "OK", js: `{"codes": ["UNAVAILABLE", "OK"]}`, wantErr: `pickwise_p2c: failurePenalty.codes[1] "OK": a success is not a failure`},
		{name: "empty", js: `{"codes": []}`, wantErr: `pickwise_p2c: failurePenalty.codes: must list at least one code (to count none, set "enabled": false)`},
		{name: "null", js: `{"codes": null}`, want: defaults},
		{name: "a number", js: `{"codes": [14]}`, wantErr: `failurePenalty: field "codes": cannot use JSON number`},
		{name: "a string", js: `{"codes": "UNAVAILABLE"}`, wantErr: `failurePenalty: field "codes": cannot use JSON string`},
		{name: "off skips checks", js: `{"enabled": false, "codes": ["NOPE"]}`, want: []string{"NOPE"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var c lbconfig.FailurePenaltyConfig
			err := json.Unmarshal([]byte(tc.js), &c)
			if err == nil {
				err = c.Validate("pickwise_p2c")
			}
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("%s: error %v, want one containing %q", tc.js, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("%s: %v", tc.js, err)
			}
			if d := cmp.Diff(tc.want, c.Codes); d != "" {
				t.Errorf("%s: codes differ (-want +got):\n%s", tc.js, d)
			}
		})
	}
}
