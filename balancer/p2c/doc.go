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
// on by default, holds an endpoint that joins or recovers to its ramped
// share of the picks until its first answers show it warm; a candidate
// with recent server-side failures is passed over with a probability that
// grows with the evidence against it, judged against the fleet's own
// failure rate (failurePenalty); and an endpoint whose failures stand far
// above the fleet's is ejected locally, probed, and readmitted once its
// probes succeed (ejection). Weights come from the endpoint weight
// attribute that xDS sets (load_balancing_weight); without one every
// endpoint weighs 1. Sampling with two choices is due to Mitzenmacher,
// "The Power of Two Choices in Randomized Load Balancing" (2001); the
// policy follows gRFC A48 for choiceCount. Compared with grpc-go's
// least_request_experimental it honours weights, has slow start, failure
// evidence and local ejection, samples without replacement, and a pick
// allocates nothing.
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
//
// Every field with its default and bounds, how candidates are drawn, slow
// start, and the measured behaviour beside grpc-go's built-ins:
// https://github.com/pickwise/pickwise/blob/main/docs/policies/p2c.md
package p2c
