package engine

import (
	"fmt"
	"math"
	"time"

	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// IsServerFailure reports whether an RPC's outcome counts against the
// endpoint that served it. Only outcomes the server is responsible for
// count: a client's bad argument, a missing entity or a caller's
// cancellation say nothing about the backend's health, and counting them
// would let one misbehaving caller steer traffic away from healthy
// backends.
func IsServerFailure(err error) bool {
	if err == nil {
		return false
	}
	switch status.Code(err) {
	case codes.Unavailable, codes.Internal, codes.Unknown,
		codes.DeadlineExceeded, codes.ResourceExhausted:
		return true
	}
	return false
}

// serverFailed reports whether a finished call counts against its
// endpoint: a server-side failure of an attempt that reached the server. A
// stream refused on a draining connection, or a deadline spent waiting for
// one, says nothing about the backend.
func serverFailed(info balancer.DoneInfo) bool {
	return (info.BytesSent || info.BytesReceived) && IsServerFailure(info.Err)
}

// FailurePenaltyConfig is the JSON "failurePenalty" object. A backend that
// fails fast finishes its requests sooner than its healthy peers, so every
// load signal built on in-flight counts or latency sees it as the least
// loaded backend and sends it more traffic: a black hole. The
// penalty makes failures expensive instead.
//
// Each endpoint keeps f, an exponentially weighted moving average of its
// server-side failures (1 for a failure, 0 for a success) over roughly the
// last Window outcomes. Its load is multiplied by
//
//	penalty(f) = min(maxMultiplier, 1/(1-f)^2)
//
// 1/(1-f) is the number of attempts one success costs; squaring it makes a
// persistent failure outweigh the in-flight advantage a fast failure buys,
// while a lone failure on a healthy endpoint (f = 0.1 with the default
// window) raises its cost by only 23%. A black hole reaches the maximum
// after about 22 consecutive failures.
//
// A penalized endpoint sees little traffic, so it could not show that it
// recovered if f changed only with outcomes. f therefore also halves every
// HalfLife of wall time. A backend that still fails climbs back to the
// maximum within a few calls; one that recovered wins picks again after a
// half-life or two, however large the fleet. An average below 2% counts as
// zero.
type FailurePenaltyConfig struct {
	// Enabled turns the penalty on. Default true.
	Enabled bool `json:"enabled"`
	// Window is the number of recent outcomes the failure average mostly
	// reflects (its smoothing factor is 1/Window). Default 10; must be
	// >= 1; values above 10000 are clamped to 10000.
	Window uint32 `json:"window"`
	// MaxMultiplier caps the penalty. Default 100; must be in [1, 1e6].
	MaxMultiplier float64 `json:"maxMultiplier"`
	// HalfLife is how fast failures are forgiven with time. Default "5s";
	// must be in [100ms, 1h].
	HalfLife Duration `json:"halfLife"`
}

// Failure-penalty defaults; see FailurePenaltyConfig for the reasoning.
const (
	DefaultFailureWindow        = 10
	DefaultFailureMaxMultiplier = 100.0
	DefaultFailureHalfLife      = 5 * time.Second
	maxFailureWindow            = 10000
	minFailureHalfLife          = 100 * time.Millisecond
	maxFailureHalfLife          = time.Hour
)

// DefaultFailurePenalty returns the penalty a policy uses when its config
// has no "failurePenalty" object.
func DefaultFailurePenalty() FailurePenaltyConfig {
	return FailurePenaltyConfig{
		Enabled:       true,
		Window:        DefaultFailureWindow,
		MaxMultiplier: DefaultFailureMaxMultiplier,
		HalfLife:      Duration(DefaultFailureHalfLife),
	}
}

// UnmarshalJSON fills the defaults before reading the fields a user set.
func (c *FailurePenaltyConfig) UnmarshalJSON(b []byte) error {
	type plain FailurePenaltyConfig
	v := plain(DefaultFailurePenalty())
	if err := DecodeStrict(b, &v); err != nil {
		return fmt.Errorf("failurePenalty: %w", err)
	}
	*c = FailurePenaltyConfig(v)
	return nil
}

// Validate rejects or clamps values; policy prefixes the message.
func (c *FailurePenaltyConfig) Validate(policy string) error {
	if !c.Enabled {
		return nil
	}
	// A zero window would make the smoothing factor infinite.
	if c.Window < 1 {
		return fmt.Errorf("%s: failurePenalty.window %d: must be >= 1", policy, c.Window)
	}
	// Beyond ten thousand outcomes the average reacts too slowly to matter;
	// clamp rather than reject, as gRFC A48 does for choiceCount.
	c.Window = min(c.Window, maxFailureWindow)
	// A multiplier below 1 would make failures attractive: the bug the
	// penalty exists to fix.
	if !(c.MaxMultiplier >= 1) || c.MaxMultiplier > 1e6 {
		return fmt.Errorf("%s: failurePenalty.maxMultiplier %v: must be in [1, 1e6]", policy, c.MaxMultiplier)
	}
	// Below 100ms the decay timer would tick faster than failures can be
	// observed; beyond an hour a recovered backend would stay shunned.
	if time.Duration(c.HalfLife) < minFailureHalfLife || time.Duration(c.HalfLife) > maxFailureHalfLife {
		return fmt.Errorf("%s: failurePenalty.halfLife %q: must be in [%v, %v]", policy, c.HalfLife, minFailureHalfLife, maxFailureHalfLife)
	}
	return nil
}

// penalty is a validated FailurePenaltyConfig in the form the pick and done
// paths use. A nil *penalty means the penalty is off.
type penalty struct {
	alpha   float64 // smoothing factor of the failure EWMA
	maxMult float64
	// The decay timer runs every tick while some endpoint has failures and
	// multiplies each average by decay.
	tick  time.Duration
	decay float64
}

// decayTicksPerHalfLife sets the decay timer's resolution: fine enough
// that forgiveness looks continuous, coarse enough to cost nothing.
const decayTicksPerHalfLife = 5

func newPenalty(c FailurePenaltyConfig) *penalty {
	if !c.Enabled {
		return nil
	}
	return &penalty{
		alpha:   1 / float64(c.Window),
		maxMult: c.MaxMultiplier,
		tick:    time.Duration(c.HalfLife) / decayTicksPerHalfLife,
		decay:   math.Exp2(-1.0 / decayTicksPerHalfLife),
	}
}

// multiplier is penalty(f) from FailurePenaltyConfig's formula.
func (p *penalty) multiplier(f float64) float64 {
	if f <= 0 {
		return 1
	}
	s := 1 - f
	if s*s*p.maxMult <= 1 {
		return p.maxMult
	}
	return 1 / (s * s)
}

// minTrackedFailure is where the failure average snaps to zero, so a
// recovered endpoint returns to the penalty-free fast path instead of
// carrying a vanishing remainder forever. At 2% the penalty is 1.04: below
// it, the remainder would only make the endpoint lose every tie, which at
// low traffic (all counters zero) is nearly every pick.
const minTrackedFailure = 0.02

// ewmaStep is one step of the failure average.
func ewmaStep(f, x, alpha float64) float64 {
	f += alpha * (x - f)
	if f < minTrackedFailure {
		return 0
	}
	return math.Min(f, 1)
}
