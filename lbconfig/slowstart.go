package lbconfig

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/pickwise/pickwise/internal/strictjson"
)

// SlowStartConfig is the JSON "slowStart" object shared by every
// load-aware policy. An endpoint that joins after the channel placed its
// first call, or that comes back after a connection failure, starts at
// MinWeightPercent of its weight and ramps to full weight over Window.
// The endpoints that join before the first call, over however many
// resolver updates, are the initial fleet and do not ramp: none of them
// carries any of the channel's load yet. Envoy's formula:
//
//	factor = max(minWeightPercent/100, (elapsed/window)^(1/aggression))
//
// An aggression above 1 ramps faster early on; below 1, slower.
//
// A weighted schedule (pickwise_orca_wrr) multiplies the endpoint's weight
// by the factor. A d-choice policy (pickwise_p2c, pickwise_peak_ewma)
// compares its cost unramped and passes it over while it has taken the
// share of picks its ramped weight gives it: against long-lived calls a
// newcomer with nothing in flight is cheaper than its loaded peers at any
// factor, and a cost divided by the factor would still win it most
// comparisons while cold, and among idle peers none until its ramp ends.
//
// Every policy also ends a ramp early once the endpoint's answers show it
// warm: its first five successful answers, timed, none slower than 1.2
// times its peers' average meanwhile, or eight or more whose mean is no
// more than 1.5 times it; or its peers at least twice as slow as its
// slowest answer, even one (an overloaded fleet, which the ramp only
// loads further). Either way none of its timed calls may have failed with
// a server-side status, timed out or been cancelled once sent. A backend
// that only lost its connection for a moment, or left the endpoint list
// and came back, is the same warm process, and ramping it would load the
// rest of the fleet with its share for the whole window; a process that
// is really cold answers slower and keeps its ramp. TimeOnly keeps every
// ramp for its whole window instead, as Envoy's does.
//
// Unlike the other shared objects, whose null keeps the defaults,
// "slowStart": null turns slow start off, as a nil *SlowStartConfig does
// in Go.
type SlowStartConfig struct {
	// Enabled turns slow start on. Default true: "slowStart": {} and a
	// config without "slowStart" both ramp; {"enabled": false} does not.
	Enabled bool `json:"enabled"`
	// Window is how long the ramp lasts. Default "30s"; must be > 0.
	Window Duration `json:"window"`
	// Aggression shapes the ramp. Default 1.0 (linear); must be > 0.
	Aggression float64 `json:"aggression"`
	// MinWeightPercent is the floor of the ramp, in percent of the
	// endpoint's weight. Default 10; must be in (0, 100].
	MinWeightPercent float64 `json:"minWeightPercent"`
	// TimeOnly ramps by time alone: an endpoint keeps its ramp for the
	// whole window even when its answers show it as fast as its peers,
	// or its peers overloaded. Default false.
	TimeOnly bool `json:"timeOnly,omitempty"`
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
// {} sets it: the base for a config built in Go, whose zero Enabled turns
// it off and whose zero Aggression and MinWeightPercent the policies
// reject.
func DefaultSlowStart() SlowStartConfig {
	return SlowStartConfig{
		Enabled:          true,
		Window:           Duration(DefaultSlowStartWindow),
		Aggression:       DefaultSlowStartAggression,
		MinWeightPercent: DefaultSlowStartMinWeightPercent,
	}
}

// UnmarshalJSON fills the defaults before reading the fields a user set, so
// "slowStart": {} turns slow start on with every default. "enabled": false
// with any other field set is rejected: which of the two was meant cannot
// be told.
func (c *SlowStartConfig) UnmarshalJSON(b []byte) error {
	type plain SlowStartConfig
	v := plain(DefaultSlowStart())
	if err := strictjson.Decode(b, &v); err != nil {
		return fmt.Errorf("slowStart: %w", err)
	}
	if !v.Enabled {
		// What the user set, over zeros.
		v = plain{}
		if err := strictjson.Decode(b, &v); err != nil {
			return fmt.Errorf("slowStart: %w", err)
		}
		if v != (plain{}) {
			return fmt.Errorf("slowStart: %w", errOffWithRamp)
		}
	}
	*c = SlowStartConfig(v)
	return nil
}

// errOffWithRamp: a slow start turned off that also sets the ramp. From
// Go, it is a struct literal that left Enabled false.
var errOffWithRamp = errors.New("enabled is false but other fields are set: turn slow start off with no other field, or start a config built in Go from lbconfig.DefaultSlowStart()")

// Validate rejects values the ramp cannot use. policy prefixes the message.
func (c *SlowStartConfig) Validate(policy string) error {
	if c == nil {
		return nil
	}
	if !c.Enabled {
		if *c != (SlowStartConfig{}) {
			return fmt.Errorf("%s: slowStart.%w", policy, errOffWithRamp)
		}
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
