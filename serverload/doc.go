// Package serverload is the server side of pickwise_prequal: it keeps a
// gRPC server's requests in flight (RIF) and the latency a call arriving
// now can expect, and reports both to clients, in every response's ORCA
// trailer, in answers to a probe RPC, and on grpc's ORCA out-of-band
// stream. pickwise_prequal places calls by these reports, after Prequal
// (Wydrowski et al., NSDI 2024); [docs/design/prequal.md] describes the
// figures and how they are kept.
//
// A server installs the interceptors and registers the probe service:
//
//	load := serverload.New()
//	srv := grpc.NewServer(
//		grpc.ChainUnaryInterceptor(load.UnaryInterceptor()),
//		grpc.ChainStreamInterceptor(load.StreamInterceptor()),
//	)
//	load.Register(srv)
//	// Optional: grpc's ORCA service reports the figures out of band too,
//	// beside the metrics of an orca.ServerMetricsRecorder if given one.
//	orca.Register(srv, orca.ServiceOptions{ServerMetricsProvider: load.MetricsProvider(nil)})
//
// Every call through the interceptors counts in RIF until it returns,
// except the probe's, ORCA's and health checking's own, which are not
// work. A unary call that succeeds adds its latency to the estimate; a
// failed one does not, as a fast failure must not make a server look
// fast, and neither does a stream, whose length its caller decides.
//
// Every response carries the ORCA named metrics [RIFMetric] and
// [LatencyMetric] in its trailer. A server that uses
// orca.CallMetricsServerOption must pass that option before the
// interceptors, as grpc asks: the figures then join the call's own ORCA
// report rather than form a second one.
//
// [docs/design/prequal.md]: https://github.com/pickwise/pickwise/blob/main/docs/design/prequal.md
package serverload
