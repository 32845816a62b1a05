package p2c_test

import (
	"context"
	"testing"

	"github.com/pickwise/pickwise/balancer/p2c"
	"github.com/pickwise/pickwise/internal/engine"
	"github.com/pickwise/pickwise/internal/testkit"
	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/resolver"
)

// FuzzParseConfig checks that every input is either rejected with an error
// that names the policy, or yields a config a balancer runs with.
func FuzzParseConfig(f *testing.F) {
	for _, seed := range []string{
		`{}`, ``, `null`, `[]`, `{"choiceCount": 2}`, `{"choiceCount": 1}`, `{"choiceCount": 11}`,
		`{"activeRequestBias": 0}`, `{"activeRequestBias": 2.5}`, `{"activeRequestBias": -1}`,
		`{"slowStart": {}}`, `{"slowStart": {"window": "1ms", "aggression": 0.01, "minWeightPercent": 0.001}}`,
		`{"slowStart": {"window": "87600h", "aggression": 1e300, "minWeightPercent": 100}}`,
		`{"failurePenalty": {"enabled": false}}`, `{"failurePenalty": {"window": 1, "maxMultiplier": 1e6, "halfLife": "100ms"}}`,
		`{"failurePenalty": {"maxMultiplier": 1, "halfLife": "1h"}}`, `{"choiceCount": 10, "activeRequestBias": 100}`,
		`{"unknown": true}`, `{"choiceCount": 2}{}`, `{"slowStart": null}`, `{"failurePenalty": null}`,
		`{"ejection": {"enabled": false}}`, `{"ejection": null}`, `{"ejection": {"threshold": 1, "minFailures": 1, "maxEjectionPercent": 100, "probeInterval": "1ms"}}`,
		`{"ejection": {"baseEjectionTime": "10ms", "maxEjectionTime": "24h", "probeSuccesses": 100}}`,
		`{"failurePenalty": {"codes": ["UNAVAILABLE", "PERMISSION_DENIED"]}}`, `{"failurePenalty": {"codes": ["OK"]}}`, `{"failurePenalty": {"codes": []}}`,
		`{"failurePenalty": {"codes": ["NOPE", 14]}}`, `{"failurePenalty": {"enabled": false, "codes": ["x"]}}`,
	} {
		f.Add(seed)
	}
	spec, _ := engine.Lookup(p2c.Name)
	as := addrs(3)
	f.Fuzz(func(t *testing.T, in string) {
		cfg := testkit.FuzzParse(t, p2c.Name, p2c.ParseConfig, in)
		if cfg == nil {
			return
		}
		cc := testkit.NewClientConn()
		b := spec.Build(cc, balancer.BuildOptions{}, engine.Options{Clock: testkit.NewFakeClock(), Rand: engine.NewSeededRand(7)})
		defer b.Close()
		if err := b.UpdateClientConnState(balancer.ClientConnState{
			ResolverState:  resolver.State{Endpoints: endpointsOf(as)},
			BalancerConfig: cfg,
		}); err != nil {
			t.Fatalf("config %s parsed but the balancer rejected it: %v", in, err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		if err := cc.SetReady(ctx, as...); err != nil {
			t.Fatal(err)
		}
		if err := cc.WaitForState(ctx, connectivity.Ready); err != nil {
			t.Fatal(err)
		}
		p := cc.State().Picker
		var pending []func(balancer.DoneInfo)
		for i := 0; i < 20; i++ {
			res, err := p.Pick(balancer.PickInfo{})
			if err != nil {
				t.Fatalf("config %s: Pick: %v", in, err)
			}
			pending = append(pending, res.Done)
		}
		finish(pending, nil)
	})
}
