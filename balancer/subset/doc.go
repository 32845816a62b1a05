// Package subset implements pickwise_subset, a parent policy that connects
// each client to a small subset of the backends and lets any registered
// child policy balance over that subset. In a fleet of many clients and
// many backends, a full mesh costs every backend a connection per client;
// subsetting caps it at subsetSize per client while keeping every backend's
// share of clients even.
//
// The parent computes the subset from the endpoint identities (each
// endpoint's first address, never the resolver's order), gives the child a
// resolver.State holding only the subset's endpoints (attributes and
// service config untouched), and so the child opens connections only to
// those backends. The subset is recomputed only when the set of backends or
// the config changes. The child is any registered policy, chosen from a
// loadBalancingConfig list through grpc's balancer registry; this package
// imports no other policy.
//
// # Choosing the subset
//
// With clientIndex and clientCount (every client of the fleet knows a
// distinct index in [0, clientCount)), two deterministic algorithms are
// offered, selected by mode. Every client computes its subset on its own,
// from the same inputs, so the clients agree without talking to each
// other.
//
//   - "balanced" (default): a capacity-bounded rendezvous assignment. Each
//     (client, backend) pair has a score that depends only on the client
//     index and the backend's identity; clients are served in index order,
//     each taking its best-scoring backends among those with room left,
//     where the room is what keeps every backend at the floor or ceiling of
//     the mean (a client computes the rows of every client before it).
//     So every backend ends within ±1 client of the mean, always. A backend
//     joining or leaving moves about 1.4x the minimum number of
//     (client, backend) pairs when backends have hundreds of clients each
//     (1,000 clients x 100 backends, subsets of 20), but 2.7x with 30,
//     5 to 6x with 10 (300 x 300, subsets of 10), and 10x to 18x with 2
//     to 20 among 10,000 clients: with few clients per backend, keeping
//     the balance exact pushes a chain of clients around.
//   - "stable": rendezvous hashing on the index; a change moves exactly the
//     minimum (the removed backend's clients, or those the new backend
//     outranks), but the balance is statistical: 2 to 19 clients per
//     backend instead of 10 at 300 x 300, subsets of 10, and 164 to 227
//     instead of 200 at 1,000 x 100, subsets of 20.
//
// Choose stable when moving connections is expensive and the fleet
// tolerates that spread. For comparison, the deterministic subsetting of
// Google's SRE book ("Load Balancing in the Datacenter") balances just as
// exactly, but any change of the backend count reshuffles its rounds: it
// moves 44x to 281x the minimum in the same cases. The figures are measured by
// TestSpreadAndChurn and TestChurnSpread in this module's
// internal/subsetting package, which holds the algorithms; the simulator's
// subsetting scenario repeats the comparison with the real balancers.
//
// Without an index, the client ranks backends by a rendezvous hash of
// clientId, which is stable across restarts; with no clientId either, by a
// random seed drawn when the balancer is built and kept for its lifetime,
// as in gRFC A68 (grpc-go's random_subsetting_experimental). Both balance
// only statistically.
//
// # Config
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
// Fields:
//
//   - subsetSize: required, > 0. With no more backends than that, the
//     child gets them all.
//   - clientIndex, clientCount: given together, 0 <= clientIndex <
//     clientCount. Every client must use the same clientCount. In
//     balanced mode clientCount is at most 10,000 ([MaxBalancedClientCount]):
//     on every change of the backend list a client computes the rows of
//     every client before it, about 7 ms for the last of 10,000 clients
//     over 10,000 backends (the README's Fleet scale section has the
//     runs).
//   - clientId: any string; used only without an index.
//   - mode: "balanced" (default) or "stable"; used only with an index.
//   - childPolicy: a loadBalancingConfig list; the first registered policy
//     is taken and its config is validated by its own parser. Default
//     [{"pickwise_p2c": {}}]; if pickwise_p2c is not registered (its
//     package not imported) and childPolicy is absent, the config is
//     rejected with an error naming it. A pickwise_subset child may
//     itself have a pickwise_subset child, down to [MaxNesting] (16)
//     configs in all; a deeper chain is rejected before it is decoded,
//     since each level decodes its child's JSON again.
//
// Errors read "pickwise_subset: <field> ...", and a child's own error is
// included as the child wrote it.
//
// # Client index from a StatefulSet
//
// A Kubernetes StatefulSet names its pods <set>-0 ... <set>-(replicas-1),
// which gives a dense, stable index for free ([IndexFromHostname]). Build
// the service config at startup; the replica count comes from the
// deployment (here an environment variable):
//
//	host, err := os.Hostname()
//	if err != nil { ... }
//	index, err := subset.IndexFromHostname(host) // "api-7" -> 7
//	if err != nil { ... } // not a StatefulSet pod: fall back to clientId
//	count, err := strconv.Atoi(os.Getenv("API_REPLICAS"))
//	if err != nil { ... }
//	sc := fmt.Sprintf(`{"loadBalancingConfig": [{%q: {"subsetSize": 10, "clientIndex": %d, "clientCount": %d}}]}`,
//	  subset.Name, index, count)
//	conn, err := grpc.NewClient("dns:///backend.default.svc:443",
//	  grpc.WithTransportCredentials(creds), grpc.WithDefaultServiceConfig(sc))
//
// When the replica count changes, every client must restart with the new
// count (a rolling restart does that); until then, the old and new
// assignments overlap only partly.
//
// A backend that leaves the list and comes back stays out of the subsets
// for rejoinHold (default 30 s) after its return, flaps restarting the
// hold, and is then readmitted by a timer of the balancer's: a backend
// that flaps takes its slots back once, not on every return, and the
// clients that would have moved to it and back stay where they are. A
// backend never seen before joins at once. Every client applies the same
// rule to the same updates, so balanced mode's rows stay consistent,
// within the moments the updates reach each client.
//
// A child policy change rebuilds the child: the old one is closed before
// the new one starts, so RPCs queue briefly (grpc's graceful switch is
// internal to grpc).
package subset
