// Package orcaweight turns ORCA (Open Request Cost Aggregation) load reports
// from backends into one weight per endpoint, for any pickwise policy that
// follows weights (pickwise_orca_wrr through the internal engine). It
// implements the weight of gRFC A58, "Client-Side Weighted Round Robin LB
// Policy", with smoothing added.
//
// # Weight
//
// A report carries the backend's queries per second (rps_fractional),
// errors per second (eps) and utilization. The utilization is the largest
// of the named utilization metrics listed in Config.UtilizationMetrics
// that the report contains; failing those, application_utilization unless
// it is 0; failing that, cpu_utilization. The weight is
//
//	qps / (utilization + eps/qps * ErrorUtilizationPenalty)
//
// so a backend that serves more queries per unit of utilization gets more
// traffic, and one whose errors rise is charged for them even when its
// failures are fast and cheap. Reports that cannot give a finite positive
// weight (NaN, infinite or negative fields, qps 0, utilization 0) are
// rejected and counted (Group.BadReports).
//
// # Periods and smoothing
//
// Reports arrive per call (in each response's trailer) or out of band (on
// a stream, every few seconds) and are summed, lock-free, into the current
// period. The policy ends a period by calling Tracker.Update on a timer;
// the period's mean qps and mean cost (the denominator above) are folded
// into exponentially weighted averages whose half-life is measured in
// time, not in periods: a period that ends elapsed after the previous
// period with reports gets the share 1 - 2^(-elapsed/HalfLife), so
// out-of-band reports every 30s and per-call reports every second are
// smoothed alike. The weight is the ratio of the two averages. A ratio of
// averages is steadier than an average of ratios when utilization is
// noisy, because 1/u magnifies low readings; for the same reason raw
// per-period weights run high: with utilization spread uniformly ±40%
// around its mean they average about 6% above the true weight, a bias the
// smoothed weight shrinks as its half-life grows. HalfLife 0 turns
// smoothing off: each period's mean report is the weight, close to grpc-go's
// weighted_round_robin, which uses the last report.
//
// # Blackout, expiry and the median
//
// A weight is not used until its endpoint has been reporting for
// BlackoutPeriod, so that a new backend's first, optimistic reports (empty
// caches, no queue yet) do not draw a flood, and it stops being used when
// no report has come for WeightExpirationPeriod; reports that resume after
// that start a new blackout and new averages. Update's Status says which
// applies. Endpoints without a usable weight get the median of the usable
// weights (FillMedian), rather than zero or a guess; no weight is more
// than MaxMedianMultiple (10) times that median, so that one absurd report
// cannot draw nearly all the calls; and with fewer than two usable
// weights every endpoint gets the same weight, which is plain round
// robin. A fleet where that fallback persists has lost its load reports
// and should be alarmed on: its policy has silently become round robin.
//
// # Reporting load from a grpc-go backend
//
// grpc-go's google.golang.org/grpc/orca package produces the reports. A
// ServerMetricsRecorder holds the backend's current figures; the
// CallMetricsServerOption interceptors attach them to every response, and
// Register serves them on the out-of-band OpenRcaService stream:
//
//	smr := orca.NewServerMetricsRecorder()
//	srv := grpc.NewServer(orca.CallMetricsServerOption(smr)) // per-call reports
//	if err := orca.Register(srv, orca.ServiceOptions{ // out-of-band reports
//		ServerMetricsProvider: smr,
//	}); err != nil {
//		log.Fatal(err)
//	}
//	// From a loop that measures the backend, e.g. once a second:
//	smr.SetApplicationUtilization(busyWorkers / float64(workers))
//	smr.SetQPS(qps)
//	smr.SetEPS(eps)
//
// A handler can override the figures for its own response through
// orca.CallMetricsRecorderFromContext(ctx). grpc-go's service sends
// out-of-band reports at most every 30 seconds (its public API allows no
// shorter ServiceOptions.MinReportingInterval), so WeightExpirationPeriod
// must be well above that (A58's default is 3 minutes).
//
// # Using a Tracker in a policy
//
// One Group per balancer, one Tracker per endpoint:
//
//	g := orcaweight.NewGroup(orcaweight.Config{
//		BlackoutPeriod:          10 * time.Second,
//		WeightExpirationPeriod:  3 * time.Minute,
//		ErrorUtilizationPenalty: 1,
//		HalfLife:                10 * time.Second,
//	})
//	t := g.NewTracker()   // when the endpoint appears; t.Reset() when its connection changes
//	result.Done = t.Done() // per-call reports (this package imports grpc's orca, which parses trailers), or
//	stop := grpcorca.RegisterOOBListener(subConn, t, grpcorca.OOBListenerOptions{ReportInterval: 10 * time.Second})
//	// On the weight-update timer, for every endpoint:
//	weights[i], status = t.Update(clock.Now())
//	usable[i] = status == orcaweight.Usable
//	// Then, once for the picker:
//	if orcaweight.FillMedian(weights, usable) < 2 { /* record a round-robin fallback */ }
//
// A policy whose endpoints each take many calls at once may record only
// some of the per-call reports, with Tracker.RecordN(report, k) for one
// report in k, so that the period's sums, which every recorded report
// writes, are written less often. The means stay those of all the
// reports if the sample does not follow a pattern in them: calls often
// come in a cycle (a client alternating methods), and every k-th report
// of a cycle whose length k divides would record one phase of it only.
// pickwise_orca_wrr records each endpoint's first 64 reports of a weight
// update period, then every 8th.
package orcaweight
