package shadow

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/pickwise/pickwise/balancer/p2c"
	"github.com/pickwise/pickwise/internal/engine"
	"github.com/pickwise/pickwise/internal/testkit"
	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/resolver"
)

const pair = `"live": [{"round_robin": {}}], "candidate": [{"pickwise_p2c": {}}]`

// TestParseConfig covers every rule. The children's parsed configs are
// interface values, which the table's comparison ignores;
// TestParseChildConfigs checks them.
func TestParseConfig(t *testing.T) {
	with := func(f func(*Config)) *Config {
		c := DefaultConfig()
		c.Live = ChildPolicy{Name: "round_robin"}
		c.Candidate = ChildPolicy{Name: p2c.Name}
		f(c)
		return c
	}
	testkit.CheckParseConfig(t, ParseConfig, []testkit.ParseCase[*Config]{
		{Name: "minimal", JSON: `{` + pair + `}`, Want: with(func(*Config) {})},
		{Name: "rates", JSON: `{` + pair + `, "sampleRate": 1, "canaryPercent": 12.5}`, Want: with(func(c *Config) { c.SampleRate, c.CanaryPercent = 1, 12.5 })},
		{Name: "sampleRate 0", JSON: `{` + pair + `, "sampleRate": 0}`, Want: with(func(c *Config) { c.SampleRate = 0 })},
		{Name: "canary 100", JSON: `{` + pair + `, "canaryPercent": 100}`, Want: with(func(c *Config) { c.CanaryPercent = 100 })},
		{Name: "fallback entry", JSON: `{"live": [{"nope": {}}, {"round_robin": {}}], "candidate": [{"pickwise_p2c": {}}]}`, Want: with(func(*Config) {})},
		{Name: "empty", JSON: ``, WantErr: `pickwise_shadow: live: required, a list like [{"round_robin": {}}]`},
		{Name: "null", JSON: `null`, WantErr: `pickwise_shadow: live: required`},
		{Name: "no candidate", JSON: `{"live": [{"round_robin": {}}]}`, WantErr: `pickwise_shadow: candidate: required`},
		{Name: "candidate null", JSON: `{"live": [{"round_robin": {}}], "candidate": null}`, WantErr: `pickwise_shadow: candidate: required`},
		{Name: "live not a list", JSON: `{"live": {"round_robin": {}}, "candidate": [{"pickwise_p2c": {}}]}`, WantErr: `pickwise_shadow: live: must be a list like`},
		{Name: "live empty list", JSON: `{"live": [], "candidate": [{"pickwise_p2c": {}}]}`, WantErr: `pickwise_shadow: live: empty list: must name a policy`},
		{Name: "two names in an entry", JSON: `{"live": [{"round_robin": {}, "pick_first": {}}], "candidate": [{"pickwise_p2c": {}}]}`, WantErr: `pickwise_shadow: live[0]: must have exactly one policy name, has 2`},
		{Name: "unregistered", JSON: `{"live": [{"round_robin": {}}], "candidate": [{"nope": {}}]}`, WantErr: `pickwise_shadow: candidate: no registered policy among ["nope"] (a policy registers when its package is imported)`},
		{Name: "child's own error", JSON: `{"live": [{"round_robin": {}}], "candidate": [{"pickwise_p2c": {"choiceCount": 1}}]}`, WantErr: `pickwise_shadow: candidate "pickwise_p2c": pickwise_p2c: choiceCount 1: must be >= 2`},
		{Name: "sampleRate above 1", JSON: `{` + pair + `, "sampleRate": 1.5}`, WantErr: `pickwise_shadow: sampleRate 1.5: must be in [0, 1]`},
		{Name: "sampleRate negative", JSON: `{` + pair + `, "sampleRate": -0.1}`, WantErr: `pickwise_shadow: sampleRate -0.1: must be in [0, 1]`},
		{Name: "canary above 100", JSON: `{` + pair + `, "canaryPercent": 101}`, WantErr: `pickwise_shadow: canaryPercent 101: must be in [0, 100]`},
		{Name: "canary negative", JSON: `{` + pair + `, "canaryPercent": -1}`, WantErr: `pickwise_shadow: canaryPercent -1: must be in [0, 100]`},
		{Name: "sampleRate string", JSON: `{` + pair + `, "sampleRate": "0.1"}`, WantErr: `pickwise_shadow: field "sampleRate": cannot use JSON string`},
		{Name: "unknown field", JSON: `{` + pair + `, "rate": 1}`, WantErr: `pickwise_shadow: unknown field "rate"`},
		{Name: "trailing data", JSON: `{` + pair + `}{}`, WantErr: `pickwise_shadow:`},
	})
}

