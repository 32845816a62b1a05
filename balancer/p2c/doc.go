// Package p2c implements pickwise_p2c: weighted least-request load
// balancing with the power of d choices, slow start, and failures weighed
// by their evidence.
//
// Each pick samples choiceCount distinct READY endpoints and sends the RPC
// to the one with the lowest cost
//
//	cost = (inFlight + 1)^activeRequestBias / weight
//
// among the candidates that pass slow start and the failure check, which
// is Envoy's weighted least-request rule with three additions: slow start,
// on by default, holds an endpoint that joins or recovers to the share of
// picks its ramped weight gives it (it is passed over once it has taken
// that share), so that a cold newcomer is neither flooded, as a zero
// in-flight count among loaded peers would have it, nor starved, as
// dividing its cost by the ramp would among idle peers, until its first
// answers, timed, show it as fast as its peers (a warm backend back from
// a blip), or its peers twice as slow (an overloaded fleet), which ends
// its ramp (timeOnly turns that off); a candidate with recent
// server-side failures is passed over with a probability that grows with
// the evidence against it, judged against the fleet's own failure rate
// (failurePenalty), so one failure moves little traffic and a backend that
// fails fast cannot look idle; and an endpoint whose failures stand far
// above the fleet's is ejected locally, probed, and readmitted once its
// probes succeed (ejection). Weights come from the
// endpoint weight attribute that xDS sets (load_balancing_weight); without
// one every endpoint weighs 1. Sampling with two choices is due to
// Mitzenmacher, "The Power of Two Choices in Randomized Load Balancing"
// (2001); the policy follows gRFC A48 for choiceCount.
//
// With activeRequestBias 0 the weights alone place the calls, in
// proportion (weights 1:3 give 25% and 75%), as Envoy's least request
// does with active_request_bias 0: the candidates are drawn in proportion
// to weight, in-flight counts are not read, and the first candidate takes
// the call unless slow start or the failure check pass it over, when it
// goes to the next. Ejection, probes and retries work as they do for any
// bias. As in Envoy, the bias applies when weights differ: with equal
// weights every bias compares in-flight counts.
//
// Otherwise the candidates are drawn uniformly at random, but for the
// first, which wins ties: while more than a quarter of the random
// candidates a channel meets are busy (calls of its own in flight there),
// as when one client is most of its backends' load, the first is taken in
// round-robin turn. Two random candidates are then often both busy, and
// the endpoint in turn, last a first candidate a full round ago, has most
// likely finished; an even fleet under steady traffic sees round_robin's
// evenly spaced arrivals, and the random second still takes the call
// whenever the first is busier. While few are busy, as for one client of
// many, a random candidate's being busy is the only local sign of a slow
// backend, which a turn would hide, so the first is drawn too.
//
// Compared with grpc-go's least_request_experimental it honours weights, has
// slow start, failure evidence and local ejection, samples without
// replacement, and a pick allocates nothing. With the attempts package's
// interceptor, a retried or hedged attempt avoids the endpoints earlier
// attempts of its call used.
//
// Register the policy with a blank import and select it in the service
// config; every field is optional:
//
//	import _ "github.com/pickwise/pickwise/balancer/p2c"
//
//	{"loadBalancingConfig": [{"pickwise_p2c": {
//	  "choiceCount": 2,
//	  "activeRequestBias": 1.0,
//	  "slowStart": {"enabled": true, "window": "30s", "aggression": 1.0, "minWeightPercent": 10},
//	  "failurePenalty": {"enabled": true, "window": 10, "maxMultiplier": 100, "halfLife": "5s"},
//	  "ejection": {"enabled": true, "threshold": 0.5, "minFailures": 5, "baseEjectionTime": "1s", "maxEjectionTime": "30s",
//	    "maxEjectionPercent": 10, "probeInterval": "300ms", "probeSuccesses": 2}
//	}}]}
package p2c
