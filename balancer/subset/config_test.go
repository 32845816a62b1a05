package subset

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/pickwise/pickwise/balancer/p2c" // the default child, registered for tests only
	"github.com/pickwise/pickwise/internal/testkit"
	"google.golang.org/grpc/balancer"
)

func intp(i int) *int { return &i }

// TestParseConfig covers every rule. The child's parsed config is an
// interface value, which the table's comparison ignores; TestParseChildConfig
// checks it.
func TestParseConfig(t *testing.T) {
	with := func(f func(*Config)) *Config {
		c := DefaultConfig()
		c.SubsetSize = 3
		c.ChildPolicy = ChildPolicy{Name: p2c.Name}
		f(c)
		return c
	}
	base := with(func(*Config) {})
	testkit.CheckParseConfig(t, ParseConfig, []testkit.ParseCase[*Config]{
		{Name: "minimal", JSON: `{"subsetSize": 3}`, Want: base},
		{Name: "subsetSize 1", JSON: `{"subsetSize": 1}`, Want: with(func(c *Config) { c.SubsetSize = 1 })},
		{Name: "subsetSize missing", JSON: `{}`, WantErr: "pickwise_subset: subsetSize 0: must be > 0 (required)"},
		{Name: "empty input", JSON: ``, WantErr: "pickwise_subset: subsetSize 0: must be > 0 (required)"},
		{Name: "null", JSON: `null`, WantErr: "pickwise_subset: subsetSize 0: must be > 0 (required)"},
		{Name: "subsetSize 0", JSON: `{"subsetSize": 0}`, WantErr: "pickwise_subset: subsetSize 0: must be > 0"},
		{Name: "subsetSize negative", JSON: `{"subsetSize": -2}`, WantErr: "pickwise_subset: subsetSize -2: must be > 0"},
		{Name: "subsetSize string", JSON: `{"subsetSize": "3"}`, WantErr: `pickwise_subset: field "subsetSize": cannot use JSON string`},
		{Name: "subsetSize fraction", JSON: `{"subsetSize": 2.5}`, WantErr: `pickwise_subset: field "subsetSize": cannot use JSON number 2.5`},
		{Name: "index and count", JSON: `{"subsetSize": 3, "clientIndex": 2, "clientCount": 5}`, Want: with(func(c *Config) {
			c.ClientIndex, c.ClientCount = intp(2), intp(5)
		})},
		{Name: "index 0 of 1", JSON: `{"subsetSize": 3, "clientIndex": 0, "clientCount": 1}`, Want: with(func(c *Config) {
			c.ClientIndex, c.ClientCount = intp(0), intp(1)
		})},
		{Name: "index without count", JSON: `{"subsetSize": 3, "clientIndex": 2}`, WantErr: "pickwise_subset: clientIndex 2: requires clientCount"},
		{Name: "count without index", JSON: `{"subsetSize": 3, "clientCount": 5}`, WantErr: "pickwise_subset: clientCount 5: requires clientIndex"},
		{Name: "count 0", JSON: `{"subsetSize": 3, "clientIndex": 0, "clientCount": 0}`, WantErr: "pickwise_subset: clientCount 0: must be >= 1"},
		{Name: "count negative", JSON: `{"subsetSize": 3, "clientIndex": 0, "clientCount": -4}`, WantErr: "pickwise_subset: clientCount -4: must be >= 1"},
		{Name: "index == count", JSON: `{"subsetSize": 3, "clientIndex": 5, "clientCount": 5}`, WantErr: "pickwise_subset: clientIndex 5: must be in [0, clientCount 5)"},
		{Name: "index negative", JSON: `{"subsetSize": 3, "clientIndex": -1, "clientCount": 5}`, WantErr: "pickwise_subset: clientIndex -1: must be in [0, clientCount 5)"},
		{Name: "index null", JSON: `{"subsetSize": 3, "clientIndex": null, "clientCount": 5}`, WantErr: "pickwise_subset: clientCount 5: requires clientIndex"},
		{Name: "count too large for balanced", JSON: `{"subsetSize": 3, "clientIndex": 0, "clientCount": 10001}`, WantErr: `pickwise_subset: clientCount 10001: must be <= 10000 in mode "balanced" (use "stable")`},
		{Name: "count at the balanced bound", JSON: `{"subsetSize": 3, "clientIndex": 9999, "clientCount": 10000}`, Want: with(func(c *Config) {
			c.ClientIndex, c.ClientCount = intp(9999), intp(10000)
		})},
		{Name: "large count in stable", JSON: `{"subsetSize": 3, "clientIndex": 123456, "clientCount": 1000000, "mode": "stable"}`, Want: with(func(c *Config) {
			c.ClientIndex, c.ClientCount, c.Mode = intp(123456), intp(1000000), ModeStable
		})},
		{Name: "clientId", JSON: `{"subsetSize": 3, "clientId": "pod-a"}`, Want: with(func(c *Config) { c.ClientID = "pod-a" })},
		{Name: "clientId with index", JSON: `{"subsetSize": 3, "clientId": "x", "clientIndex": 1, "clientCount": 2}`, Want: with(func(c *Config) {
			c.ClientID, c.ClientIndex, c.ClientCount = "x", intp(1), intp(2)
		})},
		{Name: "clientId number", JSON: `{"subsetSize": 3, "clientId": 7}`, WantErr: `pickwise_subset: field "clientId": cannot use JSON number`},
		{Name: "mode balanced", JSON: `{"subsetSize": 3, "mode": "balanced"}`, Want: base},
		{Name: "mode stable", JSON: `{"subsetSize": 3, "mode": "stable"}`, Want: with(func(c *Config) { c.Mode = ModeStable })},
		{Name: "mode empty", JSON: `{"subsetSize": 3, "mode": ""}`, WantErr: `pickwise_subset: mode "": must be "balanced" or "stable"`},
		{Name: "mode unknown", JSON: `{"subsetSize": 3, "mode": "Balanced"}`, WantErr: `pickwise_subset: mode "Balanced": must be "balanced" or "stable"`},
		{Name: "childPolicy null is the default", JSON: `{"subsetSize": 3, "childPolicy": null}`, Want: base},
		{Name: "childPolicy p2c", JSON: `{"subsetSize": 3, "childPolicy": [{"pickwise_p2c": {"choiceCount": 3}}]}`, Want: base},
		{Name: "childPolicy other", JSON: `{"subsetSize": 3, "childPolicy": [{"` + testChildName + `": {}}]}`, Want: with(func(c *Config) {
			c.ChildPolicy.Name = testChildName
		})},
		{Name: "childPolicy skips unregistered", JSON: `{"subsetSize": 3, "childPolicy": [{"no_such_policy": {"x": 1}}, {"` + testChildName + `": {}}, {"pickwise_p2c": {}}]}`, Want: with(func(c *Config) {
			c.ChildPolicy.Name = testChildName
		})},
		{Name: "childPolicy config null", JSON: `{"subsetSize": 3, "childPolicy": [{"pickwise_p2c": null}]}`, Want: base},
		{Name: "childPolicy none registered", JSON: `{"subsetSize": 3, "childPolicy": [{"no_such_policy": {}}, {"nor_this": {}}]}`, WantErr: `pickwise_subset: childPolicy: no registered policy among ["no_such_policy" "nor_this"] (a policy registers when its package is imported)`},
		{Name: "childPolicy empty list", JSON: `{"subsetSize": 3, "childPolicy": []}`, WantErr: `pickwise_subset: childPolicy: empty list: must name a policy`},
		{Name: "childPolicy not a list", JSON: `{"subsetSize": 3, "childPolicy": {"pickwise_p2c": {}}}`, WantErr: `pickwise_subset: childPolicy: must be a list like [{"pickwise_p2c": {}}]`},
		{Name: "childPolicy string", JSON: `{"subsetSize": 3, "childPolicy": "pickwise_p2c"}`, WantErr: `pickwise_subset: childPolicy: must be a list like`},
		{Name: "childPolicy two names in one entry", JSON: `{"subsetSize": 3, "childPolicy": [{"pickwise_p2c": {}, "round_robin": {}}]}`, WantErr: `pickwise_subset: childPolicy[0]: must have exactly one policy name, has 2`},
		{Name: "childPolicy empty entry", JSON: `{"subsetSize": 3, "childPolicy": [{}]}`, WantErr: `pickwise_subset: childPolicy[0]: must have exactly one policy name, has 0`},
		{Name: "childPolicy child error", JSON: `{"subsetSize": 3, "childPolicy": [{"pickwise_p2c": {"choiceCount": 1}}]}`, WantErr: `pickwise_subset: childPolicy "pickwise_p2c": pickwise_p2c: choiceCount 1: must be >= 2`},
		{Name: "childPolicy child unknown field", JSON: `{"subsetSize": 3, "childPolicy": [{"pickwise_p2c": {"choices": 2}}]}`, WantErr: `pickwise_subset: childPolicy "pickwise_p2c": pickwise_p2c: unknown field "choices"`},
		{Name: "childPolicy test child rejects", JSON: `{"subsetSize": 3, "childPolicy": [{"` + testChildName + `": {"reject": true}}]}`, WantErr: `pickwise_subset: childPolicy "` + testChildName + `": ` + testChildName + `: reject true: rejected on request`},
		{Name: "childPolicy first registered wins even if a later one is valid", JSON: `{"subsetSize": 3, "childPolicy": [{"pickwise_p2c": {"choiceCount": 0}}, {"` + testChildName + `": {}}]}`, WantErr: `pickwise_subset: childPolicy "pickwise_p2c": pickwise_p2c: choiceCount 0`},
		{Name: "unknown field", JSON: `{"subsetSize": 3, "clientName": "a"}`, WantErr: `pickwise_subset: unknown field "clientName"`},
		{Name: "malformed", JSON: `{"subsetSize": 3`, WantErr: "pickwise_subset: unexpected EOF"},
		{Name: "malformed childPolicy", JSON: `{"subsetSize": 3, "childPolicy": [{"pickwise_p2c": }]}`, WantErr: "pickwise_subset: invalid character"},
		{Name: "not an object", JSON: `[3]`, WantErr: "pickwise_subset: cannot use JSON array"},
		{Name: "trailing data", JSON: `{"subsetSize": 3} {}`, WantErr: "pickwise_subset: trailing data"},
	})
}

