package shadow

import (
	"github.com/pickwise/pickwise/internal/engine"
	estats "google.golang.org/grpc/experimental/stats"
)

// The metrics of pickwise_shadow (pickwise.shadow.*). They carry the
// channel's target and, optionally, the xDS locality, like every pickwise
// metric; they are recorded on sampled picks and canary calls only, so
// that other picks cost nothing.
var (
	predictionsMetric = estats.RegisterInt64Count(engine.RegisterMetricName(estats.MetricDescriptor{
		Name:           "pickwise.shadow.predictions",
		Description:    "Sampled picks on which the candidate was asked where it would send the call, by result: agree (live's endpoint), disagree (another), none (the candidate could not place it).",
		Unit:           "{pick}",
		Labels:         []string{"grpc.target", "pickwise.prediction"},
		OptionalLabels: []string{"grpc.lb.locality"},
	}))
	endpointPicksMetric = estats.RegisterInt64Count(engine.RegisterMetricName(estats.MetricDescriptor{
		Name:           "pickwise.shadow.endpoint_picks",
		Description:    "Compared picks by endpoint: where live sent them (pickwise.role=live) and where the candidate would have (candidate). Their ratio to the predictions agree+disagree is each endpoint's share.",
		Unit:           "{pick}",
		Labels:         []string{"grpc.target", "pickwise.role", "pickwise.endpoint"},
		OptionalLabels: []string{"grpc.lb.locality"},
	}))
	callsMetric = estats.RegisterInt64Count(engine.RegisterMetricName(estats.MetricDescriptor{
		Name:           "pickwise.shadow.calls",
		Description:    "Finished calls the shadow recorded, by arm (live: the sampled live calls; canary: every call the candidate placed) and status code.",
		Unit:           "{call}",
		Labels:         []string{"grpc.target", "pickwise.arm", "grpc.status"},
		OptionalLabels: []string{"grpc.lb.locality"},
	}))
	durationMetric = estats.RegisterFloat64Histo(engine.RegisterMetricName(estats.MetricDescriptor{
		Name:           "pickwise.shadow.call_duration",
		Description:    "Duration of the timed recorded calls (all, unless they come less than about 10 µs apart; then a random one in up to 64), from pick to finish, by arm.",
		Unit:           "s",
		Labels:         []string{"grpc.target", "pickwise.arm"},
		OptionalLabels: []string{"grpc.lb.locality"},
		Bounds:         []float64{0.0001, 0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10},
	}))
)
