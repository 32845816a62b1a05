package peakewma_test

import (
	"testing"

	"github.com/pickwise/pickwise/balancer/peakewma"
	"github.com/pickwise/pickwise/internal/testkit"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// FuzzParseConfig checks that every input is either rejected with an error
// naming the policy, or yields a config a balancer picks with.
func FuzzParseConfig(f *testing.F) {
	for _, seed := range []string{
		`{}`, ``, `null`, `{"choiceCount": 1}`, `{"choiceCount": 11}`, `{"decayTime": "10ms"}`, `{"decayTime": "1h"}`,
		`{"defaultRtt": "1us"}`, `{"defaultRtt": "1m"}`, `{"slowStart": {}}`, `{"failurePenalty": {"enabled": false}}`, `{"ejection": {"probeSuccesses": 1}}`,
		`{"decayTime": 5}`, `{"x": 1}`, `[]`,
		`{"failurePenalty": {"codes": ["UNAVAILABLE", "PERMISSION_DENIED"]}}`, `{"failurePenalty": {"codes": ["OK"]}}`, `{"failurePenalty": {"codes": []}}`,
		`{"failurePenalty": {"codes": ["NOPE", 14]}}`, `{"failurePenalty": {"enabled": false, "codes": ["x"]}}`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, in string) {
		if testkit.FuzzParse(t, peakewma.Name, peakewma.ParseConfig, in) == nil {
			return
		}
		h := testkit.NewHarness(t, peakewma.Name, in)
		as := testkit.Addrs(3)
		h.Start(as...)
		for i := 0; i < 20; i++ {
			_, done := h.Pick()
			if i%3 == 0 {
				done(testkit.Outcome(status.Error(codes.Unavailable, "x")))
			} else {
				done(testkit.Outcome(nil))
			}
		}
	})
}
