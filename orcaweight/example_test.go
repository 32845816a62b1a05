package orcaweight_test

import (
	"fmt"
	"time"

	v3orcapb "github.com/cncf/xds/go/xds/data/orca/v3"
	"github.com/pickwise/pickwise/orcaweight"
)

// One endpoint's reports becoming a weight: recorded as they arrive,
// folded into the smoothed weight on the policy's update timer, and usable
// once the endpoint has reported for the blackout period.
func ExampleTracker() {
	g := orcaweight.NewGroup(orcaweight.Config{
		BlackoutPeriod:          10 * time.Second,
		WeightExpirationPeriod:  3 * time.Minute,
		ErrorUtilizationPenalty: 1,
		HalfLife:                10 * time.Second,
	})
	t := g.NewTracker()
	start := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC) // the policy's clock

	// 200 queries per second at 50% utilization, no errors: weight 400.
	report := &v3orcapb.OrcaLoadReport{RpsFractional: 200, ApplicationUtilization: 0.5}
	for _, at := range []time.Duration{0, 5 * time.Second, 10 * time.Second} {
		t.Record(report)
		w, status := t.Update(start.Add(at))
		fmt.Printf("after %v: weight %.0f, %v\n", at, w, status)
	}

	// Errors are charged as utilization: with 10% of the calls failing the
	// cost is 0.5 + 0.1, a weight of 333 for this period, and ten seconds
	// (one half-life) take the smoothed weight halfway there.
	t.Record(&v3orcapb.OrcaLoadReport{RpsFractional: 200, Eps: 20, ApplicationUtilization: 0.5})
	w, status := t.Update(start.Add(20 * time.Second))
	fmt.Printf("after 20s, with errors: weight %.0f, %v\n", w, status)

	// A report that cannot give a weight (load, but no utilization) is
	// rejected and counted.
	fmt.Println("recorded:", t.Record(&v3orcapb.OrcaLoadReport{RpsFractional: 200}), "bad reports:", g.BadReports())

	// No report for WeightExpirationPeriod: the weight goes stale.
	w, status = t.Update(start.Add(20*time.Second + 3*time.Minute))
	fmt.Printf("3m later: weight %.0f, %v\n", w, status)
	// Output:
	// after 0s: weight 0, Blackout
	// after 5s: weight 0, Blackout
	// after 10s: weight 400, Usable
	// after 20s, with errors: weight 364, Usable
	// recorded: false bad reports: 1
	// 3m later: weight 0, Stale
}

// The median of the usable weights for the endpoints that have none yet
// (a newcomer in its blackout, an endpoint whose reports stopped), and
// the bound it sets on the others.
func ExampleFillMedian() {
	weights := []float64{100, 0, 300, 200, 0}
	usable := []bool{true, false, true, true, false}
	n := orcaweight.FillMedian(weights, usable)
	fmt.Println(n, "usable:", weights)

	// No weight counts for more than MaxMedianMultiple times the median
	// (here 250), however much a backend reports.
	weights = []float64{100, 1e305, 200, 300}
	n = orcaweight.FillMedian(weights, []bool{true, true, true, true})
	fmt.Println(n, "usable:", weights)

	// With fewer than two usable weights, every endpoint gets the same:
	// plain round robin.
	weights = []float64{100, 0, 0}
	n = orcaweight.FillMedian(weights, []bool{true, false, false})
	fmt.Println(n, "usable:", weights)
	// Output:
	// 3 usable: [100 200 300 200 200]
	// 4 usable: [100 2500 200 300]
	// 1 usable: [1 1 1]
}
