package shadow

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Summary is what a pickwise_shadow balancer has recorded since its
// children last changed: how often the candidate agreed with live on the
// sampled picks, where each would have sent them, and the outcomes of
// each arm's calls. A Summary also holds, unexported, whose counts it
// reads, for Since.
type Summary struct {
	// Target is the channel's canonical target, as
	// grpc.ClientConn.CanonicalTarget gives it (dns:///host:port for a
	// channel created with host:port).
	Target string
	// Live and Candidate are the children's policy names.
	Live, Candidate string
	// SampleRate and CanaryPercent are the config's.
	SampleRate, CanaryPercent float64

	// Compared is how many sampled picks both children answered with an
	// endpoint; Agreed, how many of them they answered with the same one.
	Compared, Agreed int64
	// NoPrediction is how many sampled picks the candidate could not
	// place (no READY endpoint yet, or an error of its own).
	NoPrediction int64
	// Endpoints are the compared picks by endpoint, sorted by address:
	// where live sent them and where the candidate would have. They are
	// the endpoints still connected; Compared and Agreed also count the
	// picks of endpoints since removed, so after a removal the shares of
	// the endpoints listed add up to less than one.
	Endpoints []EndpointPicks

	// LiveArm and CanaryArm are the outcomes of the calls each arm placed
	// and the shadow recorded: every canary call, and the sampled live
	// ones.
	LiveArm, CanaryArm ArmStats
	// CanaryFallbacks is how many canary calls the candidate could not
	// place, which live placed instead.
	CanaryFallbacks int64

	origin countsOrigin // whose counts these are, for Since
}

// countsOrigin names a balancer's counts since its children last changed:
// the balancer, by a number of its own, and how many times its counts
// started over.
type countsOrigin struct{ recorder, resets uint64 }

// recorderSeq numbers the recorders of the process.
var recorderSeq atomic.Uint64

// Agreement is the share of compared picks on which the candidate chose
// live's endpoint, 0 before any. For two policies that route by key (ring
// hash, Maglev), 1 - Agreement is the share of keyed traffic that a switch
// would send to another endpoint.
func (s Summary) Agreement() float64 {
	if s.Compared == 0 {
		return 0
	}
	return float64(s.Agreed) / float64(s.Compared)
}

// Since returns what s recorded after earlier, an earlier Summary of the
// same balancer: its counts less earlier's, endpoint by endpoint, so that
// a rollout tool reads each stage alone (the shadow step's shares without
// the canary's, the canary's arms without the shadow step's live calls).
// Names and rates are s's. An endpoint that earlier does not list, or
// whose connection was closed and made anew in between, counts from
// zero, from its new connection. If the children changed in between,
// which starts the counts over, or earlier is another balancer's, or a
// zero Summary, s is returned as it is. earlier must be the earlier of
// the two: the other way round, the counts come out negative.
func (s Summary) Since(earlier Summary) Summary {
	if s.origin != earlier.origin {
		return s
	}
	d := s
	d.Compared -= earlier.Compared
	d.Agreed -= earlier.Agreed
	d.NoPrediction -= earlier.NoPrediction
	d.CanaryFallbacks -= earlier.CanaryFallbacks
	d.LiveArm = s.LiveArm.since(earlier.LiveArm)
	d.CanaryArm = s.CanaryArm.since(earlier.CanaryArm)
	before := make(map[uint64]EndpointPicks, len(earlier.Endpoints))
	for _, e := range earlier.Endpoints {
		before[e.conn] = e
	}
	d.Endpoints = make([]EndpointPicks, len(s.Endpoints))
	for i, e := range s.Endpoints {
		b := before[e.conn] // by connection: one made anew counts from zero
		d.Endpoints[i] = EndpointPicks{Addr: e.Addr, Live: e.Live - b.Live, Candidate: e.Candidate - b.Candidate, conn: e.conn}
	}
	return d
}

// EndpointPicks is one endpoint's compared picks. One from a Summary also
// holds, unexported, which of the balancer's connections it counts, for
// Since: compare its fields rather than whole values.
type EndpointPicks struct {
	// Addr is the endpoint's address.
	Addr string
	// Live is how many compared calls live sent it; Candidate, how many
	// the candidate would have.
	Live, Candidate int64

	conn uint64 // which of the balancer's connections, for Since
}

// Shares returns the endpoint's share of the compared picks under live
// and under the candidate, in [0, 1].
func (e EndpointPicks) Shares(s Summary) (live, candidate float64) {
	if s.Compared == 0 {
		return 0, 0
	}
	return float64(e.Live) / float64(s.Compared), float64(e.Candidate) / float64(s.Compared)
}

// ArmStats are the recorded outcomes of one arm's calls.
type ArmStats struct {
	// Calls is how many were placed; Failed, how many of them ended with
	// an error (a call still in flight is in Calls only).
	Calls, Failed int64
	// Timed is how many of the Calls were timed: all of them while
	// recorded calls come more than about 10 µs apart, and a random one in
	// 2, 4, 8, 16, 32 or 64 as they come closer (one in 16 under about
	// 1.25 µs apart, one in 64 under about 300 ns), where reading the
	// clock twice a call would cost more than the rest of the recording.
	Timed int64
	// TotalLatency is the timed calls' summed duration, from pick to
	// finish.
	TotalLatency time.Duration
}

// since is a less b, field by field.
func (a ArmStats) since(b ArmStats) ArmStats {
	return ArmStats{Calls: a.Calls - b.Calls, Failed: a.Failed - b.Failed, Timed: a.Timed - b.Timed, TotalLatency: a.TotalLatency - b.TotalLatency}
}

// ErrorRate is Failed / Calls, 0 before any call. A call still in flight
// counts as one that did not fail: for long streams, read it once they
// have ended, as both arms are counted alike.
func (a ArmStats) ErrorRate() float64 {
	if a.Calls == 0 {
		return 0
	}
	return float64(a.Failed) / float64(a.Calls)
}

// MeanLatency is TotalLatency / Timed, 0 before any timed call.
func (a ArmStats) MeanLatency() time.Duration {
	if a.Timed == 0 {
		return 0
	}
	return a.TotalLatency / time.Duration(a.Timed)
}

// The balancers alive in this process, for Summaries.
var (
	balancersMu sync.Mutex
	balancers   []*shadowBalancer
)

func register(b *shadowBalancer) {
	balancersMu.Lock()
	balancers = append(balancers, b)
	balancersMu.Unlock()
}

func unregister(b *shadowBalancer) {
	balancersMu.Lock()
	if i := slices.Index(balancers, b); i >= 0 {
		balancers = slices.Delete(balancers, i, i+1)
	}
	balancersMu.Unlock()
}

// Summaries returns the summary of every pickwise_shadow balancer in the
// process that has not been closed, in the order they were built. A
// channel has one per pickwise_shadow config in use (one per xDS cluster
// that names it).
func Summaries() []Summary {
	balancersMu.Lock()
	bs := slices.Clone(balancers)
	balancersMu.Unlock()
	out := make([]Summary, 0, len(bs))
	for _, b := range bs {
		out = append(out, b.rec.summary())
	}
	return out
}
