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
// Tables. "ring" (the default) is the consistent-hash ring of Karger et al.
// as Envoy and grpc-go build it, XXH64 and virtual nodes in proportion to
// endpoint weight, but sized by a memory budget rather than by the spread
// of the weights: an endpoint of the median weight gets 128 to 255
// entries, the others in proportion, and a fleet that would need more
// than maxRingSize (default 131072 entries, about 0.9 MB) shares that
// instead. Below the budget (up to 1024 equal endpoints at the default)
// an endpoint's entries do not depend on n, so adding or removing one
// moves only that endpoint's keys; past it the entries thin out, to 13
// each at 10000 endpoints, whose shares then vary by about 28% (see
// ring.go). "maglev" is Google's Maglev table (Eisenbud et al., NSDI 2016)
// of maglevTableSize slots, a prime (default 65537, at most 262139): the
// fastest lookup and exact shares at any scale (each endpoint owns its
// weight's share of the slots to within two slots, or a relative n/M for
// one above twice the mean weight), at the price of a little extra key
// movement when the set changes. "rendezvous" is weighted
// highest-random-weight hashing (Thaler and Ravishankar): exactly minimal
// movement, but every pick scores every endpoint, O(N), 1 to 2 µs at 1000
// endpoints; it is meant for at most 1000, and the balancer logs a warning
// when it builds one over more. Building any table costs milliseconds at
// 10000 endpoints, whatever the weights.
//
// Weights come from the endpoint weight attribute that xDS sets
// (load_balancing_weight), default 1. Every table first caps each weight
// at maxWeightRatio (default 16) times the median weight, so that a single
// absurd weight (EDS allows up to 2^32-1) gets at most
// maxWeightRatio / (maxWeightRatio + ceil(n/2) - 1) of the total weight,
// and so, to within the table's own error, of the keys: 3.1% among 1000
// endpoints at the default, where without the cap it would take nearly
// all of them.
//
// Placement depends only on each endpoint's identity and weight, never on
// the order the resolver lists them in, so independent clients with the
// same endpoint set map every key identically. The identity is the
// endpoint's gRFC A76 hash key when the control plane sets one (grpc's
// resolver/ringhash attribute), else its first address. Tables are built
// when the endpoint set, a weight or the table's config changes, never on
// the pick path, and swapped in with the picker; a connectivity change
// reuses the table after one comparison per endpoint, with no hashing,
// sorting or copying.
//
// Connections follow gRFC A61: endpoints connect lazily, when a key first
// leads to them. A pick whose endpoint is IDLE wakes it and waits for it
// (the RPC queues, or fails at once unless it is wait-for-ready); endpoints
// in TRANSIENT_FAILURE are skipped for the next candidate along the table.
// The channel is READY when any endpoint is, TRANSIENT_FAILURE when two or
// more failed and none is READY, and one endpoint is always connecting
// while the channel is not READY.
//
// Rejoin hold. An endpoint that left, removed by the resolver or in
// TRANSIENT_FAILURE after it was READY, and came back does not get its keys
// back at once: they stay on the endpoints that took them until it has been
// present and READY for rejoinHold (default 30 s), then return over
// rejoinRamp (default 10 s), each key at its own moment (a hash of the key
// and the endpoint), so each moves once. A node that flaps then moves its
// keys once, not twice per flap, and the cache behind it is not refilled on
// every return; the balancer connects a held endpoint itself, so that it can
// prove it stays up. An endpoint never seen before takes its keys at once.
// rejoinHold "0s" and rejoinRamp "0s" give keys back the moment an endpoint
// is READY, as grpc-go's ring_hash does. The hold keeps other endpoints'
// keys in place only where the table does: on the ring (with 8 or more
// endpoints at the default minRingSize) and rendezvous; a Maglev table is
// rebuilt when the endpoint leaves and when it comes back, and moves some of
// the others' keys each time.
//
// Bounded load (Mirrokni, Thorup and Zadimoghaddam, "Consistent Hashing
// with Bounded Loads", 2018; Envoy's hash_balance_factor) is off unless
// balanceFactor is set, for instance to 1.25: an endpoint of weight w whose
// in-flight count would exceed
//
//	ceil(balanceFactor * (total in-flight + 1) * w / W)
//
// is skipped for the next candidate along the table, so no endpoint carries
// more than balanceFactor times its weight's share of the load (plus one,
// for rounding). w is the weight the table places by (capped at
// maxWeightRatio times the median), so that an endpoint's cap follows its
// share of the keys, and W is the total weight of the READY endpoints
// that are not ejected (one held by the rejoin hold counts). Their caps
// then add up to balanceFactor times the load however many are down, and
// without weights every cap is balanceFactor times the mean. A
// skipped key's RPC goes to the less loaded of the next few candidates
// that are under the cap, so that one hot key's overflow spreads rather
// than filling its neighbour and pushing the neighbour's own keys out. The
// counts are local to this balancer: each client bounds the load it sends,
// not what a backend serves in total.
//
// Affinity serves a cache, and a cache is no reason to fail calls: an
// endpoint whose server-side failures stand far above the fleet's is
// ejected locally (ejection, as in pickwise_p2c), and its keys go to their
// next candidate along the table while the resolver's membership stays as
// it is; a probe call now and then still goes home, and the keys come
// back once two probes in a row succeed. With the attempts package's
// interceptor, a retried or hedged attempt goes to the key's next
// candidate. strictAffinity keeps every key on its own READY endpoint,
// retries too, for users whose correctness depends on it.
//
// What counts as a failure is failurePenalty.codes. List no code a caller
// causes (INVALID_ARGUMENT, NOT_FOUND): every call of a key lands on its
// home, so a key whose own requests are all bad makes its home's rate
// stand out, and the home is ejected with every key it holds.
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
package ringhash