// TestParseChildConfigs checks that each child's config is parsed by the
// child's own parser, and that a parsed config survives a JSON round trip.
func TestParseChildConfigs(t *testing.T) {
	cfg, err := ParseConfig(json.RawMessage(`{"live": [{"pickwise_p2c": {"choiceCount": 3}}], "candidate": [{"pickwise_p2c": {}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	c := cfg.(*Config)
	live, ok := c.Live.Config.(*p2c.Config)
	if !ok || live.ChoiceCount != 3 {
		t.Fatalf("live config %#v, want p2c's with choiceCount 3", c.Live.Config)
	}
	js, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	again, err := ParseConfig(js)
	if err != nil {
		t.Fatalf("round trip of %s: %v", js, err)
	}
	if got := again.(*Config).Live.Config.(*p2c.Config).ChoiceCount; got != 3 {
		t.Errorf("round trip of %s: choiceCount %d", js, got)
	}
}

// TestParseConfigNesting checks the bound on nested parent configs.
func TestParseConfigNesting(t *testing.T) {
	nest := func(depth int) string {
		s := `{` + pair + `}`
		for range depth - 1 {
			s = `{"live": [{"pickwise_shadow": ` + s + `}], "candidate": [{"round_robin": {}}]}`
		}
		return s
	}
	if _, err := ParseConfig(json.RawMessage(nest(MaxNesting))); err != nil {
		t.Fatalf("%d deep: %v", MaxNesting, err)
	}
	for _, depth := range []int{MaxNesting + 1, 3000} {
		_, err := ParseConfig(json.RawMessage(nest(depth)))
		if err == nil || !strings.Contains(err.Error(), "pickwise_shadow: pickwise_shadow and pickwise_subset nested more than 16 deep") {
			t.Errorf("%d deep: error %v", depth, err)
		}
	}
}

// FuzzParseConfig checks that every input is either rejected with an error
// that names the policy, or yields a config the balancer runs with over a
// few endpoints.
func FuzzParseConfig(f *testing.F) {
	for _, seed := range []string{
		`{` + pair + `}`, ``, `null`, `[]`, `{}`,
		`{` + pair + `, "sampleRate": 1, "canaryPercent": 100}`,
		`{` + pair + `, "sampleRate": 2}`, `{` + pair + `, "canaryPercent": -3}`,
		`{"live": [{"pick_first": {}}], "candidate": [{"pickwise_p2c": {"choiceCount": 3}}]}`,
		`{"live": [{"pickwise_shadow": {` + pair + `}}], "candidate": [{"round_robin": {}}]}`,
		`{"live": [], "candidate": []}`, `{"live": [{}], "candidate": [{"x": {}}]}`,
		`{` + pair + `, "extra": true}`, `{` + pair + `, "sampleRate": 1e-300}`,
	} {
		f.Add(seed)
	}
	addrs := testkit.Addrs(3)
	var eps []resolver.Endpoint
	for _, a := range addrs {
		eps = append(eps, resolver.Endpoint{Addresses: []resolver.Address{{Addr: a}}})
	}
	f.Fuzz(func(t *testing.T, in string) {
		parsed := testkit.FuzzParse(t, Name, ParseConfig, in)
		if parsed == nil {
			return
		}
		cc := testkit.NewClientConn()
		b := newBalancer(cc, balancer.BuildOptions{}, engine.Options{Rand: engine.NewSeededRand(1)})
		defer b.Close()
		if err := b.UpdateClientConnState(balancer.ClientConnState{ResolverState: resolver.State{Endpoints: eps}, BalancerConfig: parsed}); err != nil {
			t.Fatalf("config %s parsed but the balancer rejected it: %v", in, err)
		}
	})
}
