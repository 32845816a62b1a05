package lbconfig

import (
	"strconv"
	"strings"
	"testing"
)

// TestNotRegistered covers each kind of name ServiceConfig rejects,
// against registries with and without pickwise's policies: the error
// names the import a pickwise policy lacks, or the nearest name.
func TestNotRegistered(t *testing.T) {
	grpcOnly := func(name string) bool { return name == "pick_first" || name == "round_robin" }
	withP2C := func(name string) bool { return grpcOnly(name) || name == "pickwise_p2c" }
	for _, tc := range []struct {
		desc       string
		policy     string
		registered func(string) bool
		want       string
	}{
		{"pickwise policy not imported", "pickwise_prequal", grpcOnly,
			`lbconfig: policy "pickwise_prequal" is not registered: its package is not imported; add import _ "github.com/pickwise/pickwise/balancer/prequal"`},
		{"pickwise policy in another case", "Pickwise_Subset", grpcOnly,
			`lbconfig: policy "Pickwise_Subset" is not registered: its package is not imported; add import _ "github.com/pickwise/pickwise/balancer/subset"`},
		{"typo of a policy not imported", "pickwise_p2", grpcOnly,
			`lbconfig: policy "pickwise_p2" is not registered; did you mean "pickwise_p2c"? (add import _ "github.com/pickwise/pickwise/balancer/p2c")`},
		{"typo of a registered policy", "pickwise_p2", withP2C,
			`lbconfig: policy "pickwise_p2" is not registered; did you mean "pickwise_p2c"?`},
		{"swapped letters", "pickwise_pc2", withP2C,
			`lbconfig: policy "pickwise_pc2" is not registered; did you mean "pickwise_p2c"?`},
		{"underscore left out", "pickwise_peakewma", grpcOnly,
			`lbconfig: policy "pickwise_peakewma" is not registered; did you mean "pickwise_peak_ewma"? (add import _ "github.com/pickwise/pickwise/balancer/peakewma")`},
		{"prefix left out", "ring_hash", grpcOnly,
			`lbconfig: policy "ring_hash" is not registered; did you mean "pickwise_ring_hash"? (add import _ "github.com/pickwise/pickwise/balancer/ringhash")`},
		{"typo of grpc's policy", "round_robn", grpcOnly,
			`lbconfig: policy "round_robn" is not registered; did you mean "round_robin"?`},
		{"grpc's policy not registered is no suggestion", "least_request_experimentl", grpcOnly,
			`lbconfig: policy "least_request_experimentl" is not registered: no package this program imports registers it with grpc`},
		{"far from every name", "my_custom_policy", withP2C,
			`lbconfig: policy "my_custom_policy" is not registered: no package this program imports registers it with grpc`},
		{"empty", "", withP2C,
			`lbconfig: policy "" is not registered: no package this program imports registers it with grpc`},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			if got := notRegistered(tc.policy, tc.registered).Error(); got != tc.want {
				t.Errorf("notRegistered(%q) = %s\nwant %s", tc.policy, got, tc.want)
			}
		})
	}
}

func TestEditDistance(t *testing.T) {
	for _, tc := range []struct {
		a, b  string
		limit int
		want  int
	}{
		{"", "", 3, 0},
		{"abc", "abc", 3, 0},
		{"abc", "abd", 3, 1},
		{"abc", "ab", 3, 1},
		{"ab", "abc", 3, 1},
		{"abc", "acb", 3, 1}, // a swap is one edit
		{"kitten", "sitting", 5, 3},
		{"kitten", "sitting", 2, 3}, // past the limit: limit+1
		{"a", "abcdefgh", 3, 4},
		{"pickwise_p2", "pickwise_p2c", 3, 1},
	} {
		if got := editDistance(tc.a, tc.b, tc.limit); got != tc.want {
			t.Errorf("editDistance(%q, %q, %d) = %d, want %d", tc.a, tc.b, tc.limit, got, tc.want)
		}
	}
}

// FuzzNotRegistered: whatever the name, the error names it and nothing
// panics.
func FuzzNotRegistered(f *testing.F) {
	for _, s := range []string{"", "pickwise_p2", "p2c", "round_robn", "pickwise_\xff", strings.Repeat("x", 300)} {
		f.Add(s)
	}
	registered := func(name string) bool { return name == "round_robin" }
	f.Fuzz(func(t *testing.T, name string) {
		err := notRegistered(name, registered)
		if err == nil || !strings.Contains(err.Error(), strconv.Quote(name)) {
			t.Errorf("notRegistered(%q) = %v, want an error naming it", name, err)
		}
	})
}
