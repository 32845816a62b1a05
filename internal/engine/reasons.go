package engine

// This file names why a picker chose an endpoint: pickers count one
// reason per pick, and metrics.go turns the counts into the picks metric.

// MaxPickReasons is how many distinct reasons a policy's pickers can give
// for their picks (PickReason). A power of two: a pick masks the reason
// with MaxPickReasons-1 instead of checking its bounds.
const MaxPickReasons = 4

// PickReason says why a picker chose an endpoint. It indexes the reason
// names of the policy's MetricsSpec; every pick counts one, on the
// endpoint's own cache line, and the counts reach the picks metric when
// metrics are collected. (WeightedRR's picks are the exception: see
// ReasonRoundRobinFallback.) A pick for reason 0 costs one atomic add
// fewer than the others (it is counted with the endpoint's in-flight
// calls), so every policy numbers its commonest reason 0.
type PickReason uint8

// Why the engine's d-choice picker (LeastLoaded) chose an endpoint; the
// names are LeastLoadedReasons.
const (
	// ReasonTie: every candidate cost the same; the first sampled won.
	// Reason 0 because it is p2c's commonest: in a fleet of any size most
	// endpoints have no call in flight at a given moment, so most
	// comparisons are between idle candidates. (Peak EWMA's latencies
	// rarely tie; its picks pay the second add.)
	ReasonTie PickReason = iota
	// ReasonLeastLoaded: the candidates' costs differed and the cheapest
	// won.
	ReasonLeastLoaded
	// ReasonOnlyReady: one endpoint was READY, so there was no choice.
	ReasonOnlyReady
	// ReasonAvoidedFailing: a candidate that lost was being penalized for
	// recent server-side failures.
	ReasonAvoidedFailing
)

// LeastLoadedReasons names LeastLoaded's PickReasons, for MetricsSpec.
var LeastLoadedReasons = []string{"tie", "least_loaded", "only_ready", "avoided_failing"}

// Why a Prequal picker chose an endpoint; the names are PrequalReasons.
// The fourth is ReasonAvoidedFailing, as LeastLoaded's.
const (
	// ReasonCold: the rule's choice, the cold answer with the lowest
	// latency.
	ReasonCold PickReason = iota
	// ReasonHot: every usable answer was hot; the lowest RIF won.
	ReasonHot
	// ReasonNoAnswers: fewer than two usable answers; the call was placed
	// by in-flight counts, as pickwise_p2c places it.
	ReasonNoAnswers
)

// PrequalReasons names Prequal's PickReasons, for MetricsSpec.
var PrequalReasons = []string{"cold", "hot", "no_answers", "avoided_failing"}

// Why the engine's WeightedRR picker chose an endpoint; the names are
// WeightedReasons.
const (
	// ReasonWeighted: the schedule follows the endpoints' weights.
	ReasonWeighted PickReason = iota
	// ReasonRoundRobinFallback: fewer than two READY endpoints had a usable
	// backend-reported weight, so every endpoint got an equal share.
	//
	// A WeightedRR picker counts its picks itself, not on their
	// endpoints, and the balancer records them for the picker's reason
	// (pickerCounts).
	ReasonRoundRobinFallback
)

// WeightedReasons names WeightedRR's PickReasons, for MetricsSpec.
var WeightedReasons = []string{"weighted", "round_robin_fallback"}
