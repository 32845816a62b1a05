// Package p2c implements pickwise_p2c: weighted least-request load
// balancing with the power of d choices, slow start and a failure penalty.
//
// Each pick samples choiceCount distinct READY endpoints uniformly at random
// and sends the RPC to the one with the lowest cost
//
//	cost = (inFlight + 1)^activeRequestBias / (weight * slowStart) * penalty(failures)
//
// which is Envoy's weighted least-request rule with two additions: slow
// start ramps the weight of an endpoint that joins or recovers, and the
// failure penalty stops a backend that fails fast from looking idle (see
// engine.FailurePenaltyConfig for the formula). Weights come from the
// endpoint weight attribute that xDS sets (load_balancing_weight); without
// one every endpoint weighs 1. Sampling with two choices is due to
// Mitzenmacher, "The Power of Two Choices in Randomized Load Balancing"
// (2001); the policy follows gRFC A48 for choiceCount.
//
// Compared with grpc-go's least_request_experimental it honours weights, has
// slow start and the failure penalty, samples without replacement, and a
// pick allocates nothing.
//
// Register the policy with a blank import and select it in the service
// config; every field is optional:
//
//	import _ "github.com/pickwise/pickwise/balancer/p2c"
//
//	{"loadBalancingConfig": [{"pickwise_p2c": {
//	  "choiceCount": 2,
//	  "activeRequestBias": 1.0,
//	  "slowStart": {"window": "30s", "aggression": 1.0, "minWeightPercent": 10},
//	  "failurePenalty": {"enabled": true, "window": 10, "maxMultiplier": 100, "halfLife": "5s"}
//	}}]}
package p2c
