// Package peakewma implements pickwise_peak_ewma: latency-aware load
// balancing with the power of d choices, after Finagle's Peak EWMA, that
// treats failures as expensive.
//
// Each pick samples choiceCount distinct READY endpoints and sends the RPC
// to the one with the lowest
//
//	cost = rtt * (inFlight + 1) / (weight * slowStart) * penalty(failures)
//
// where rtt is a peak-sensitive moving average of the endpoint's round-trip
// times: a sample above the average replaces it at once, so a backend that
// turns slow is avoided after one slow answer; a sample below pulls it down
// with weight 1-exp(-elapsed/decayTime). While an endpoint gets no answers
// its rtt decays towards zero with the same time constant, so a backend
// that recovered is tried again (after about two decay times for a tenfold
// slowdown). An endpoint that has never answered is tried at once, and,
// while that first call is pending, costs more than any other: a newcomer
// gets one call at a time until it has answered once (Finagle's rule).
// defaultRtt is the latency assumed until then, to price failures.
//
// Latency is the signal that a backend failing in a millisecond games most.
// A server-side failure is therefore recorded as a latency sample of
// max(rtt of the call, 2 * max(average, defaultRtt)), capped at
// 100 * defaultRtt, so it raises the average as a success twice as slow
// would; and the engine's failure penalty (see pickwise_p2c) multiplies the
// cost on top. Client-side errors and a caller's cancellations are not
// samples at all.
//
// Timing a call takes two clock reads, which cost more than the rest of a
// pick. At up to about 6,500 calls a second to one endpoint (one per
// decayTime/65536, 150µs at the default) every call is timed; above that,
// one call per 150µs is: 65,536 samples per decay time, where timing every
// call would add samples of the same moments. In-flight counts and
// server-side failures still count every call.
//
// Register the policy with a blank import and select it in the service
// config; every field is optional:
//
//	import _ "github.com/pickwise/pickwise/balancer/peakewma"
//
//	{"loadBalancingConfig": [{"pickwise_peak_ewma": {
//	  "choiceCount": 2,
//	  "decayTime": "10s",
//	  "defaultRtt": "30ms",
//	  "slowStart": {"window": "30s"},
//	  "failurePenalty": {"enabled": true, "window": 10, "maxMultiplier": 100, "halfLife": "5s"}
//	}}]}
package peakewma
