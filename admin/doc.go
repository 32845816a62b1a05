// Package admin serves a page that shows what every pickwise balancer in
// the process is doing: for each channel, its policy, config and
// membership fingerprints, and for each endpoint its state, weights,
// calls in flight, the cost its picker compares, failure evidence,
// ejection, slow-start ramp, and its share of the channel's calls beside
// its fair share. It answers the questions an operator asks when one
// backend is starved or flooded, as Envoy's /clusters and Finagle's
// balancer admin pages do.
//
// Mount Handler on a debug server, never on a public one:
//
//	mux := http.NewServeMux()
//	mux.Handle("/debug/pickwise", admin.Handler())
//	go http.ListenAndServe("127.0.0.1:8081", mux)
//
// A browser gets an HTML page that refreshes itself; a tool gets JSON
// with ?format=json (or an Accept header of application/json). The JSON
// fields are documented in docs/observability.md. Reading the page costs
// picks nothing: it reads counters picks keep anyway, under the
// balancer's lock that only resolver and connectivity updates take.
package admin
