package lbconfig

import (
	"fmt"
	"time"

	"github.com/pickwise/pickwise/internal/strictjson"
)

// EjectionConfig is the JSON "ejection" object: local ejection with
// probation, for an endpoint whose failures stand far above the fleet's.
// Avoidance (failurePenalty) already cuts such an endpoint's share; an
// ejection takes it out of placement altogether, as Envoy's and grpc's
// outlier detection do, while the resolver's membership stays as it is.
// Hash policies send an ejected endpoint's keys to their next candidate
// and give them back on readmission.
//
// An endpoint is ejected when its decayed failure count reaches
// MinFailures and its excess failure rate over the fleet's (see
// FailurePenaltyConfig) reaches Threshold, and no more than
// MaxEjectionPercent of the READY endpoints are out (at least one may be,
// and never the last). It stays out for at least BaseEjectionTime times
// its ejection count, capped at MaxEjectionTime; as in grpc's outlier
// detection and Envoy the count grows by one with each ejection and
// shrinks by one for every ten BaseEjectionTimes it stays in. While out it
// gets one probe call every ProbeInterval, one at a time, the interval
// doubling with each failed probe up to three times its base and back to
// its base after a success (the next probe then follows a quarter interval
// later), so that its recovery shows in its answers; it is readmitted,
// with fresh counts, once its ejection time is over and its last
// ProbeSuccesses probes succeeded. Ejection needs the failure penalty's
// counts: with failurePenalty off, nothing is ejected. It has no list of
// codes of its own: a failure is what failurePenalty.codes says, for the
// counts and for the probes alike, so that what moves traffic and what
// ejects are the same evidence.
type EjectionConfig struct {
	// Enabled turns local ejection on. Default true.
	Enabled bool `json:"enabled"`
	// Threshold is the excess failure rate, in (0, 1], that ejects.
	// Default 0.5.
	Threshold float64 `json:"threshold"`
	// MinFailures is the decayed failure count an endpoint needs before it
	// can be ejected: the evidence. Default 5; must be in [1, 1000].
	MinFailures float64 `json:"minFailures"`
	// BaseEjectionTime is the first ejection's length. Default "1s"; must
	// be in [10ms, 1h].
	BaseEjectionTime Duration `json:"baseEjectionTime"`
	// MaxEjectionTime caps the ejection time. Default "30s"; must be in
	// [baseEjectionTime, 24h].
	MaxEjectionTime Duration `json:"maxEjectionTime"`
	// MaxEjectionPercent bounds the share of READY endpoints out at once.
	// Default 10 (grpc's outlier detection's default); must be in [0, 100].
	// At least one endpoint may be out whatever the share, as in Envoy,
	// and never every READY one.
	MaxEjectionPercent uint32 `json:"maxEjectionPercent"`
	// ProbeInterval is the time between two probe calls to an ejected
	// endpoint, before failed probes stretch it (up to 3 times).
	// Default "300ms"; must be in [1ms, 1m].
	ProbeInterval Duration `json:"probeInterval"`
	// ProbeSuccesses is how many probes in a row must succeed before
	// readmission. Default 2; must be in [1, 100].
	ProbeSuccesses uint32 `json:"probeSuccesses"`
}

// Ejection defaults; see EjectionConfig.
const (
	DefaultEjectionThreshold      = 0.5
	DefaultEjectionMinFailures    = 5
	DefaultBaseEjectionTime       = time.Second
	DefaultMaxEjectionTime        = 30 * time.Second
	DefaultMaxEjectionPercent     = 10
	DefaultProbeInterval          = 300 * time.Millisecond
	DefaultEjectionProbeSuccesses = 2
)

// DefaultEjection returns the ejection a policy uses when its config has
// no "ejection" object.
func DefaultEjection() EjectionConfig {
	return EjectionConfig{
		Enabled:            true,
		Threshold:          DefaultEjectionThreshold,
		MinFailures:        DefaultEjectionMinFailures,
		BaseEjectionTime:   Duration(DefaultBaseEjectionTime),
		MaxEjectionTime:    Duration(DefaultMaxEjectionTime),
		MaxEjectionPercent: DefaultMaxEjectionPercent,
		ProbeInterval:      Duration(DefaultProbeInterval),
		ProbeSuccesses:     DefaultEjectionProbeSuccesses,
	}
}

// UnmarshalJSON fills the defaults before reading the fields a user set.
func (c *EjectionConfig) UnmarshalJSON(b []byte) error {
	type plain EjectionConfig
	v := plain(DefaultEjection())
	if err := strictjson.Decode(b, &v); err != nil {
		return fmt.Errorf("ejection: %w", err)
	}
	*c = EjectionConfig(v)
	return nil
}

// Validate rejects out-of-range values; policy prefixes the message.
func (c *EjectionConfig) Validate(policy string) error {
	if !c.Enabled {
		return nil
	}
	// An excess of 0 would eject for any failure at all: the step the
	// evidence rule exists to avoid.
	if !(c.Threshold > 0 && c.Threshold <= 1) {
		return fmt.Errorf("%s: ejection.threshold %v: must be in (0, 1]", policy, c.Threshold)
	}
	if !(c.MinFailures >= 1 && c.MinFailures <= 1000) {
		return fmt.Errorf("%s: ejection.minFailures %v: must be in [1, 1000]", policy, c.MinFailures)
	}
	base, maxT := time.Duration(c.BaseEjectionTime), time.Duration(c.MaxEjectionTime)
	if base < 10*time.Millisecond || base > time.Hour {
		return fmt.Errorf("%s: ejection.baseEjectionTime %q: must be in [10ms, 1h]", policy, c.BaseEjectionTime)
	}
	if maxT < base || maxT > 24*time.Hour {
		return fmt.Errorf("%s: ejection.maxEjectionTime %q: must be in [baseEjectionTime, 24h]", policy, c.MaxEjectionTime)
	}
	if c.MaxEjectionPercent > 100 {
		return fmt.Errorf("%s: ejection.maxEjectionPercent %d: must be in [0, 100]", policy, c.MaxEjectionPercent)
	}
	if pi := time.Duration(c.ProbeInterval); pi < time.Millisecond || pi > time.Minute {
		return fmt.Errorf("%s: ejection.probeInterval %q: must be in [1ms, 1m]", policy, c.ProbeInterval)
	}
	if c.ProbeSuccesses < 1 || c.ProbeSuccesses > 100 {
		return fmt.Errorf("%s: ejection.probeSuccesses %d: must be in [1, 100]", policy, c.ProbeSuccesses)
	}
	return nil
}