// TestParseChildConfig checks that the child's config is the one its own
// parser returned, for the default and for an explicit list.
func TestParseChildConfig(t *testing.T) {
	for _, tc := range []struct {
		json   string
		name   string
		choice uint32
		tag    string
	}{
		{json: `{"subsetSize": 2}`, name: p2c.Name, choice: p2c.DefaultChoiceCount},
		{json: `{"subsetSize": 2, "childPolicy": [{"pickwise_p2c": {"choiceCount": 4}}]}`, name: p2c.Name, choice: 4},
		{json: `{"subsetSize": 2, "childPolicy": [{"nope": {}}, {"` + testChildName + `": {"tag": "t1"}}]}`, name: testChildName, tag: "t1"},
	} {
		got, err := ParseConfig(json.RawMessage(tc.json))
		if err != nil {
			t.Fatalf("ParseConfig(%s): %v", tc.json, err)
		}
		child := got.(*Config).ChildPolicy
		if child.Name != tc.name {
			t.Errorf("%s: child %q, want %q", tc.json, child.Name, tc.name)
		}
		switch c := child.Config.(type) {
		case *p2c.Config:
			if c.ChoiceCount != tc.choice {
				t.Errorf("%s: choiceCount %d, want %d", tc.json, c.ChoiceCount, tc.choice)
			}
		case *recConfig:
			if c.Tag != tc.tag {
				t.Errorf("%s: tag %q, want %q", tc.json, c.Tag, tc.tag)
			}
		default:
			t.Errorf("%s: child config %T", tc.json, child.Config)
		}
	}
}

