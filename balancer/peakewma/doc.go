// Package peakewma implements pickwise_peak_ewma: latency-aware load
// balancing with the power of d choices, after Finagle's Peak EWMA, that
// treats failures as expensive.
//
// Each pick samples choiceCount distinct READY endpoints and sends the RPC
// to the one with the lowest
//
//	cost = rtt * (inFlight + 1) / weight
//
// among the candidates that pass slow start and the failure check (as in
// pickwise_p2c). rtt is a peak-sensitive moving average of the endpoint's
// round-trip times: a sample above the average replaces it at once, so a
// backend that turns slow is avoided after one slow answer; a sample below
// pulls it down with weight 1-exp(-elapsed/decayTime). While an endpoint
// gets no answers its rtt decays towards zero with the same time constant,
// so a backend that recovered is tried again (after about two decay times
// for a tenfold slowdown). An endpoint that has never answered gets one
// call at a time until it has answered once (Finagle's rule). A
// server-side failure never lowers the average, so a backend that fails
// fast cannot look fast; failures are weighed by the failure evidence and
// local ejection every pickwise policy shares.
//
// Register the policy with a blank import and select it in the service
// config; every field is optional:
//
//	import _ "github.com/pickwise/pickwise/balancer/peakewma"
//
//	{"loadBalancingConfig": [{"pickwise_peak_ewma": {
//	  "choiceCount": 2,
//	  "decayTime": "10s",
//	  "slowStart": {"window": "30s"},
//	  "failurePenalty": {"enabled": true, "window": 10, "maxMultiplier": 100, "halfLife": "5s"},
//	  "ejection": {"enabled": true, "threshold": 0.5, "minFailures": 5, "baseEjectionTime": "1s", "maxEjectionTime": "30s",
//	    "maxEjectionPercent": 10, "probeInterval": "300ms", "probeSuccesses": 2}
//	}}]}
//
// Every field with its default and bounds, close calls between idle
// backends, lone far peaks, which calls are timed, and the measured
// behaviour beside grpc-go's built-ins:
// https://github.com/pickwise/pickwise/blob/main/docs/policies/peak_ewma.md
package peakewma
