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
// change of capacity is followed within a few half-lives. Utilization is
// the largest of the named metrics in metricNamesForComputingUtilization,
// else application_utilization, else cpu_utilization. A weight is used
// once its endpoint has reported for blackoutPeriod and dropped when no
// report came for weightExpirationPeriod; an endpoint without a usable
// weight gets the median of the usable ones (not the mean, which one
// outlier would drag), selected after each weight update and held until
// the next while few endpoints come and go, and with fewer than two usable
// weights every endpoint gets the same share. No weight counts for more
// than 10 times that median, so one absurd report (a qps of 1e305) draws
// at most 10/19 of the calls among ten otherwise equal endpoints, not
// nearly all. Bad reports (NaN, infinite or negative values, zero qps,
// zero utilization under load) are ignored and counted.
//
// Reports can hide a black hole: a backend that fails every call and
// reports zero utilization has its reports discarded and keeps the median
// weight. So the weight is also scaled by the engine's failure avoidance
// (failurePenalty, as in pickwise_p2c, on by default), computed from the
// server-side failures this client saw, which a backend cannot misreport,
// and a backend whose failures stand far above the fleet's is ejected
// locally until its probes succeed (ejection).
// See package github.com/pickwise/pickwise/orcaweight for the computation and for
// how a grpc-go backend reports its load.
//
// Picks follow a precomputed smooth order (earliest virtual deadline with
// staggered phases): shares are exact over a cycle and no endpoint gets a
// burst of consecutive calls. Each client starts at a random point of the
// cycle, so that clients with the same weights do not visit the backends
// in step. The order is rebuilt every weightUpdatePeriod; a pick is one
// atomic increment and a table lookup (over a large fleet with weights
// that are not small integers, a short walk of a sweep; with equal weights,
// nothing more than the increment), and the per-call report hook is built
// once per endpoint, so picking allocates nothing. The hook records an
// endpoint's first 64 per-call reports of each weightUpdatePeriod, then
// every 8th as standing for 8: the period's means are those of all its
// reports unless their values follow the calls' order in a cycle of 2, 4
// or 8, and a busy endpoint's report sums, which each recorded report
// writes, are not taken from core to core by every call.
//
// The fields gRFC A58 defines for grpc's weighted_round_robin keep their
// names, defaults and meaning, so a config moves from one to the other by
// changing the policy name (pickwise_orca_wrr then also ramps newcomers
// with slow start, until their answers show them warm or their peers
// overloaded, which grpc's policy does not):
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
package orcawrr
