package lbconfig

import (
	"fmt"
	"math"
	"time"

	"github.com/pickwise/pickwise/internal/strictjson"
)

// SlowStartConfig is the JSON "slowStart" object shared by every
// load-aware policy. An endpoint that joins after the policy started, or
// that comes back after a connection failure, starts at MinWeightPercent of
// its weight and ramps to full weight over Window. Envoy's formula:
//
//	factor = max(minWeightPercent/100, (elapsed/window)^(1/aggression))
//
// An aggression above 1 ramps faster early on; below 1, slower.
type SlowStartConfig struct {
	// Window is how long the ramp lasts. Default "30s"; must be > 0.
	Window Duration `json:"window"`
	// Aggression shapes the ramp. Default 1.0 (linear); must be > 0.
	Aggression float64 `json:"aggression"`
	// MinWeightPercent is the floor of the ramp, in percent of the
	// endpoint's weight. Default 10; must be in (0, 100].
	MinWeightPercent float64 `json:"minWeightPercent"`
}

// Slow-start defaults, from Envoy's SlowStartConfig (min_weight_percent 10,
// aggression 1.0); Envoy has no default window, and 30s covers a typical
// JIT and cache warm-up.
const (
	DefaultSlowStartWindow           = 30 * time.Second
	DefaultSlowStartAggression       = 1.0
	DefaultSlowStartMinWeightPercent = 10.0
)

// DefaultSlowStart returns slow start with every default, as "slowStart":
// {} sets it: the base for a config built in Go, whose zero Aggression and
// MinWeightPercent the policies reject.
func DefaultSlowStart() SlowStartConfig {
	return SlowStartConfig{
		Window:           Duration(DefaultSlowStartWindow),
		Aggression:       DefaultSlowStartAggression,
		MinWeightPercent: DefaultSlowStartMinWeightPercent,
	}
}

// UnmarshalJSON fills the defaults before reading the fields a user set, so
// "slowStart": {} turns slow start on with every default.
func (c *SlowStartConfig) UnmarshalJSON(b []byte) error {
	type plain SlowStartConfig
	v := plain(DefaultSlowStart())
	if err := strictjson.Decode(b, &v); err != nil {
		return fmt.Errorf("slowStart: %w", err)
	}
	*c = SlowStartConfig(v)
	return nil
}

// Validate rejects values the ramp cannot use. policy prefixes the message.
func (c *SlowStartConfig) Validate(policy string) error {
	if c == nil {
		return nil
	}
	// A zero or negative window would divide by zero in the ramp.
	if c.Window <= 0 {
		return fmt.Errorf("%s: slowStart.window %q: must be > 0", policy, c.Window)
	}
	// Envoy requires a positive aggression; 1/aggression is the exponent.
	if !(c.Aggression > 0) || math.IsInf(c.Aggression, 0) {
		return fmt.Errorf("%s: slowStart.aggression %v: must be > 0 and finite", policy, c.Aggression)
	}
	// A floor of 0 would give a zero weight, an infinite cost; Envoy bounds
	// min_weight_percent to a percentage.
	if !(c.MinWeightPercent > 0) || c.MinWeightPercent > 100 {
		return fmt.Errorf("%s: slowStart.minWeightPercent %v: must be in (0, 100]", policy, c.MinWeightPercent)
	}
	return nil
}
