// Package server is the backend of pickwise's load-balancing lab: a real
// gRPC server whose latency, capacity, failure mode and ORCA load
// reporting change at run time, so a failure scenario (a
// black hole, a slow or overloaded backend, cold-start herding, two
// hardware generations reporting different utilization) can be staged
// against the real client stack without restarting anything.
//
// One Server serves four services on one listener:
//
//   - pickwise.interop.Backend/Call, the traffic (CallMethod). The reply
//     and the x-backend trailer carry the server's name.
//   - pickwise.interop.Admin/SetBehavior, /Stats and /Reset, which take
//     and return JSON in a wrapperspb.StringValue, so any gRPC client (for
//     example grpcurl) can drive them without a .proto file. The package
//     functions SetBehavior, FetchStats and Reset are their Go clients.
//   - xds.service.orca.v3.OpenRcaService, grpc's own out-of-band ORCA
//     service (gRFC A51), fed by a recorder this server refreshes.
//   - pickwise.serverload.v1.LoadProbe, the serverload package's probe
//     service, which pickwise_prequal asks for the server's requests in
//     flight and latency; Stats.Probes counts its calls.
//
// Stop kills a Server as a crash would, Drain shuts it down gracefully
// (GOAWAY, calls in flight finish), and Restart serves it again on the
// same address with the same behavior and counters, as a rebooted server
// comes back: clients holding the address lose the endpoint and regain it
// without any resolver change.
//
// A behavior change is a JSON patch; omitted fields keep their values:
//
//	{"latency": "50ms", "latencySpread": 0.2, "capacity": 2,
//	 "orca": {"perCall": true, "outOfBand": true, "interval": "200ms"}}
//	{"errorRate": 1, "errorCode": "UNAVAILABLE", "errorLatency": "0s"}   // black hole
//	{"coldStart": "10s", "coldFactor": 5}   // then Reset with {"coldRestart": true}
//	{"slowdown": 3}   // a noisy neighbour: service times x3 until {"slowdown": 0}
//
// # Load model
//
// A call that is going to fail (ErrorRate) fails on arrival after
// ErrorLatency, without queueing. Any other call waits for one of Capacity
// slots in FIFO order, then holds it for a lognormal service time around
// Latency, slowed while cold and by the slowdown in force when it gets its
// slot. Queueing is why an overloaded server is slow.
// All waits end when the client cancels or the server stops.
//
// # ORCA
//
// Both channels report the same three numbers: CPU utilization (calls in
// service / Capacity; / 100, capped at 1, with unlimited capacity; or a
// fixed value), QPS (calls completed per second over a sliding second) and
// EPS (injected failures per second over the same window). Per-call
// reports ride in the "endpoint-load-metrics-bin" trailer, through grpc's
// orca.CallMetricsServerOption; ParseLoadReport decodes one. Out-of-band
// reports use orca.Register. Its public API does not allow a reporting
// interval under 30s (lowering it takes a grpc-internal hook), so a stream
// gets one report as soon as it opens and then one every 30s or more;
// ORCAConfig.Interval sets how fresh the numbers in those reports are, not
// how often they are sent.
//
// Every Call's report also carries the serverload package's named
// metrics, the server's requests in flight and latency estimate, whether
// or not ORCAConfig.PerCall adds the three numbers: serverload's
// interceptors run on the traffic, after grpc's per-call ORCA one.
package server