// TestDefaultChildNotRegistered checks the message a user sees when the
// default child's package was not imported. p2c is registered in this
// binary, so the test points the default at a name nobody registers.
func TestDefaultChildNotRegistered(t *testing.T) {
	defer func(old string) { defaultChild = old }(defaultChild)
	defaultChild = "pickwise_p2c_not_imported"
	_, err := ParseConfig(json.RawMessage(`{"subsetSize": 3}`))
	want := `pickwise_subset: childPolicy: default child "pickwise_p2c_not_imported" is not registered`
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("error %v, want one containing %q", err, want)
	}
	// An explicit child does not need the default.
	if _, err := ParseConfig(json.RawMessage(`{"subsetSize": 3, "childPolicy": [{"` + testChildName + `": {}}]}`)); err != nil {
		t.Fatalf("explicit child: %v", err)
	}
}

// TestParseConfigThroughRegistry checks that the registered builder is the
// parser grpc uses.
func TestParseConfigThroughRegistry(t *testing.T) {
	parser, ok := balancer.Get(Name).(balancer.ConfigParser)
	if !ok {
		t.Fatalf("%s is not registered as a balancer.ConfigParser", Name)
	}
	if _, err := parser.ParseConfig(json.RawMessage(`{"subsetSize": 0}`)); err == nil {
		t.Fatal("registered parser accepted subsetSize 0")
	}
}

