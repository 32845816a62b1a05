package engine

import (
	"math"
	"strconv"
	"time"

	"github.com/pickwise/pickwise/lbconfig"

	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// failureCodes is a set of gRPC status codes, bit c for code c: the
// outcomes that count against the endpoint that served them
// (FailurePenaltyConfig.Codes). A word, not a map, so that a Done
// classifies its call with a shift and no allocation.
type failureCodes uint32

// defaultFailureCodes is FailurePenaltyConfig.Codes' default: the
// outcomes a backend is responsible for whatever the call. A client's bad
// argument, a missing entity or a caller's cancellation say nothing about
// the backend's health, and counting them would let one misbehaving caller
// steer traffic away from healthy backends.
const defaultFailureCodes = failureCodes(1<<codes.Unavailable | 1<<codes.Internal | 1<<codes.Unknown |
	1<<codes.DeadlineExceeded | 1<<codes.ResourceExhausted)

// newFailureCodes is the set c's Codes name, which Validate checked.
func newFailureCodes(c FailurePenaltyConfig) failureCodes {
	var s failureCodes
	for _, name := range c.Codes {
		var code codes.Code
		if code.UnmarshalJSON([]byte(strconv.Quote(name))) == nil && code < 32 {
			s |= 1 << code
		}
	}
	return s
}

// has reports whether err's status code is in s; a plain error that is
// not a status is Unknown to grpc, a transport that failed somehow.
func (s failureCodes) has(err error) bool {
	if err == nil {
		return false
	}
	c := status.Code(err)
	return c < 32 && s>>c&1 != 0
}

// counts reports whether err is a failure by p's codes, or by the default
// ones when the penalty is off (p is nil).
func (p *penalty) counts(err error) bool {
	s := defaultFailureCodes
	if p != nil {
		s = p.codes
	}
	return s.has(err)
}

// serverFailed reports whether a finished call counts against its
// endpoint: a failure by p's codes (see counts) of an attempt that reached
// the server. A stream refused on a draining connection, or a deadline
// spent waiting for one, says nothing about the backend.
func serverFailed(info balancer.DoneInfo, p *penalty) bool {
	return (info.BytesSent || info.BytesReceived) && p.counts(info.Err)
}

// FailurePenaltyConfig is lbconfig.FailurePenaltyConfig, under the name
// the engine's code uses.
type FailurePenaltyConfig = lbconfig.FailurePenaltyConfig

// DefaultFailurePenalty returns the penalty a policy uses when its config
// has no "failurePenalty" object.
func DefaultFailurePenalty() FailurePenaltyConfig { return lbconfig.DefaultFailurePenalty() }

// penalty is a validated FailurePenaltyConfig in the form the pick and done
// paths use. A nil *penalty means the penalty is off.
type penalty struct {
	codes    failureCodes // what counts as a failure
	keep     float32      // 1 - 1/Window: what each outcome leaves of the older ones
	maxAvoid float64      // 1 - 1/MaxMultiplier
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
		codes:    newFailureCodes(c),
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
var healthy = outcomes{failures: 0, total: float32(math.Inf(1))}

// healthyBits is healthy.pack(), a constant so that a Done compares with
// it without a load: no failures above, +Inf's bits below.
const healthyBits = 0x7f800000

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
