package orcaweight

import (
	"math"
	"slices"
	"sync/atomic"
	"time"
)

// Config is how load reports become weights. The field names follow the
// weighted_round_robin policy of gRFC A58, whose defaults a policy's
// ParseConfig is expected to fill in (BlackoutPeriod 10s,
// WeightExpirationPeriod 3m, ErrorUtilizationPenalty 1). The zero Config
// means: usable at once, never stale, errors ignored, no smoothing, and
// utilization from application_utilization or cpu_utilization.
type Config struct {
	// BlackoutPeriod is how long an endpoint must have been reporting
	// before its weight is used, so that a burst of optimistic first
	// reports from a fresh backend does not attract a flood. It applies
	// again after a weight went stale or the tracker was reset. 0 means no
	// blackout.
	BlackoutPeriod time.Duration
	// WeightExpirationPeriod is how long a weight stays usable without a
	// new report. Once it has gone stale, reports that resume start a new
	// blackout and new averages. 0 means weights never expire (unlike
	// grpc-go, where 0 expires every weight at once; A58's default is 3m).
	WeightExpirationPeriod time.Duration
	// ErrorUtilizationPenalty scales the error rate eps/qps into extra
	// utilization, so a backend that answers fast with errors does not
	// look cheap. Must be >= 0 (A58's default is 1); a negative or
	// non-finite value is taken as 0.
	ErrorUtilizationPenalty float64
	// HalfLife is the half-life of the exponentially weighted averages of
	// qps and cost. 0 means no smoothing: each update's mean report is the
	// weight, as in grpc-go's weighted_round_robin.
	HalfLife time.Duration
	// UtilizationMetrics names entries of the report's utilization map
	// (orca.ServerMetricsRecorder.SetNamedUtilization on the backend). When
	// any of them is present, the largest present value is the report's
	// utilization, ahead of application_utilization and cpu_utilization.
	UtilizationMetrics []string
}

// settings is a sanitized private copy of a Config. It is never modified
// after creation, so Trackers read it through one atomic pointer load.
type settings struct {
	cfg Config // sanitized; cfg.UtilizationMetrics is owned by settings
}

func newSettings(cfg Config) *settings {
	cfg.BlackoutPeriod = max(cfg.BlackoutPeriod, 0)
	cfg.WeightExpirationPeriod = max(cfg.WeightExpirationPeriod, 0)
	cfg.HalfLife = max(cfg.HalfLife, 0)
	// A non-finite penalty would turn an error-free report's cost into NaN
	// (0 * Inf); the policy's ParseConfig rejects it, here we only make
	// sure a weight can never be NaN.
	if !(cfg.ErrorUtilizationPenalty >= 0 && cfg.ErrorUtilizationPenalty <= math.MaxFloat64) {
		cfg.ErrorUtilizationPenalty = 0
	}
	cfg.UtilizationMetrics = slices.Clone(cfg.UtilizationMetrics)
	return &settings{cfg: cfg}
}

// Group is the balancer-wide half of the ORCA machinery: the Config all
// of its Trackers follow, swapped atomically, and the count of rejected
// reports. All methods are safe for concurrent use.
type Group struct {
	// atomic; read by every Record, replaced by SetConfig.
	settings atomic.Pointer[settings]
	// Keeps bad off the cache line of settings: a backend that sends only
	// bad reports must not slow down the Records of the others.
	_ [cacheLine]byte
	// atomic; incremented once per rejected report.
	bad atomic.Uint64
}

// cacheLine is a generous cache-line size (64 bytes on amd64 and most arm64
// cores), used to keep independently written atomics apart.
const cacheLine = 64

// NewGroup returns a Group following cfg.
func NewGroup(cfg Config) *Group {
	g := new(Group)
	g.settings.Store(newSettings(cfg))
	return g
}

// SetConfig makes every Tracker of g follow cfg from its next Record or
// Update on. It may be called concurrently with Record and Update. A
// changed penalty or half-life applies to new periods only: the averages
// already accumulated are kept.
func (g *Group) SetConfig(cfg Config) {
	g.settings.Store(newSettings(cfg))
}

// Config returns the Config in effect, with out-of-range values replaced
// as documented on Config.
func (g *Group) Config() Config {
	cfg := g.settings.Load().cfg
	cfg.UtilizationMetrics = slices.Clone(cfg.UtilizationMetrics)
	return cfg
}

// BadReports returns how many reports g's Trackers have rejected since g
// was created. Callers that export it as a counter take differences.
func (g *Group) BadReports() uint64 {
	return g.bad.Load()
}

// NewTracker returns the state for one endpoint, following g's Config and
// counting its bad reports on g.
func (g *Group) NewTracker() *Tracker {
	t := &Tracker{g: g}
	t.done = t.onDone
	return t
}
