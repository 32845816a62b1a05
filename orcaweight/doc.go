// Package orcaweight turns ORCA (Open Request Cost Aggregation) load reports
// from backends into one weight per endpoint, for any pickwise policy that
// follows weights (pickwise_orca_wrr through the internal engine). It
// implements the weight of gRFC A58, "Client-Side Weighted Round Robin LB
// Policy", with smoothing added.
//
// A report carries the backend's queries per second, errors per second
// and utilization, and the weight is
//
//	qps / (utilization + eps/qps * ErrorUtilizationPenalty)
//
// Reports are summed into periods, and a policy ends a period by calling
// [Tracker.Update] on a timer; each period is folded into averages whose
// half-life (Config.HalfLife) is measured in time, so noise in the
// reports does not become oscillation in the traffic. A weight is usable
// once its endpoint has reported for BlackoutPeriod and stale when no
// report came for WeightExpirationPeriod; [FillMedian] gives endpoints
// without a usable weight the median of the usable ones and bounds the
// others at [MaxMedianMultiple] times it. Reports that cannot give a
// finite positive weight are rejected and counted ([Group.BadReports]).
//
// One [Group] per balancer, one [Tracker] per endpoint:
//
//	g := orcaweight.NewGroup(orcaweight.Config{
//		BlackoutPeriod:          10 * time.Second,
//		WeightExpirationPeriod:  3 * time.Minute,
//		ErrorUtilizationPenalty: 1,
//		HalfLife:                10 * time.Second,
//	})
//	t := g.NewTracker()    // when the endpoint appears
//	result.Done = t.Done() // per-call reports; or t as an out-of-band listener
//	weights[i], status = t.Update(clock.Now()) // on the weight-update timer
//
// The computation in detail (periods and smoothing, blackout, expiry and
// the median, sampling per-call reports with [Tracker.RecordN]) and how a
// grpc-go backend reports its load:
// https://github.com/pickwise/pickwise/blob/main/docs/policies/orca_wrr.md#the-weight-in-detail-package-orcaweight
package orcaweight
