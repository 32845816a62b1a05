// Package prequal implements pickwise_prequal: Prequal's placement by what
// servers report of their own load, their requests in flight (RIF) and
// latency, after Wydrowski, Kleinberg and Rumble, "Load is not what you
// should balance: Introducing Prequal" (NSDI 2024).
//
// The client asks servers for their load off the call's path, with small
// probes over the connections it already has, and every answer that
// carries serverload's per-call report refreshes its view at no extra
// cost. It keeps a pool of recent answers; a pick ranks them by the
// hot-cold rule (an answer whose RIF is above the pool's hotQuantile is
// hot; the cold answer with the lowest latency wins, or, when all are hot,
// the lowest RIF), and the two best meet the failure evidence and slow
// start every pickwise policy applies. With fewer than two usable answers,
// as with servers that serve no probes, a pick compares in-flight counts
// as pickwise_p2c does.
//
// Servers run the serverload package's interceptors and probe service.
// Register the policy with a blank import and select it in the service
// config; every field is optional:
//
//	import _ "github.com/pickwise/pickwise/balancer/prequal"
//
//	{"loadBalancingConfig": [{"pickwise_prequal": {
//	  "poolSize": 16, "maxAge": "1s", "reuseBudget": 1, "hotQuantile": 0.7,
//	  "minProbeRate": 0.1, "probeTimeout": "1s"
//	}}]}
//
// How it works, what it costs servers, and how far its signal can be
// trusted: https://github.com/pickwise/pickwise/blob/main/docs/design/prequal.md
package prequal
