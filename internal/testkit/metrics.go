package testkit

import "github.com/pickwise/pickwise/internal/fakecc"

// Metrics is the metrics recorder a ClientConn reports to, also usable as
// a channel's stats.Handler. It lives in package fakecc beside the fake
// ClientConn; the alias keeps the tests' spelling.
type Metrics = fakecc.Metrics

// Record is one value a Metrics recorded, with its labels by name.
type Record = fakecc.Record

// NewMetrics returns an empty recorder.
func NewMetrics() *Metrics { return fakecc.NewMetrics() }

// PicksByReason collects, as a sink would, and returns the totals of
// pickwise.<policy>.picks so far by their pickwise.reason label.
func (h *Harness) PicksByReason(policy string) map[string]float64 {
	h.T.Helper()
	if err := h.Metrics.Collect(); err != nil {
		h.T.Fatalf("Collect: %v", err)
	}
	out := map[string]float64{}
	for _, r := range h.Metrics.Records("pickwise." + policy + ".picks") {
		out[r.Labels["pickwise.reason"]] += r.Value
	}
	return out
}
