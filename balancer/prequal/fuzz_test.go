package prequal_test

import (
	"math"
	"testing"
	"time"

	"github.com/pickwise/pickwise/balancer/prequal"
	"github.com/pickwise/pickwise/internal/engine"
	"github.com/pickwise/pickwise/internal/testkit"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// FuzzParseConfig checks that every input is either rejected with an error
// naming the policy, or yields a config a balancer picks with.
func FuzzParseConfig(f *testing.F) {
	for _, seed := range []string{
		`{}`, ``, `null`, `{"poolSize": 1}`, `{"poolSize": 33}`, `{"poolSize": 2}`, `{"maxAge": "1ms"}`, `{"maxAge": "2m"}`,
		`{"reuseBudget": 0}`, `{"reuseBudget": 1001}`, `{"hotQuantile": 0}`, `{"hotQuantile": 1}`, `{"hotQuantile": 1.5}`,
		`{"minProbeRate": -0.1}`, `{"minProbeRate": 1}`, `{"probeTimeout": "0s"}`, `{"choiceCount": 1}`, `{"choiceCount": 11}`,
		`{"slowStart": {}}`, `{"failurePenalty": {"enabled": false}}`, `{"ejection": {"probeSuccesses": 1}}`, `{"x": 1}`, `[]`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, in string) {
		if testkit.FuzzParse(t, prequal.Name, prequal.ParseConfig, in) == nil {
			return
		}
		prober := testkit.NewProber()
		h := testkit.NewProbingHarness(t, prequal.Name, in, prober)
		as := testkit.Addrs(3)
		for i, a := range as {
			prober.Set(a, engine.LoadAnswer{RIF: uint32(i), Latency: 0.01})
		}
		h.Start(as...)
		for i := 0; i < 20; i++ {
			_, done := h.Pick()
			if i%3 == 0 {
				done(testkit.Outcome(status.Error(codes.Unavailable, "x")))
			} else {
				done(report(load{rif: float64(i), latency: 0.001 * float64(i)}))
			}
			h.Clock.Advance(time.Millisecond)
		}
	})
}

// FuzzLoadAnswer checks that whatever a server's answer or report says,
// however absurd (negative, NaN, infinite, huge), picks go on: every call
// is placed on an endpoint of the channel.
func FuzzLoadAnswer(f *testing.F) {
	f.Add(uint32(0), 0.0, 0.0, 0.0)
	f.Add(uint32(math.MaxUint32), math.Inf(1), math.NaN(), -1.0)
	f.Add(uint32(70000), 1e300, 1e-300, 5e9)
	f.Fuzz(func(t *testing.T, probeRIF uint32, probeLatency, reportRIF, reportLatency float64) {
		prober := testkit.NewProber()
		h := testkit.NewProbingHarness(t, prequal.Name, `{}`, prober)
		as := testkit.Addrs(3)
		for _, a := range as {
			prober.Set(a, engine.LoadAnswer{RIF: probeRIF, Latency: probeLatency})
		}
		h.Start(as...)
		for range 30 {
			a, done := h.Pick()
			if a == "" {
				t.Fatal("a call was placed on no endpoint")
			}
			done(report(load{rif: reportRIF, latency: reportLatency}))
			h.Clock.Advance(10 * time.Millisecond)
		}
	})
}
