// Package subset implements pickwise_subset, a parent policy that connects
// each client to a small subset of the backends and lets any registered
// child policy balance over that subset. In a fleet of many clients and
// many backends, a full mesh costs every backend a connection per client;
// subsetting caps it at subsetSize per client while keeping every backend's
// share of clients even.
//
// The subset depends on the endpoint identities (each endpoint's first
// address, never the resolver's order), and the child sees only the
// subset's endpoints, so it opens connections only to those backends. The
// child is any registered policy, chosen from a loadBalancingConfig list
// through grpc's balancer registry; this package imports no other policy.
// With clientIndex and clientCount (every client knows a distinct index;
// [IndexFromHostname] reads it from a StatefulSet pod's name), "balanced"
// mode (the default) gives every backend the same number of clients ±1,
// and "stable" mode moves the fewest connections when backends come and
// go; without an index, a rendezvous hash of clientId, or of a random seed,
// as in gRFC A68 (grpc-go's random_subsetting_experimental).
//
//	import (
//	  _ "github.com/pickwise/pickwise/balancer/p2c"    // the default child
//	  _ "github.com/pickwise/pickwise/balancer/subset"
//	)
//
//	{"loadBalancingConfig": [{"pickwise_subset": {
//	  "subsetSize": 10,
//	  "clientIndex": 7,
//	  "clientCount": 300,
//	  "mode": "balanced",
//	  "childPolicy": [{"pickwise_p2c": {"choiceCount": 2}}]
//	}}]}
//
// subsetSize is required; in balanced mode clientCount is at most
// [MaxBalancedClientCount], and subset and shadow configs nest at most
// [MaxNesting] deep. Every field with its default and bounds, the two
// modes measured, a StatefulSet example, and what a change costs:
// https://github.com/pickwise/pickwise/blob/main/docs/policies/subset.md
package subset
