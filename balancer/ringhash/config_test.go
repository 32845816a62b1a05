package ringhash

import (
	"testing"

	"github.com/pickwise/pickwise/internal/testkit"
)

func TestParseConfig(t *testing.T) {
	defaults := DefaultConfig()
	with := func(f func(*Config)) *Config {
		c := DefaultConfig()
		f(c)
		return c
	}
	testkit.CheckParseConfig(t, ParseConfig, []testkit.ParseCase[*Config]{
		{Name: "empty object", JSON: `{}`, Want: defaults},
		{Name: "empty input", JSON: ``, Want: defaults},
		{Name: "null", JSON: `null`, Want: defaults},
		{Name: "table ring", JSON: `{"table": "ring"}`, Want: defaults},
		{Name: "table empty is ring", JSON: `{"table": ""}`, Want: defaults},
		{Name: "table maglev", JSON: `{"table": "maglev"}`, Want: with(func(c *Config) { c.Table = TableMaglev })},
		{Name: "table rendezvous", JSON: `{"table": "rendezvous"}`, Want: with(func(c *Config) { c.Table = TableRendezvous })},
		{Name: "table unknown", JSON: `{"table": "Ring"}`, WantErr: `pickwise_ring_hash: table "Ring": must be "ring", "maglev" or "rendezvous"`},
		{Name: "table number", JSON: `{"table": 1}`, WantErr: `pickwise_ring_hash: field "table": cannot use JSON number`},
		{Name: "ring sizes", JSON: `{"minRingSize": 10, "maxRingSize": 100}`, Want: with(func(c *Config) { c.MinRingSize, c.MaxRingSize = 10, 100 })},
		{Name: "ring sizes zero are defaults", JSON: `{"minRingSize": 0, "maxRingSize": 0}`, Want: defaults},
		{Name: "minRingSize above max", JSON: `{"minRingSize": 200, "maxRingSize": 100}`, WantErr: "pickwise_ring_hash: minRingSize 200: must be <= maxRingSize 100"},
		{Name: "minRingSize above 8M", JSON: `{"minRingSize": 8388609}`, WantErr: "pickwise_ring_hash: minRingSize 8388609: must be <= 8388608"},
		{Name: "maxRingSize above 8M", JSON: `{"maxRingSize": 8388609}`, WantErr: "pickwise_ring_hash: maxRingSize 8388609: must be <= 8388608"},
		{Name: "maxRingSize 8M", JSON: `{"maxRingSize": 8388608}`, Want: with(func(c *Config) { c.MaxRingSize = 8388608 })},
		{Name: "maxRingSize default is 128K", JSON: `{"maxRingSize": 131072}`, Want: defaults},
		{Name: "maxRingSize below default min", JSON: `{"maxRingSize": 512}`, WantErr: "pickwise_ring_hash: minRingSize 1024: must be <= maxRingSize 512"},
		{Name: "ring size negative", JSON: `{"minRingSize": -1}`, WantErr: `pickwise_ring_hash: field "minRingSize"`},
		{Name: "maglev size prime", JSON: `{"maglevTableSize": 257}`, Want: with(func(c *Config) { c.MaglevTableSize = 257 })},
		{Name: "maglev size zero is default", JSON: `{"maglevTableSize": 0}`, Want: defaults},
		{Name: "maglev size max", JSON: `{"maglevTableSize": 262139}`, Want: with(func(c *Config) { c.MaglevTableSize = 262139 })},
		{Name: "maglev size not prime", JSON: `{"maglevTableSize": 65536}`, WantErr: "pickwise_ring_hash: maglevTableSize 65536: must be a prime <= 262139"},
		{Name: "maglev size 1", JSON: `{"maglevTableSize": 1}`, WantErr: "pickwise_ring_hash: maglevTableSize 1: must be a prime"},
		{Name: "maglev size too large", JSON: `{"maglevTableSize": 262147}`, WantErr: "pickwise_ring_hash: maglevTableSize 262147: must be a prime <= 262139"},
		{Name: "maglev size Envoy's max", JSON: `{"maglevTableSize": 5000011}`, WantErr: "pickwise_ring_hash: maglevTableSize 5000011: must be a prime <= 262139"},
		{Name: "maxWeightRatio", JSON: `{"maxWeightRatio": 4}`, Want: with(func(c *Config) { c.MaxWeightRatio = 4 })},
		{Name: "maxWeightRatio 1", JSON: `{"maxWeightRatio": 1}`, Want: with(func(c *Config) { c.MaxWeightRatio = 1 })},
		{Name: "maxWeightRatio zero is default", JSON: `{"maxWeightRatio": 0}`, Want: defaults},
		{Name: "maxWeightRatio max", JSON: `{"maxWeightRatio": 4294967295}`, Want: with(func(c *Config) { c.MaxWeightRatio = 4294967295 })},
		{Name: "maxWeightRatio too large", JSON: `{"maxWeightRatio": 4294967296}`, WantErr: "pickwise_ring_hash: maxWeightRatio 4294967296: must be <= 4294967295"},
		{Name: "maxWeightRatio negative", JSON: `{"maxWeightRatio": -1}`, WantErr: `pickwise_ring_hash: field "maxWeightRatio"`},
		{Name: "maxWeightRatio fractional", JSON: `{"maxWeightRatio": 2.5}`, WantErr: `pickwise_ring_hash: field "maxWeightRatio"`},
		{Name: "header", JSON: `{"requestHashHeader": "x-user"}`, Want: with(func(c *Config) { c.RequestHashHeader = "x-user" })},
		{Name: "header lowercased", JSON: `{"requestHashHeader": "X-User.ID_1"}`, Want: with(func(c *Config) { c.RequestHashHeader = "x-user.id_1" })},
		{Name: "header binary", JSON: `{"requestHashHeader": "x-key-bin"}`, WantErr: `pickwise_ring_hash: requestHashHeader "x-key-bin": must not end with "-bin"`},
		{Name: "header pseudo", JSON: `{"requestHashHeader": ":path"}`, WantErr: `pickwise_ring_hash: requestHashHeader ":path": must not start with ':'`},
		{Name: "header bad character", JSON: `{"requestHashHeader": "x key"}`, WantErr: `pickwise_ring_hash: requestHashHeader "x key": character ' ' at 1`},
		{Name: "balanceFactor", JSON: `{"balanceFactor": 1.25}`, Want: with(func(c *Config) { c.BalanceFactor = 1.25 })},
		{Name: "balanceFactor 1", JSON: `{"balanceFactor": 1}`, Want: with(func(c *Config) { c.BalanceFactor = 1 })},
		{Name: "balanceFactor 0 is off", JSON: `{"balanceFactor": 0}`, Want: defaults},
		{Name: "balanceFactor below 1", JSON: `{"balanceFactor": 0.5}`, WantErr: "pickwise_ring_hash: balanceFactor 0.5: must be 0 (off) or a finite number >= 1"},
		{Name: "balanceFactor negative", JSON: `{"balanceFactor": -2}`, WantErr: "pickwise_ring_hash: balanceFactor -2: must be 0 (off)"},
		{Name: "balanceFactor huge", JSON: `{"balanceFactor": 1e308}`, Want: with(func(c *Config) { c.BalanceFactor = 1e308 })},
		{Name: "failurePenalty off", JSON: `{"failurePenalty": {"enabled": false}}`, Want: with(func(c *Config) { c.FailurePenalty.Enabled = false })},
		{Name: "strictAffinity", JSON: `{"strictAffinity": true}`, Want: with(func(c *Config) { c.StrictAffinity = true })},
		{Name: "ejection off", JSON: `{"ejection": {"enabled": false}}`, Want: with(func(c *Config) { c.Ejection.Enabled = false })},
		{Name: "ejection probeSuccesses too many", JSON: `{"ejection": {"probeSuccesses": 101}}`, WantErr: "pickwise_ring_hash: ejection.probeSuccesses 101: must be in [1, 100]"},
		{Name: "strictAffinity not a bool", JSON: `{"strictAffinity": "yes"}`, WantErr: `pickwise_ring_hash: field "strictAffinity": cannot use JSON string`},
		{Name: "failurePenalty window", JSON: `{"failurePenalty": {"window": 50}}`, Want: with(func(c *Config) { c.FailurePenalty.Window = 50 })},
		{Name: "failurePenalty window zero", JSON: `{"failurePenalty": {"window": 0}}`, WantErr: "pickwise_ring_hash: failurePenalty.window 0: must be >= 1"},
		{Name: "failurePenalty codes", JSON: `{"failurePenalty": {"codes": ["UNAVAILABLE", "UNIMPLEMENTED"]}}`, Want: with(func(c *Config) { c.FailurePenalty.Codes = []string{"UNAVAILABLE", "UNIMPLEMENTED"} })},
		{Name: "failurePenalty codes OK", JSON: `{"failurePenalty": {"codes": ["OK"]}}`, WantErr: `pickwise_ring_hash: failurePenalty.codes[0] "OK": a success is not a failure`},
		{Name: "unknown field", JSON: `{"tableSize": 3}`, WantErr: `pickwise_ring_hash: unknown field "tableSize"`},
		{Name: "trailing data", JSON: `{} {}`, WantErr: "pickwise_ring_hash: trailing data"},
		{Name: "not an object", JSON: `[]`, WantErr: "pickwise_ring_hash: cannot use JSON array"},
	})
}

// TestRejectedAtDial checks that a bad config fails grpc.NewClient with a
// message naming the policy and the field.
func TestRejectedAtDial(t *testing.T) {
	testkit.CheckRejectedAtDial(t, `{"loadBalancingConfig":[{"pickwise_ring_hash":{"table":"hexagon"}}]}`, `pickwise_ring_hash: table "hexagon"`)
}
