package engine

import (
	"encoding/json"
	"time"

	"github.com/pickwise/pickwise/orcaweight"
	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/serviceconfig"
)

// Policy is what a load-balancing policy supplies to the engine. The engine
// calls both methods with its own lock held, never concurrently, so a
// policy may keep the config it was last given in plain fields.
type Policy interface {
	// Configure applies a config produced by the Spec's ParseConfig and
	// returns the engine-level settings in it.
	Configure(cfg serviceconfig.LoadBalancingConfig) (Settings, error)
	// NewPicker builds an immutable picker over the READY endpoints in snap.
	NewPicker(snap *Snapshot) balancer.Picker
}

// Settings are the parts of a policy's config that the engine applies.
type Settings struct {
	// SlowStart turns slow start on when not nil and enabled. It must be
	// validated.
	SlowStart *SlowStartConfig
	// FailurePenalty configures the failure penalty. It must be validated.
	FailurePenalty FailurePenaltyConfig
	// Ejection configures local ejection. It must be validated; it has no
	// effect with the failure penalty off.
	Ejection EjectionConfig
	// Latency, when not nil, makes the engine time calls (every call, or on
	// a busy endpoint one call per DecayTime/65536, longer over a large
	// fleet: latency.sampleGap) and keep the per-endpoint latency average
	// that Endpoint.PeakLoad reads.
	Latency *LatencyConfig
	// Weights, when not nil, makes the engine keep backend-reported
	// weights (Snapshot.Weights). It must be validated.
	Weights *WeightsConfig
	// LoadProbing, when not nil, makes the engine probe its endpoints'
	// load and keep the answers for Prequal pickers. It must be validated.
	LoadProbing *LoadProbingConfig
	// RemovalGrace is how long the READY connection of an endpoint the
	// resolver removed is kept, in case the endpoint returns on it
	// (parked.go); 0 closes it at once. Lazy policies never park.
	RemovalGrace time.Duration
}

// Spec describes one policy: its registry name, its config parser and a
// constructor for its per-balancer Policy.
type Spec struct {
	Name        string
	ParseConfig func(json.RawMessage) (serviceconfig.LoadBalancingConfig, error)
	NewPolicy   func() Policy
	// Lazy makes the policy an affinity policy in the manner of gRFC A61:
	// endpoints connect only when a pick asks for them (grpc's
	// balancer/lazy over each endpoint's pickfirst, with no automatic
	// reconnection), the balancer's ExitIdle wakes nobody, and every
	// Snapshot lists all endpoints in Snapshot.Members, whatever their
	// state, so that a picker can route a key to an IDLE endpoint and make
	// it connect. The balancer's connectMode is then onDemand (lazy.go).
	Lazy bool
	// Metrics are the policy's metrics (RegisterMetrics); nil records
	// none.
	Metrics *Metrics
	// ParentLoad makes the engine count the calls a parent places on its
	// endpoints in their in-flight counts, when the parent offers them
	// (EndpointFeed.Load): for pickers that compare endpoints' in-flight
	// counts with each other, which then weigh the parent's load beside
	// their own. Off for a picker that bounds an endpoint's count by its
	// own total (ring hash's bounded load), which calls it did not place
	// would throw off.
	ParentLoad bool
}

// Options inject the engine's dependencies. The zero value means the wall
// clock and the runtime's random source.
type Options struct {
	Clock Clock
	Rand  Rand
	// LoadProber sends pickwise_prequal's load probes; nil: over each
	// endpoint's connection, with grpc's producer API.
	LoadProber LoadProber
}

// WeightsConfig makes the engine keep a backend-reported (ORCA) weight per
// endpoint and hand the weights to pickers (Snapshot.Weights). It must be
// validated by the policy's ParseConfig.
type WeightsConfig struct {
	// ORCA is how reports become weights (orcaweight.Config).
	ORCA orcaweight.Config
	// OutOfBand takes reports from an ORCA stream per connection, every
	// OOBPeriod, instead of from each call's trailer. With it on, calls
	// carry no report hook, as in gRFC A58.
	OutOfBand bool
	OOBPeriod time.Duration
	// UpdatePeriod is how often reports are folded into weights and a new
	// picker published.
	UpdatePeriod time.Duration
}
