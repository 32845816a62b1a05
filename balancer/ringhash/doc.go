// Package ringhash implements pickwise_ring_hash: consistent-hash load
// balancing with a choice of table (ring, Maglev or rendezvous), bounded
// load, and a per-RPC key from the context.
//
// Every RPC has a key, and every RPC with the same key goes to the same
// endpoint while the endpoint set is unchanged: caches, sessions and
// shards stay warm. The key comes from, in this order:
//
//  1. WithKey(ctx, key): set per RPC by the caller. The key is hashed when
//     the context is made, so the pick reads a number and allocates
//     nothing.
//  2. The request header named by requestHashHeader (gRFC A76): its values,
//     joined with ",", hashed with XXH64 as grpc-go does.
//  3. Otherwise a random hash (gRFC A76): such an RPC goes to the first
//     READY endpoint along the table from a random point, waking at most
//     one IDLE endpoint on the way, and none while one is connecting.
//
// The tables are the consistent-hash ring of Karger et al. (the default,
// sized by a memory budget), Google's Maglev table (Eisenbud et al., NSDI
// 2016) and weighted rendezvous hashing (Thaler and Ravishankar).
// Placement depends only on each endpoint's identity (its gRFC A76 hash
// key, else its first address) and weight, never on the resolver's
// order, so independent clients map every key identically. Endpoints
// connect lazily, when a key first leads to them (gRFC A61). Bounded load
// (Mirrokni, Thorup and Zadimoghaddam, "Consistent Hashing with Bounded
// Loads", 2018; Envoy's hash_balance_factor) is off unless balanceFactor
// is set. An endpoint whose server-side failures stand far above the
// fleet's is ejected locally and its keys go to their next candidate
// until its probes succeed; strictAffinity keeps every key home. An
// endpoint that left and came back gets its keys back only after
// rejoinHold, over rejoinRamp, so a node that flaps moves its keys once.
//
// Register the policy with a blank import and select it in the service
// config; every field is optional:
//
//	import _ "github.com/pickwise/pickwise/balancer/ringhash"
//
//	{"loadBalancingConfig": [{"pickwise_ring_hash": {
//	  "table": "ring",
//	  "minRingSize": 1024,
//	  "maxRingSize": 131072,
//	  "maglevTableSize": 65537,
//	  "maxWeightRatio": 16,
//	  "requestHashHeader": "x-user-id",
//	  "balanceFactor": 1.25,
//	  "ejection": {"enabled": true},
//	  "strictAffinity": false
//	}}]}
//
//	ctx = ringhash.WithKey(ctx, userID) // per RPC
//
// Every field with its default and bounds, the tables, bounded load,
// failures and the rejoin hold, and the measured behaviour beside
// grpc-go's built-ins:
// https://github.com/pickwise/pickwise/blob/main/docs/policies/ring_hash.md
package ringhash
