// Package shadow registers pickwise_shadow, a parent policy for rolling a
// load-balancing change out safely: the candidate policy runs beside the
// live one over the same endpoints and the same connections, is asked on a
// sample of picks where it would send the call, and its answers are
// recorded, never sent. Once its predictions look right, canaryPercent
// lets it place that share of calls for real, with each arm's outcomes
// recorded apart; rolling back is a config push with canaryPercent 0.
//
// Select it with a blank import and a service config:
//
//	import _ "github.com/pickwise/pickwise/balancer/shadow"
//
//	{"loadBalancingConfig": [{"pickwise_shadow": {
//	    "live": [{"round_robin": {}}],
//	    "candidate": [{"pickwise_p2c": {}}],
//	    "sampleRate": 0.1, "canaryPercent": 0}}]}
//
// Both children are built through grpc's balancer registry, so any
// registered policy can be either, and the program must register them (a
// blank import of each pickwise policy it names). Read what was recorded
// in Go with [Summaries] ([Summary.Since] gives one step's alone), or as
// the pickwise.shadow.* metrics: predictions, endpoint_picks, calls and
// call_duration.
//
// Every field with its default and bounds, how connections are shared,
// which figure to read for which pair of policies, a rollout step by
// step, how far to trust a prediction, and what a pick costs:
// https://github.com/pickwise/pickwise/blob/main/docs/policies/shadow.md
package shadow
