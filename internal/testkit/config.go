package testkit

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/serviceconfig"
)

// ParseCase is one row of a policy's ParseConfig table test: the config
// JSON wants either the config Want or an error containing WantErr.
type ParseCase[C serviceconfig.LoadBalancingConfig] struct {
	Name    string
	JSON    string
	Want    C
	WantErr string
}

// ignoreMarker skips the fields of type LoadBalancingConfig: the marker
// a config embeds, and a parent's child configs, which the child's own
// tests check. cmpopts.IgnoreInterfaces would skip every value assignable
// to the interface, the config itself among them, and compare nothing.
var ignoreMarker = cmp.FilterPath(func(p cmp.Path) bool {
	sf, ok := p.Last().(cmp.StructField)
	return ok && sf.Type() == reflect.TypeFor[serviceconfig.LoadBalancingConfig]()
}, cmp.Ignore())

// CheckParseConfig runs a ParseConfig table test.
func CheckParseConfig[C serviceconfig.LoadBalancingConfig](t *testing.T, parse func(json.RawMessage) (serviceconfig.LoadBalancingConfig, error), cases []ParseCase[C]) {
	t.Helper()
	for _, tt := range cases {
		t.Run(tt.Name, func(t *testing.T) {
			got, err := parse(json.RawMessage(tt.JSON))
			if tt.WantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.WantErr) {
					t.Fatalf("ParseConfig(%s) error = %v, want one containing %q", tt.JSON, err, tt.WantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseConfig(%s) unexpected error: %v", tt.JSON, err)
			}
			// The embedded LoadBalancingConfig interface is a marker, nil in
			// both.
			if diff := cmp.Diff(tt.Want, got, ignoreMarker); diff != "" {
				t.Errorf("ParseConfig(%s) mismatch (-want +got):\n%s", tt.JSON, diff)
			}
		})
	}
}

// CheckRejectedAtDial checks what a user sees when a channel's default
// service config is bad: grpc.NewClient fails with a message containing
// want (the policy and the field).
func CheckRejectedAtDial(t *testing.T, serviceConfig, want string) {
	t.Helper()
	_, err := grpc.NewClient("passthrough:///127.0.0.1:1",
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultServiceConfig(serviceConfig))
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("grpc.NewClient error = %v, want one containing %q", err, want)
	}
}

// FuzzParse is the first step of every ParseConfig fuzz target: it parses
// in and returns the config, or nil after checking that the error names
// the policy ("<policy>: ..."), as every rejection must.
func FuzzParse(t *testing.T, policy string, parse func(json.RawMessage) (serviceconfig.LoadBalancingConfig, error), in string) serviceconfig.LoadBalancingConfig {
	t.Helper()
	cfg, err := parse(json.RawMessage(in))
	if err != nil {
		if !strings.HasPrefix(err.Error(), policy+": ") {
			t.Fatalf("error %q does not name the policy", err)
		}
		return nil
	}
	return cfg
}
