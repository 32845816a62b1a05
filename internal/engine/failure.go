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
// pooled rate of every endpoint, refreshed a few times a second):
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
// no endpoint's failures stand beyond chance and nobody is avoided. The cap keeps a probe share of 1/maxMultiplier for an endpoint
// that is avoided but not ejected, so its answers show its recovery.
//
// Both counts also halve every HalfLife of wall time, so old evidence
// fades and the prior takes over again.
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
	// A zero window would make the discount infinite.
	if c.Window < 1 {
		return fmt.Errorf("%s: failurePenalty.window %d: must be >= 1", policy, c.Window)
	}
	// Beyond ten thousand outcomes the counts react too slowly to matter;
	// clamp rather than reject, as gRFC A48 does for choiceCount.
	c.Window = min(c.Window, maxFailureWindow)
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
	return nil
}

// penalty is a validated FailurePenaltyConfig in the form the pick and done
// paths use. A nil *penalty means the penalty is off.
type penalty struct {
	keep     float32 // 1 - 1/Window: what each outcome leaves of the older ones
	maxAvoid float64 // 1 - 1/MaxMultiplier
	// full is the outcome count past which a healthy endpoint's successes
	// are no longer written: its counts are as good as saturated, and a
	// success then costs Done nothing but a load.
	full float32
	// The health timer runs every tick while some endpoint has failures or
	// is ejected, and multiplies every endpoint's counts by decay.
	tick  time.Duration
	decay float32
}

// maxHealthTick bounds the health timer's period: fleet rate, decay and
// ejection decisions are at most this stale.
const maxHealthTick = 250 * time.Millisecond

func newPenalty(c FailurePenaltyConfig) *penalty {
	if !c.Enabled {
		return nil
	}
	tick := min(maxHealthTick, time.Duration(c.HalfLife)/2)
	return &penalty{
		keep:     1 - 1/float32(c.Window),
		maxAvoid: 1 - 1/c.MaxMultiplier,
		full:     0.95 * float32(c.Window),
		tick:     tick,
		decay:    float32(math.Exp2(-float64(tick) / float64(time.Duration(c.HalfLife)))),
	}
}

// priorOutcomes is the weight, in outcomes, of the prior belief that an
// endpoint fails at the fleet's rate. With two, one failure on an
// endpoint without other evidence reads as a rate of one in three, not
// one in one; a black hole's counts, all failures, read as 0.83.
const priorOutcomes = 2

// avoidance is the probability that a candidate with counts o is passed
// over, given the fleet's failure rate (see FailurePenaltyConfig).
func (p *penalty) avoidance(o outcomes, fleet float64) float64 {
	x := excess(o, fleet)
	if x == 0 {
		return 0
	}
	// Significance: 0 within one standard deviation of what the fleet's
	// rate predicts for as many outcomes, 1 beyond three. When every
	// endpoint fails alike, each one's counts wander around the fleet's
	// rate, and without it the wandering alone would push traffic about;
	// against a healthy fleet (rate 0) any failure is beyond chance, and
	// the prior alone keeps a lone one small.
	if z, finite := zScore(o, fleet); finite {
		x *= max(0, min(1, (z-1)/2))
	}
	s := 1 - x
	return min(1-s*s, p.maxAvoid)
}

// excess is o's failure rate above rate, in [0, 1], with the prior of
// priorOutcomes outcomes at that rate.
func excess(o outcomes, rate float64) float64 {
	if o.failures == 0 || rate >= 1 {
		return 0
	}
	own := (float64(o.failures) + priorOutcomes*rate) / (float64(o.total) + priorOutcomes)
	return max(0, min((own-rate)/(1-rate), 1))
}

// zScore is how many standard deviations o's failures stand above what
// rate predicts for as many outcomes. With rate 0 (or no outcomes) any
// failure is beyond chance: finite is false.
func zScore(o outcomes, rate float64) (z float64, finite bool) {
	v := float64(o.total) * rate * (1 - rate)
	if v <= 0 {
		return 0, false
	}
	return (float64(o.failures) - float64(o.total)*rate) / math.Sqrt(v), true
}

// outcomes are an endpoint's decayed counts of server-side failures and of
// all outcomes. They share one 64-bit word, two float32s, so that Done
// updates both with one compare-and-swap and a pick reads both with one
// load.
type outcomes struct {
	failures, total float32
}

func (o outcomes) pack() uint64 {
	return uint64(math.Float32bits(o.failures))<<32 | uint64(math.Float32bits(o.total))
}

func unpackOutcomes(v uint64) outcomes {
	return outcomes{failures: math.Float32frombits(uint32(v >> 32)), total: math.Float32frombits(uint32(v))}
}

// minTrackedFailures is where the failure count snaps to zero, so a
// recovered endpoint returns to the penalty-free fast path instead of
// carrying a vanishing remainder forever: about 28 successes after one
// failure with the default window.
const minTrackedFailures = 0.05

// healthy is the counts of an endpoint whose recent outcomes are all
// successes and as many as the window holds: a success changes nothing,
// so Done compares one word with healthyBits and writes nothing. Its
// total stands for the penalty's full count (counted).
var (
	healthy     = outcomes{failures: 0, total: float32(math.Inf(1))}
	healthyBits = healthy.pack()
)

// counted is o with healthy's stand-in total replaced by the count it
// stands for.
func (o outcomes) counted(p *penalty) outcomes {
	if math.IsInf(float64(o.total), 1) {
		o.total = p.full
	}
	return o
}

// step folds one outcome into o.
func (o outcomes) step(failed bool, keep float32) outcomes {
	o.failures *= keep
	o.total = o.total*keep + 1
	if failed {
		o.failures++
	}
	if o.failures < minTrackedFailures {
		o.failures = 0
	}
	return o
}

// scaled is o with both counts multiplied by f.
func (o outcomes) scaled(f float32) outcomes {
	o.failures *= f
	o.total *= f
	if o.failures < minTrackedFailures {
		o.failures = 0
	}
	return o
}
