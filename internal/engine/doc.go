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
// # Reading order
//
// The files read in one direction, each using only what it and the files
// before it declare (TestFilesReadInOneDirection checks it):
//
//   - clock.go, recentclock.go, duration.go, sampler.go, config.go,
//     errors.go, reasons.go: injected time and randomness, the recent clock
//     reading of timed pickers, the sampler's draws, config helpers,
//     the pickers that explain an error, why a pick was made;
//   - slowstart.go, failure.go, latency.go, ejector.go, donework.go: what
//     an endpoint accumulates (slow start, failure evidence, its latency
//     average, its ejection state) and the work its Done hands to the
//     balancer;
//   - endpoint.go, attempts.go, ready.go, timed.go, probe.go: the endpoint,
//     a call's attempts, the immutable Snapshot pickers read, timed picks
//     and probe picks;
//   - leastloaded.go, weighted.go: the pickers (the weighted order is
//     internal/schedule);
//   - metrics.go, policy.go, static.go, weightkeeper.go: what a policy
//     supplies (its metrics, its Policy and Settings), pickers built without
//     a balancer, and the owner of backend-reported weights;
//   - balancer.go, readylist.go, coalesce.go, ejection.go, recording.go,
//     weights.go, lazy.go, observe.go, children.go: the balancer, one type
//     whose methods are split by job (wiring and publishing; the READY
//     endpoints kept between publishes; when a change is published;
//     assessing and ejecting; recording metrics; weight updates; on-demand
//     connections; the outcomes a parent feeds its child; the endpoints'
//     children);
//   - registry.go, parents.go: registering a policy with grpc, and the
//     parent policies that build pickwise children with the engine's
//     clock and source.
//
// Two kinds of reference run the other way, each for a reason: balancer.go
// calls its own methods in the files after it, and doneWork's owner
// interface names the Endpoint a probe readmits.
package engine