// TestServiceConfigRejectedAtDial checks what a user sees for a bad field
// and for a bad child config.
func TestServiceConfigRejectedAtDial(t *testing.T) {
	testkit.CheckRejectedAtDial(t, `{"loadBalancingConfig":[{"pickwise_subset":{"subsetSize":3,"clientIndex":3,"clientCount":3}}]}`,
		"pickwise_subset: clientIndex 3: must be in [0, clientCount 3)")
	testkit.CheckRejectedAtDial(t, `{"loadBalancingConfig":[{"pickwise_subset":{"subsetSize":3,"childPolicy":[{"pickwise_p2c":{"choiceCount":1}}]}}]}`,
		`pickwise_subset: childPolicy "pickwise_p2c": pickwise_p2c: choiceCount 1: must be >= 2`)
}

// TestConfigSurvivesJSONRoundTrip checks that a parsed config marshals back
// into JSON that parses to the same config: grpc's xDS layer marshals the
// parsed configs of the policies a cluster names and parses them again, and
// without ChildPolicy's MarshalJSON the child came back as an object the
// parser rejects.
func TestConfigSurvivesJSONRoundTrip(t *testing.T) {
	for _, in := range []string{
		`{"subsetSize": 3}`,
		`{"subsetSize": 3, "clientIndex": 1, "clientCount": 4, "mode": "stable"}`,
		`{"subsetSize": 2, "clientId": "a", "childPolicy": [{"pickwise_p2c": {"choiceCount": 3, "slowStart": {"window": "5s"}}}]}`,
	} {
		first, err := ParseConfig(json.RawMessage(in))
		if err != nil {
			t.Fatalf("ParseConfig(%s): %v", in, err)
		}
		out, err := json.Marshal(first)
		if err != nil {
			t.Fatalf("Marshal(%s): %v", in, err)
		}
		second, err := ParseConfig(out)
		if err != nil {
			t.Fatalf("ParseConfig of the marshalled %s = %s: %v", in, out, err)
		}
		again, _ := json.Marshal(second)
		if string(again) != string(out) {
			t.Errorf("round trip of %s changed it:\n first  %s\n second %s", in, out, again)
		}
		if first.(*Config).ChildPolicy.Name != second.(*Config).ChildPolicy.Name {
			t.Errorf("child %q became %q", first.(*Config).ChildPolicy.Name, second.(*Config).ChildPolicy.Name)
		}
	}
}
