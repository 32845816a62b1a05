package orcaweight

import (
	"math"

	v3orcapb "github.com/cncf/xds/go/xds/data/orca/v3"
)

// positive reports whether v is finite and > 0 (false for NaN).
func positive(v float64) bool { return v > 0 && v <= math.MaxFloat64 }

// nonNegative reports whether v is finite and >= 0 (false for NaN).
func nonNegative(v float64) bool { return v >= 0 && v <= math.MaxFloat64 }

// utilization picks the utilization a report's weight is computed from.
//
// grpc-go's weighted_round_robin (v1.85) uses application_utilization
// unless it is exactly 0 (proto3 cannot tell unset from 0), and
// cpu_utilization otherwise; that part is matched exactly, so a NaN or
// negative application_utilization is chosen and then rejected rather than
// silently replaced by cpu_utilization. grpc-go has no named metrics. Ours
// come first so that a backend whose bottleneck is not CPU can say so;
// Envoy's client_side_weighted_round_robin, by contrast, consults its
// metric_names_for_computing_utilization only when application_utilization
// is unset. A named metric counts when its key is present, even with the
// value 0 (which the caller then rejects): a map, unlike a scalar field,
// says whether a value was sent.
func (s *settings) utilization(r *v3orcapb.OrcaLoadReport) float64 {
	if names := s.cfg.UtilizationMetrics; len(names) > 0 && len(r.Utilization) > 0 {
		best, found := 0.0, false
		for _, name := range names {
			v, ok := r.Utilization[name]
			if !ok {
				continue
			}
			if !nonNegative(v) {
				// One corrupt value makes the maximum meaningless.
				return v
			}
			if !found || v > best {
				best, found = v, true
			}
		}
		if found {
			return best
		}
	}
	if u := r.ApplicationUtilization; u != 0 {
		return u
	}
	return r.CpuUtilization
}

// cost is the denominator of A58's weight, qps / (utilization + eps/qps *
// penalty): the utilization one query per second costs, with errors
// charged as extra utilization. qps must be > 0. The penalty term is left
// out when it is 0, so that a huge error rate with no penalty cannot turn
// into 0 * Inf.
func cost(qps, eps, util, penalty float64) float64 {
	if eps == 0 || penalty == 0 {
		return util
	}
	return util + eps/qps*penalty
}

// periodMeans turns one period's sums into mean qps and cost. ok is false
// when the period cannot give a finite positive weight: no reports, a sum
// that overflowed to +Inf, a mean that underflowed to 0, or the tail of a
// report split by a concurrent swap (see Tracker.Update).
func periodMeans(n uint64, sumQPS, sumEPS, sumUtil, penalty float64) (qps, c float64, ok bool) {
	if n == 0 {
		return 0, 0, false
	}
	fn := float64(n)
	qps, eps, util := sumQPS/fn, sumEPS/fn, sumUtil/fn
	if !positive(qps) || !nonNegative(eps) || !positive(util) {
		return 0, 0, false
	}
	c = cost(qps, eps, util, penalty)
	if !positive(c) || !positive(qps/c) {
		return 0, 0, false
	}
	return qps, c, true
}
