package childpolicy

import (
	"strings"
	"testing"

	_ "google.golang.org/grpc/balancer/roundrobin"
)

// TestNestingCountsBothParents: pickwise_subset and pickwise_shadow keys
// count alike, in any mix, and other keys do not.
func TestNestingCountsBothParents(t *testing.T) {
	for _, tc := range []struct {
		js   string
		want int
	}{
		{`{}`, 1},
		{`{"live": [{"pickwise_subset": {"childPolicy": [{"pickwise_shadow": {}}]}}]}`, 3},
		{`{"live": [{"round_robin": {}}], "candidate": [{"pickwise_shadow": {}}]}`, 2},
		{`{"pickwise_p2c": {"pickwise_ring_hash": {}}}`, 1},
	} {
		if got := Nesting([]byte(tc.js), 16); got != tc.want {
			t.Errorf("Nesting(%s) = %d, want %d", tc.js, got, tc.want)
		}
	}
	deep := strings.Repeat(`{"x": [{"pickwise_shadow": `, 17) + `{}` + strings.Repeat(`}]}`, 17)
	if !TooDeep([]byte(deep), 16) {
		t.Error("17 nested shadows not too deep at 16")
	}
	if TooDeep([]byte(`{"pickwise_subset": {}}`), 16) {
		t.Error("two levels too deep at 16")
	}
}

// TestParse: the first registered entry wins; errors name the field.
func TestParse(t *testing.T) {
	name, _, err := Parse("live", []byte(`[{"nope": {}}, {"round_robin": {}}]`))
	if err != nil || name != "round_robin" {
		t.Fatalf("Parse = %q, %v; want round_robin", name, err)
	}
	for js, want := range map[string]string{
		`{}`:                   `live: must be a list like`,
		`[]`:                   `live: empty list: must name a policy`,
		`[{"a": {}, "b": {}}]`: `live[0]: must have exactly one policy name, has 2`,
		`[{"nope": {}}]`:       `live: no registered policy among ["nope"] (a policy registers when its package is imported)`,
	} {
		if _, _, err := Parse("live", []byte(js)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%s) = %v, want %q", js, err, want)
		}
	}
	if b, err := Marshal("round_robin", nil); err != nil || string(b) != `[{"round_robin":{}}]` {
		t.Errorf("Marshal = %s, %v", b, err)
	}
}
