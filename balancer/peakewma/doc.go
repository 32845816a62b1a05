// Package peakewma implements pickwise_peak_ewma: latency-aware load
// balancing with the power of d choices, after Finagle's Peak EWMA, that
// treats failures as expensive.
//
// Each pick samples choiceCount distinct READY endpoints and sends the RPC
// to the one with the lowest
//
//	cost = rtt * (inFlight + 1) / weight
//
// among the candidates that pass slow start and the failure check (see
// pickwise_p2c; slow start is on by default, and holds an endpoint that
// joins or recovers to its ramped share of the picks until its answers
// show it warm, or its peers overloaded),
// sampled as pickwise_p2c samples them: at random, with the first taken in
// round-robin turn while most endpoints are busy with the channel's calls.
// rtt is a peak-sensitive moving average of the endpoint's round-trip
// times: a sample above the average replaces it at once, so a backend that
// turns slow is avoided after one slow answer (two, for a lone answer over
// three times the average: see below); a sample below pulls it down
// with weight 1-exp(-elapsed/decayTime). While an endpoint gets no answers
// its rtt decays towards zero with the same time constant, so a backend
// that recovered is tried again (after about two decay times for a tenfold
// slowdown). An endpoint that has never answered is tried at once, and,
// while that first call is pending, costs more than any other: a newcomer
// gets one call at a time until it has answered once (Finagle's rule), and
// no more than its ramped share after that.
//
// A latency average is peak-sensitive by design, which also makes it
// brittle between idle backends of equal speed: the one whose last peak
// was lowest would win every comparison for seconds. So a comparison of
// two idle candidates whose costs are within a factor of three is a close
// call: the costlier one wins with a chance that falls from one half at
// equal cost to none at three times the cost. A backend three times as
// slow still loses every time, and with calls in flight the comparison is
// strict. An answer over three times the average (the client's machine
// stalling during one call) would still price a backend out of every
// comparison until its peak decayed: so such an answer, with none such
// within decayTime before it, waits for the endpoint's next answer. A
// success in time forgives it; a second far one
// makes the larger of the two the peak, one call later than the peak
// rule alone would. Far answers that come more often are each the peak
// at once.
//
// Latency is the signal that a backend failing in a millisecond games
// most. A server-side failure never lowers the average: timed, it is a
// sample of max(its latency, the average), so a timeout raises it and a
// fast failure leaves it; untimed or before the first success, it is no
// sample. Failures are weighed where the evidence is, by the engine's
// failure counts and local ejection (see pickwise_p2c). Client-side errors
// and a caller's cancellations are not samples at all.
//
// Timing a call takes two clock reads, which cost more than the rest of a
// pick. A call is timed when it starts at least decayTime/65536 (150µs at
// the default) after the last timed call to its endpoint: up to 65,536
// samples per decay time, where timing every call would add samples of
// the same moments. Over a large fleet the gap is 1µs times the number of
// endpoints (10ms at 10,000 at the default), at most decayTime/256, so
// that a picker times about a million calls a second at most. While picks
// are dense (over about 250,000 a second), deciding that a call is not
// timed reads no clock: the picker keeps a recent reading, refreshed by one
// pick in 16, and reads the clock only when that reading shows the chosen
// endpoint due. In-flight counts and server-side failures still count
// every call.
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
package peakewma
