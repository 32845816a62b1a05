// Package engine is the machinery every pickwise policy shares.
//
// A policy is a small composition: it parses its own config and supplies
// either a load metric for the d-choice sampler or its own picker over a
// snapshot of READY endpoints. An affinity policy (Spec.Lazy, gRFC A61)
// instead gets lazily connecting endpoints and a snapshot of all of them,
// in any state (Snapshot.Members). The engine owns everything else:
//
//   - the balancer wiring: grpc's endpointsharding with pickfirst children
//     and the health listener enabled, so client health checking, outlier
//     detection and multi-address endpoints compose with every policy;
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
package engine
