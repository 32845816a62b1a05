package lbconfig

import (
	"fmt"
	"strings"
	"time"

	"github.com/pickwise/pickwise/internal/strictjson"
	"github.com/pickwise/pickwise/internal/warn"
)

// FailurePenaltyConfig is the JSON "failurePenalty" object: how a policy
// weighs the server-side failures it sees. A backend that fails fast
// finishes its calls sooner than its healthy peers, so every load signal
// built on in-flight counts or latency sees it as the least loaded backend
// and sends it more traffic: a black hole. The opposite mistake is as
// costly: one failed call on a healthy backend is no proof that it is
// broken, and an endpoint that gets no calls can never show that it
// recovered.
//
// So failures move traffic in proportion to the evidence. Each endpoint
// keeps two decayed counts over roughly its last Window outcomes: F, its
// server-side failures, and T, all its outcomes. Its failure rate is
// judged with a prior of two outcomes at the fleet's own rate R (the
// pooled rate of every READY endpoint not ejected, itself included,
// refreshed a few times a second):
//
//	rate   = (F + 2R) / (T + 2)
//	z      = (F - T*R) / sqrt(T * R * (1 - R))
//	excess = max(0, rate - R) / (1 - R) * clamp((z - 1) / 2, 0, 1)
//	avoid  = min(1 - 1/maxMultiplier, 1 - (1 - excess)^2)
//
// (z is how far the failures stand beyond chance at the fleet's rate; with
// R = 0 any failure is beyond it and the factor is 1.)
//
// A candidate is passed over with probability avoid: a d-choice picker
// compares only the candidates that pass (all of them, by cost divided
// by 1-avoid, if none does), a weighted schedule scales the weight by
// 1-avoid. One failure among ten successes makes avoid at most 0.17, so
// the endpoint keeps most of its share even when every candidate is idle;
// ten failures in a row make it about 0.8 and a persistent black hole
// 0.97; and when every endpoint fails alike (a shared dependency is down)
// no endpoint's failures stand beyond chance and nobody is avoided. The
// cap keeps a probe share of 1/maxMultiplier for an endpoint that is
// avoided but not ejected, so its answers show its recovery.
//
// Both counts also halve every HalfLife of wall time, so old evidence
// fades and the prior takes over again.
//
// Codes says which outcomes are failures; an endpoint is judged against
// the fleet's own rate, so a listed code every endpoint returns alike (a
// credential bad everywhere) moves no traffic.
type FailurePenaltyConfig struct {
	// Enabled turns the penalty on. Default true.
	Enabled bool `json:"enabled"`
	// Window is the number of recent outcomes the counts mostly reflect
	// (each outcome discounts the older ones by 1-1/Window). Default 10;
	// must be >= 1; values above 10000 are clamped to 10000.
	Window uint32 `json:"window"`
	// MaxMultiplier bounds avoidance: a failing endpoint keeps at least
	// 1/MaxMultiplier of the picks it would otherwise win. Default 100;
	// must be in [1, 1e6].
	MaxMultiplier float64 `json:"maxMultiplier"`
	// HalfLife is how fast evidence fades with time. Default "5s"; must be
	// in [100ms, 1h].
	HalfLife Duration `json:"halfLife"`
	// Codes are the gRPC status codes that count as failures, by the names
	// grpc's service config uses ("PERMISSION_DENIED"), for ejection too.
	// Default "UNAVAILABLE", "INTERNAL", "UNKNOWN", "DEADLINE_EXCEEDED",
	// "RESOURCE_EXHAUSTED", which nil also means; "OK" and an empty list
	// are rejected (to count nothing, turn the penalty off). List a code a
	// broken host answers with (a bad deploy's "UNIMPLEMENTED"), not one a
	// caller causes: see the ringhash package doc.
	Codes []string `json:"codes,omitempty"`
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
		Codes:         defaultFailureCodes(),
	}
}

// defaultFailureCodes is a new copy of Codes' default.
func defaultFailureCodes() []string {
	return []string{"UNAVAILABLE", "INTERNAL", "UNKNOWN", "DEADLINE_EXCEEDED", "RESOURCE_EXHAUSTED"}
}

// statusCodeNames are the gRPC status codes by number, as grpc's service
// config spells them (google.golang.org/grpc/codes, Code.UnmarshalJSON).
var statusCodeNames = [...]string{
	"OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED",
	"NOT_FOUND", "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED",
	"FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED",
	"INTERNAL", "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED",
}

// validateCode checks one name of FailurePenaltyConfig.Codes, the i-th.
func validateCode(policy string, i int, name string) error {
	for c, n := range statusCodeNames {
		if name == n {
			// A success counted as a failure would make every healthy
			// endpoint look broken.
			if c == 0 {
				return fmt.Errorf("%s: failurePenalty.codes[%d] %q: a success is not a failure", policy, i, name)
			}
			return nil
		}
	}
	// grpc's own spelling is exact; a Go name ("PermissionDenied") or
	// another case is a near miss worth naming.
	flat := strings.ReplaceAll(name, "_", "")
	for _, n := range statusCodeNames {
		if strings.EqualFold(flat, strings.ReplaceAll(n, "_", "")) {
			return fmt.Errorf("%s: failurePenalty.codes[%d] %q: not a gRPC status code; did you mean %q", policy, i, name, n)
		}
	}
	return fmt.Errorf("%s: failurePenalty.codes[%d] %q: not a gRPC status code", policy, i, name)
}

// UnmarshalJSON fills the defaults before reading the fields a user set.
func (c *FailurePenaltyConfig) UnmarshalJSON(b []byte) error {
	type plain FailurePenaltyConfig
	v := plain(DefaultFailurePenalty())
	if err := strictjson.Decode(b, &v); err != nil {
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
	// A zero window would make the discount infinite.
	if c.Window < 1 {
		return fmt.Errorf("%s: failurePenalty.window %d: must be >= 1", policy, c.Window)
	}
	// Beyond ten thousand outcomes the counts react too slowly to matter;
	// clamp rather than reject, as gRFC A48 does for choiceCount.
	if c.Window > maxFailureWindow {
		warn.Clamped(policy, "failurePenalty.window", c.Window, maxFailureWindow)
		c.Window = maxFailureWindow
	}
	// Below 1 the cap would be a negative avoidance; above 1e6 the probe
	// share is too small to ever see a recovery.
	if !(c.MaxMultiplier >= 1) || c.MaxMultiplier > 1e6 {
		return fmt.Errorf("%s: failurePenalty.maxMultiplier %v: must be in [1, 1e6]", policy, c.MaxMultiplier)
	}
	// Below 100ms the decay would tick faster than failures can be
	// observed; beyond an hour a recovered backend would stay shunned.
	if time.Duration(c.HalfLife) < minFailureHalfLife || time.Duration(c.HalfLife) > maxFailureHalfLife {
		return fmt.Errorf("%s: failurePenalty.halfLife %q: must be in [%v, %v]", policy, c.HalfLife, minFailureHalfLife, maxFailureHalfLife)
	}
	// A config built in Go before the field existed leaves it nil.
	if c.Codes == nil {
		c.Codes = defaultFailureCodes()
	}
	// A penalty with nothing to count would be on in name only, and a
	// config that says "codes": [] more likely lost its list than meant
	// that; off is said with enabled.
	if len(c.Codes) == 0 {
		return fmt.Errorf(`%s: failurePenalty.codes: must list at least one code (to count none, set "enabled": false)`, policy)
	}
	for i, name := range c.Codes {
		if err := validateCode(policy, i, name); err != nil {
			return err
		}
	}
	return nil
}
