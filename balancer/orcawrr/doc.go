// Package orcawrr implements pickwise_orca_wrr: smooth weighted round robin
// over weights that backends report through ORCA (gRFC A51, A58, A64, A78, A114).
//
// Each backend reports its load, per call in a trailer or on an
// out-of-band stream, and each endpoint's weight is
//
//	weight = qps / (utilization + eps/qps * errorUtilizationPenalty)
//
// averaged over reports with a half-life (weightHalfLife), so that noise in
// the reports does not become oscillation in the traffic while a real
// change of capacity is followed within a few half-lives. An endpoint
// without a usable weight gets the median of the usable ones, and no
// weight counts for more than 10 times that median. The weight is also
// scaled by the failure avoidance every pickwise policy computes from the
// server-side failures this client saw, which a backend cannot misreport,
// and a backend whose failures stand far above the fleet's is ejected
// locally until its probes succeed. Picks follow a precomputed smooth
// order: shares are exact over a cycle, no endpoint gets a burst of
// consecutive calls, and a pick allocates nothing. Reports lag a backend
// that slows down by a window or more, so a pick whose endpoint holds
// more of this client's calls in flight than its weight and latency lead
// it to expect goes to a second candidate, drawn by weight, that holds
// fewer: the shares stay the weights' while the counts stay near their
// expectations, and a slowed backend loses calls at once. See package
// github.com/pickwise/pickwise/orcaweight for the weight computation.
//
// The fields gRFC A58 defines for grpc's weighted_round_robin keep their
// names, defaults and meaning, so a config moves from one to the other by
// changing the policy name (pickwise_orca_wrr then also ramps newcomers
// with slow start, which grpc's policy does not):
//
//	import _ "github.com/pickwise/pickwise/balancer/orcawrr"
//
//	{"loadBalancingConfig": [{"pickwise_orca_wrr": {
//	  "enableOobLoadReport": false,
//	  "oobReportingPeriod": "10s",
//	  "blackoutPeriod": "10s",
//	  "weightExpirationPeriod": "3m",
//	  "weightUpdatePeriod": "1s",
//	  "errorUtilizationPenalty": 1.0,
//	  "weightHalfLife": "5s",
//	  "metricNamesForComputingUtilization": [],
//	  "slowStart": {"window": "30s"},
//	  "failurePenalty": {"enabled": true, "window": 10, "maxMultiplier": 100, "halfLife": "5s"},
//	  "ejection": {"enabled": true, "threshold": 0.5, "minFailures": 5, "baseEjectionTime": "1s", "maxEjectionTime": "30s",
//	    "maxEjectionPercent": 10, "probeInterval": "300ms", "probeSuccesses": 2}
//	}}]}
//
// The weight metrics (pickwise.orca_wrr.*: rr_fallback,
// endpoint_weight_not_yet_usable, endpoint_weight_stale, endpoint_weight,
// bad_reports) go through grpc's experimental/stats registry, so grpc's
// OpenTelemetry plugin exports them when they are enabled by name.
//
// Every field with its default and bounds, the schedule, how a grpc-go
// backend reports its load, and the measured behaviour beside grpc-go's
// built-ins:
// https://github.com/pickwise/pickwise/blob/main/docs/policies/orca_wrr.md
package orcawrr
