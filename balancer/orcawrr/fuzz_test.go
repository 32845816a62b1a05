package orcawrr_test

import (
	"testing"
	"time"

	"github.com/pickwise/pickwise/balancer/orcawrr"
	"github.com/pickwise/pickwise/internal/testkit"
	"google.golang.org/grpc/balancer"
)

// FuzzParseConfig checks that every input is either rejected with an error
// that names the policy, or yields a config a balancer runs with: it picks,
// takes reports and updates its weights.
func FuzzParseConfig(f *testing.F) {
	for _, seed := range []string{
		`{}`, ``, `null`, `[]`, `{"enableOobLoadReport": true}`, `{"oobReportingPeriod": "1ms"}`,
		`{"blackoutPeriod": "0s", "weightExpirationPeriod": "1ns"}`, `{"weightUpdatePeriod": "1ns"}`,
		`{"weightUpdatePeriod": "87600h"}`, `{"errorUtilizationPenalty": 1e308}`, `{"errorUtilizationPenalty": -0.0}`,
		`{"weightHalfLife": "1ns"}`, `{"weightHalfLife": "1h"}`, `{"metricNamesForComputingUtilization": ["a", "b"]}`,
		`{"metricNamesForComputingUtilization": null}`, `{"slowStart": {"window": "1s"}}`, `{"slowStart": {"window": "-1s"}}`,
		`{"unknown": 1}`, `{"blackoutPeriod": "1s"}{}`, `{"oobReportingPeriod": "-1s"}`,
		`{"failurePenalty": {"enabled": false}}`, `{"failurePenalty": {"window": 1, "maxMultiplier": 1e6}}`, `{"ejection": {"enabled": false}}`,
		`{"failurePenalty": {"codes": ["UNAVAILABLE", "PERMISSION_DENIED"]}}`, `{"failurePenalty": {"codes": ["OK"]}}`, `{"failurePenalty": {"codes": []}}`,
		`{"failurePenalty": {"codes": ["NOPE", 14]}}`, `{"failurePenalty": {"enabled": false, "codes": ["x"]}}`,
	} {
		f.Add(seed)
	}
	as := testkit.Addrs(3)
	f.Fuzz(func(t *testing.T, in string) {
		if testkit.FuzzParse(t, orcawrr.Name, orcawrr.ParseConfig, in) == nil {
			return
		}
		h := testkit.NewHarness(t, orcawrr.Name, in)
		h.Start(as...)
		for i := 0; i < 30; i++ {
			_, done := h.Pick()
			if done != nil {
				done(balancer.DoneInfo{ServerLoad: report(float64(10+i), 0.5, 0)})
			}
			if i%10 == 9 {
				h.Clock.Advance(time.Second)
			}
		}
	})
}
