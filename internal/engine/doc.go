// Package engine is the machinery every pickwise policy shares.
//
// A policy is a small composition: it parses its own config and supplies
// either a load metric for the d-choice sampler or its own picker over a
// snapshot of READY endpoints. An affinity policy (Spec.Lazy, gRFC A61)
// instead gets lazily connecting endpoints and a snapshot of all of them,
// in any state (Snapshot.Members). The engine owns everything else:
//
//   - the balancer wiring: one pickfirst child per endpoint with the health
//     listener enabled, as grpc's endpointsharding has, so client health
//     checking, outlier detection and multi-address endpoints compose with
//     every policy; but each child reports to its own endpoint, and bursts
//     of changes are coalesced into one picker, so that a fleet's changes
//     cost O(n) in total where endpointsharding's cost O(n²);
//   - per-endpoint state (in-flight count, failure EWMA, ready-since time)
//     that outlives pickers and is written in one place;
//   - endpoint weights from grpc's experimental/balancer/weight attribute;
//   - slow start (Envoy's formula) for endpoints that join or recover;
//   - classification of RPC outcomes into server-side failures and the
//     failure penalty derived from them;
//   - state aggregation when nothing is READY, with errors that name the
//     policy.
//
// Time and randomness are injected through Clock and Rand so that unit tests
// and the simulator run in virtual time with fixed seeds.
//
// # Where things are
//
// engineBalancer (balancer.go, children.go) wires the features; each is a
// type that owns its state, guarded by the balancer's lock:
//
//   - slowStart (slowstart.go): which endpoints ramp and until when, and
//     what slow start does at a pick;
//   - ejection (ejection.go): the health tick, ejection and probation;
//     a pick's probes are in probe.go, the config in ejector.go;
//   - parking (parked.go): removed endpoints' connections, kept for their
//     grace;
//   - publisher (publisher.go, coalesce.go, readylist.go): when and what
//     the parent is given, the READY and member lists;
//   - reportedWeights (weights.go, weightkeeper.go): backend-reported
//     weights;
//   - recorder (recording.go, metrics.go): metrics;
//   - loadProbes (loadprobes.go, loadpool.go, reportedload.go): load
//     probes and the pool of servers' answers pickwise_prequal's picker
//     (prequal.go) reads.
//
// A call's Done hands work to them through doneWork (donework.go), never
// taking the lock. The pickers are leastloaded.go (d choices), weighted.go
// (a weighted schedule) and timed.go (the calls a proof times); the
// Snapshot they read is ready.go, the endpoint they read endpoint.go.
// The math with no endpoint state is in packages of its own:
// internal/schedule (the weighted order), internal/evidence (failure
// evidence), internal/ramp (slow start's ramp and the proof that ends one
// early) and internal/ewma (Peak EWMA). docs/design/engine.md maps the
// owners, and docs/design/ has the why of each feature.
package engine
