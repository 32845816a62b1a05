package engine

import (
	"math"
	"strconv"
	"time"

	"github.com/pickwise/pickwise/internal/evidence"
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
	return reached(info) && p.counts(info.Err)
}

// reached reports whether a finished attempt reached its server. grpc
// reports an attempt whose stream it had created as sent (BytesSent), and
// a stream a draining server refused unprocessed is one: it was above the
// last stream the server's GOAWAY let through, as a server that drains
// with a single GOAWAY (net/http's HTTP/2 server, under grpc's ServeHTTP)
// refuses the streams in transit. grpc retries such a stream at once,
// elsewhere, and tells the balancer only its status (drainRefused).
func reached(info balancer.DoneInfo) bool {
	switch {
	case info.BytesReceived:
		return true
	case !info.BytesSent:
		return false
	}
	return info.Err == nil || !drainRefused(info.Err)
}

// drainingMessage is the message grpc-go's transport ends a stream a
// draining server refused with (internal/transport's errStreamDrain, the
// same from v1.82 to v1.85).
const drainingMessage = "the connection is draining"

// drainRefused reports whether err ends a stream a draining server
// refused; the same GOAWAY takes the endpoint's connection out of the
// picker. A stream reset with REFUSED_STREAM, which grpc also retries,
// stays evidence: its connection stays READY, and a server that refuses
// every stream must be seen by its calls.
func drainRefused(err error) bool {
	s, ok := status.FromError(err)
	return ok && s.Code() == codes.Unavailable && s.Message() == drainingMessage
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

// avoidance is the probability that a candidate with counts o is passed
// over, given the fleet's failure rate (see FailurePenaltyConfig).
func (p *penalty) avoidance(o evidence.Counts, fleet float64) float64 {
	return evidence.Avoidance(o, fleet, p.maxAvoid)
}
