package sim

import (
	"math"
	"math/rand/v2"
	"time"

	"github.com/pickwise/pickwise/internal/loadest"
	"google.golang.org/grpc/codes"
)

// Backend describes one modelled server.
type Backend struct {
	// Servers is how many requests it serves at once; more wait in a FIFO
	// queue. 0 means unlimited (latency does not depend on load).
	Servers int
	// Service is the service-time distribution of a successful request.
	Service Dist
	// FailRate is the share of requests that fail; they fail after
	// FailAfter with FailCode, without queueing (a black hole answers
	// before doing any work).
	FailRate  float64
	FailAfter time.Duration
	FailCode  codes.Code
	// Failing makes a share Factor of the requests admitted while
	// From <= t < To fail as FailRate's do: an outage, or a flapping node.
	Failing []Window
	// FailOnce fails the first request admitted at or after each instant:
	// a transient blip, exactly one failure.
	FailOnce []time.Duration
	// Slow multiplies the service time by Factor while From <= t < To.
	Slow []Window
	// Pauses add Extra to the service time of the first request that
	// starts at or after each At, in the order of their At: a one-off
	// stall (a collection pause, a process descheduled, on either side of
	// the call) that says nothing about the backend's speed.
	Pauses []Pause
	// ColdFor and ColdFactor model a process warming up: a request that
	// starts at age a after the backend joined takes
	// 1 + (ColdFactor-1)*(1-a/ColdFor) times longer, for a < ColdFor.
	ColdFor    time.Duration
	ColdFactor float64
	// Weight is the endpoint weight an xDS control plane would publish
	// (0 means none).
	Weight uint32
	// Cores is the denominator of the backend's ORCA cpu_utilization: how
	// many requests in progress make it fully busy (see report.go). 0
	// means Servers; a backend with neither reports no load.
	Cores int
	// ReportNoise makes the reported utilization noisy: each report's is
	// multiplied by 1 + U(-ReportNoise, ReportNoise), drawn from the run's
	// seed, as a gauge sampled at an unlucky instant or disturbed by a
	// neighbour would read. The backend's true load does not change.
	ReportNoise float64
}

// Window is a period of virtual time.
type Window struct {
	From, To time.Duration
	Factor   float64
}

// Pause is one stall of one request (Backend.Pauses).
type Pause struct {
	At, Extra time.Duration
}

// Dist is a service-time distribution.
type Dist struct {
	// Median of a lognormal distribution; with Sigma 0, a constant.
	Median time.Duration
	Sigma  float64
}

// Sample draws one service time.
func (d Dist) Sample(r *rand.Rand) time.Duration {
	if d.Sigma == 0 {
		return d.Median
	}
	return time.Duration(float64(d.Median) * math.Exp(d.Sigma*r.NormFloat64()))
}

// Mean is the distribution's mean: a lognormal's is its median times
// e^(sigma^2/2).
func (d Dist) Mean() time.Duration {
	return time.Duration(float64(d.Median) * math.Exp(d.Sigma*d.Sigma/2))
}

// Const is a fixed service time.
func Const(d time.Duration) Dist { return Dist{Median: d} }

// LogNormal is a lognormal service time with the given median and sigma.
func LogNormal(median time.Duration, sigma float64) Dist { return Dist{Median: median, Sigma: sigma} }

// server is a Backend's runtime state.
type server struct {
	spec     Backend
	id       int
	joinedAt time.Duration
	busy     int
	streams  int
	queue    []*call
	// waiting counts the calls in queue whose client still waits for
	// them: the server skips the others when it reaches them.
	waiting int
	// Accounting.
	served    int           // requests that reached the backend
	failed    int           // of which failed
	blips     int           // FailOnce instants used up
	pauses    int           // Pauses used up
	busyTime  time.Duration // integral of busy servers over time
	lastBusy  time.Duration
	maxQueued int
	// At the end of the warm-up (Run.Warmup): busyTime and served then.
	warmBusy   time.Duration
	warmServed int
	// load is the backend's ORCA reporting; est its serverload figures
	// (probes.go).
	load *loadGauge
	est  serverload
}

// call is one request in flight.
type call struct {
	req      *Request
	srv      *server
	started  time.Duration // client-side start
	deadline *event
	finished bool
	queued   bool
	done     finishFunc
	// tok is the call's count in its backend's serverload figures, from
	// when the backend admitted it, at admitted.
	tok      loadest.Token
	admitted time.Duration
}

// fails reports whether a request admitted now fails (FailRate, Failing,
// FailOnce).
func (s *server) fails(now time.Duration, r *rand.Rand) bool {
	if s.blips < len(s.spec.FailOnce) && now >= s.spec.FailOnce[s.blips] {
		s.blips++
		return true
	}
	rate := s.spec.FailRate
	for _, w := range s.spec.Failing {
		if now >= w.From && now < w.To {
			rate = max(rate, w.Factor)
		}
	}
	return rate > 0 && r.Float64() < rate
}

// capacity is the requests per second the backend sustains at its median
// service time (0 when unlimited).
func (s *server) capacity() float64 {
	if s.spec.Servers == 0 || s.spec.Service.Median == 0 {
		return 0
	}
	return float64(s.spec.Servers) / s.spec.Service.Median.Seconds()
}

// accountBusy integrates busy servers up to now, for utilization.
func (s *server) accountBusy(now time.Duration) {
	s.busyTime += time.Duration(s.busy) * (now - s.lastBusy)
	s.lastBusy = now
}

// serviceTime is how long a request starting now takes.
func (s *server) serviceTime(now time.Duration, r *rand.Rand) time.Duration {
	d := float64(s.spec.Service.Sample(r))
	for _, w := range s.spec.Slow {
		if now >= w.From && now < w.To {
			d *= w.Factor
		}
	}
	if s.spec.ColdFor > 0 && s.spec.ColdFactor > 1 {
		if age := now - s.joinedAt; age < s.spec.ColdFor {
			d *= 1 + (s.spec.ColdFactor-1)*(1-float64(age)/float64(s.spec.ColdFor))
		}
	}
	if s.pauses < len(s.spec.Pauses) && now >= s.spec.Pauses[s.pauses].At {
		d += float64(s.spec.Pauses[s.pauses].Extra)
		s.pauses++
	}
	return time.Duration(d)
}

// slowdown is the factor by which a request starting now takes longer
// than its Service draw: the Slow windows and the cold start in force,
// before any one-off pause. serviceTime applies the same factors.
func (s *server) slowdown(now time.Duration) float64 {
	f := 1.0
	for _, w := range s.spec.Slow {
		if now >= w.From && now < w.To {
			f *= w.Factor
		}
	}
	if s.spec.ColdFor > 0 && s.spec.ColdFactor > 1 {
		if age := now - s.joinedAt; age < s.spec.ColdFor {
			f *= 1 + (s.spec.ColdFactor-1)*(1-float64(age)/float64(s.spec.ColdFor))
		}
	}
	return f
}

// utilization is the busy share of the backend's servers from from (the
// end of the warm-up, when busyTime was warmBusy) until now.
func (s *server) utilization(from, now time.Duration) float64 {
	if s.spec.Servers == 0 || now <= from {
		return 0
	}
	s.accountBusy(now)
	return float64(s.busyTime-s.warmBusy) / float64(now-from) / float64(s.spec.Servers)
}
