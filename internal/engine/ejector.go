package engine

import (
	"sync/atomic"

	"github.com/pickwise/pickwise/lbconfig"
)

// This file is the ejection settings a snapshot carries and the
// per-endpoint ejection and probe state, which picks and Dones read and
// write without the balancer's lock. probe.go picks probes; ejection.go is
// the balancer's side.

// EjectionConfig is lbconfig.EjectionConfig, under the name the engine's
// code uses.
type EjectionConfig = lbconfig.EjectionConfig

// DefaultEjection returns the ejection a policy uses when its config has
// no "ejection" object.
func DefaultEjection() EjectionConfig { return lbconfig.DefaultEjection() }

// ejector is a validated EjectionConfig in nanoseconds. A nil *ejector
// means ejection is off.
type ejector struct {
	threshold, minFailures float64
	base, max              int64
	percent                int
	probeEvery             int64
	probeSuccesses         int32
}

func newEjector(c EjectionConfig, pen *penalty) *ejector {
	if !c.Enabled || pen == nil {
		return nil
	}
	return &ejector{
		threshold:      c.Threshold,
		minFailures:    c.MinFailures,
		base:           int64(c.BaseEjectionTime),
		max:            int64(c.MaxEjectionTime),
		percent:        int(c.MaxEjectionPercent),
		probeEvery:     int64(c.ProbeInterval),
		probeSuccesses: int32(c.ProbeSuccesses),
	}
}

// ejectionState is an endpoint's ejection bookkeeping; guarded by the
// balancer's mu.
type ejectionState struct {
	ejected bool
	since   int64 // Clock.Nanotime of the ejection
	until   int64 // Clock.Nanotime before which it is not readmitted
	streak  int   // the ejection count: +1 per ejection, -1 per forgiveAfter of time in since the last readmission
	lastEnd int64 // Clock.Nanotime of the last readmission; 0 if never
}

// probeState is what the pick and done paths of probes share; atomic.
type probeState struct {
	next     atomic.Int64 // Clock.Nanotime from which the next probe may go
	every    atomic.Int64 // the current interval: ProbeInterval, doubled by each failed probe up to maxProbeBackoff times
	inFlight atomic.Bool  // one probe at a time
	okRun    atomic.Int32 // probes in a row that succeeded since the ejection
}

// maxProbeBackoff caps how far failed probes stretch the probe interval:
// a black hole that stays broken draws a probe every 3 intervals (0.9 s at
// the default), and a healed one is seen within that time.
const maxProbeBackoff = 3
