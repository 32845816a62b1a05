package subset

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// nested returns a pickwise_subset config with depth subset configs, each
// the only child of the one outside it; inner is the innermost one's
// extra fields.
func nested(depth int, inner string) string {
	var b strings.Builder
	for range depth - 1 {
		b.WriteString(`{"subsetSize": 2, "childPolicy": [{"pickwise_subset": `)
	}
	b.WriteString(`{"subsetSize": 2` + inner + `}`)
	for range depth - 1 {
		b.WriteString(`}]}`)
	}
	return b.String()
}

// viaWeightedTarget wraps a subset config in grpc's weighted_target inside
// another subset config: a parent between two subsets.
func viaWeightedTarget(inner string) string {
	return `{"subsetSize": 2, "childPolicy": [{"weighted_target_experimental": {"targets": {"a": {"weight": 1, "childPolicy": [{"pickwise_subset": ` + inner + `}]}}}}]}`
}

func TestNesting(t *testing.T) {
	for _, tc := range []struct {
		name string
		js   string
		want int
	}{
		{"flat", `{"subsetSize": 2}`, 1},
		{"empty", ``, 1},
		{"one child", nested(2, ""), 2},
		{"16", nested(16, ""), 16},
		{"stops past the limit", nested(40, ""), MaxNesting + 1},
		{"a value, not a key", `{"subsetSize": 2, "clientId": "pickwise_subset"}`, 1},
		{"a list element, not a key", `{"subsetSize": 2, "childPolicy": ["pickwise_subset", {"x": "pickwise_subset"}]}`, 1},
		{"siblings count once", `{"childPolicy": [{"pickwise_subset": {}}, {"pickwise_subset": {"childPolicy": [{"pickwise_subset": {}}]}}]}`, 3},
		{"a key after a nested value", `{"a": {"b": [1, {"c": null}]}, "pickwise_subset": {}}`, 2},
		{"through another parent", viaWeightedTarget(nested(2, "")), 3},
		{"malformed: what was read", `{"childPolicy": [{"pickwise_subset": {"childPolicy": [{"pickwise_subset": `, 3},
		{"escaped key", `{"childPolicy": [{"pickwise\u005fsubset": {}}]}`, 2},
	} {
		if got := nesting([]byte(tc.js), MaxNesting); got != tc.want {
			t.Errorf("%s: nesting(%s) = %d, want %d", tc.name, tc.js, got, tc.want)
		}
	}
}

// TestParseConfigNesting checks the bound on nested subset configs: the
// deepest accepted chain parses all the way down, one more level is
// rejected, wherever the extra level is, and so is a 165 KB chain of
// 3,300, which took seconds before the bound.
func TestParseConfigNesting(t *testing.T) {
	cfg, err := ParseConfig(json.RawMessage(nested(MaxNesting, `, "clientId": "innermost"`)))
	if err != nil {
		t.Fatalf("%d deep: %v", MaxNesting, err)
	}
	c, depth := cfg.(*Config), 1
	for c.ChildPolicy.Name == Name {
		c = c.ChildPolicy.Config.(*Config)
		depth++
	}
	if depth != MaxNesting || c.ClientID != "innermost" {
		t.Errorf("parsed %d levels ending in clientId %q, want %d ending in \"innermost\"", depth, c.ClientID, MaxNesting)
	}
	want := fmt.Sprintf("pickwise_subset: childPolicy: pickwise_subset and pickwise_shadow nested more than %d deep: must be at most %d", MaxNesting, MaxNesting)
	for name, js := range map[string]string{
		"one too many":           nested(MaxNesting+1, ""),
		"3300 deep":              nested(3300, ""),
		"through another parent": viaWeightedTarget(nested(MaxNesting, "")),
		// The byte search that settles most configs must not be fooled.
		"escaped keys": strings.ReplaceAll(nested(MaxNesting+1, ""), `"pickwise_subset"`, `"pickwise\u005fsubset"`),
	} {
		if _, err := ParseConfig(json.RawMessage(js)); err == nil || err.Error() != want {
			t.Errorf("%s (%d bytes): error %v, want %q", name, len(js), err, want)
		}
	}
}

// BenchmarkParseConfigNested measures parsing chains of subset configs:
// each level's parser decodes its child's JSON again, so an accepted
// chain costs up to MaxNesting decodes of the input, and a longer one is
// rejected after reading about MaxNesting levels of it.
func BenchmarkParseConfigNested(b *testing.B) {
	for _, depth := range []int{1, 2, MaxNesting, MaxNesting + 1, 3300} {
		js := json.RawMessage(nested(depth, ""))
		b.Run(fmt.Sprintf("depth=%d", depth), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				ParseConfig(js)
			}
		})
	}
}
