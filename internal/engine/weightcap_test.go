package engine_test

import (
	"math"
	"testing"
	"time"

	v3orcapb "github.com/cncf/xds/go/xds/data/orca/v3"
	"github.com/pickwise/pickwise/internal/testkit"
	"github.com/pickwise/pickwise/orcaweight"
	"google.golang.org/grpc/balancer"
)

// TestAbsurdWeightShareIsBounded runs pickwise_orca_wrr over ten
// endpoints, one of which reports a qps of 1e305 (a finite, positive
// weight, so nothing upstream rejects it), and checks that the weights
// the engine hands the picker hold it to the share
// orcaweight.MaxMedianMultiple documents: 10/19 when the other nine weigh
// the same (it drew 99% before the bound), and no more than
// 10/(10+ceil(n/2)-1) when they do not.
func TestAbsurdWeightShareIsBounded(t *testing.T) {
	m := float64(orcaweight.MaxMedianMultiple)
	for _, tc := range []struct {
		name      string
		utils     []float64 // the other nine's utilization at 100 qps
		wantShare float64   // the absurd one's, exactly as the weights give it
	}{
		{"nine equal", []float64{0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5}, m / (m + 9)},
		// Weights 100..900: the median of the ten is 550 (the mean of
		// 500 and 600), so the absurd one counts as 5,500 against 4,500.
		{"nine spread", []float64{1, 1.0 / 2, 1.0 / 3, 1.0 / 4, 1.0 / 5, 1.0 / 6, 1.0 / 7, 1.0 / 8, 1.0 / 9}, 5500.0 / 10000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := testkit.NewHarness(t, "pickwise_orca_wrr", `{"blackoutPeriod": "0s", "failurePenalty": {"enabled": false}}`)
			as := testkit.Addrs(10)
			h.Start(as...)
			reports := map[string]*v3orcapb.OrcaLoadReport{as[0]: {RpsFractional: 1e305, CpuUtilization: 0.5}}
			for i, u := range tc.utils {
				reports[as[i+1]] = &v3orcapb.OrcaLoadReport{RpsFractional: 100, CpuUtilization: u}
			}
			var got map[string]int
			const picks = 9500 // enough calls that the smooth order's shares are exact to 0.001
			for range 3 {
				got = map[string]int{}
				for range picks {
					a, done := h.Pick()
					got[a]++
					if done != nil {
						done(balancer.DoneInfo{ServerLoad: reports[a]})
					}
				}
				h.Clock.Advance(time.Second) // a weight update folds the reports in
			}
			share := float64(got[as[0]]) / picks
			if math.Abs(share-tc.wantShare) > 0.01 {
				t.Errorf("the absurd reporter's share %.3f, want %.3f ± 0.01", share, tc.wantShare)
			}
			if worst := m / (m + 4); share > worst {
				t.Errorf("the absurd reporter's share %.3f, above the documented worst case %.3f for ten", share, worst)
			}
		})
	}
}
