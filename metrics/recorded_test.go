package metrics_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	v3orcapb "github.com/cncf/xds/go/xds/data/orca/v3"
	_ "github.com/pickwise/pickwise/balancer/prequal"
	"github.com/pickwise/pickwise/balancer/ringhash"
	"github.com/pickwise/pickwise/internal/engine"
	"github.com/pickwise/pickwise/internal/testkit"
	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/codes"
	estats "google.golang.org/grpc/experimental/stats"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/status"
)

// TestEveryMetricIsRecorded drives each policy through what its metrics
// describe (held and failed calls, a slow-start newcomer, ORCA reports
// good, bad and missing, a subset that changes) and checks that every
// name metrics.Names lists was recorded at least once (a counter with a
// count above 0): a metric that is registered but never recorded would be
// an empty promise to users.
func TestEveryMetricIsRecorded(t *testing.T) {
	recorded := map[string]bool{}
	note := func(m *testkit.Metrics) {
		if err := m.Collect(); err != nil {
			t.Fatal(err)
		}
		for _, n := range allNames() {
			// A counter must have counted something; a gauge or a
			// histogram must have a sample.
			count := estats.DescriptorForMetric(n).Type == estats.MetricTypeIntCount
			for _, r := range m.Records(n) {
				if !count || r.Value > 0 {
					recorded[n] = true
				}
			}
		}
	}

	for _, p := range []string{"pickwise_p2c", "pickwise_peak_ewma", "pickwise_prequal"} {
		h := testkit.NewHarness(t, p, `{"slowStart": {"window": "10s"}}`)
		as := testkit.Addrs(4)
		h.Start(as[:3]...)
		if err := h.Update(testkit.Endpoints(as)...); err != nil {
			t.Fatal(err)
		}
		h.Ready(as[3]) // a newcomer: slow start
		_, held := h.Count(30, true)
		for i := 0; i < 200; i++ {
			a, done := h.Pick()
			var err error
			if a == as[0] {
				err = status.Error(codes.Unavailable, "black hole")
			}
			done(testkit.Outcome(err))
		}
		note(h.Metrics)
		testkit.Finish(held, nil)
		if err := h.Update(testkit.Endpoint(as[1], 0)); err != nil {
			t.Fatal(err)
		}
		h.Count(5, false) // one endpoint left: only_ready
		note(h.Metrics)
	}

	// pickwise_orca_wrr: no reports (fallback), good ones, bad ones, then
	// none for longer than the expiration period (stale).
	h := testkit.NewHarness(t, "pickwise_orca_wrr", `{"blackoutPeriod": "0s", "weightExpirationPeriod": "3s"}`)
	as := testkit.Addrs(3)
	h.Start(as...)
	serve := func(n int, load func(a string) *v3orcapb.OrcaLoadReport) {
		for i := 0; i < n; i++ {
			a, done := h.Pick()
			var sl any
			if r := load(a); r != nil {
				sl = r
			}
			done(balancer.DoneInfo{ServerLoad: sl})
		}
		h.Clock.Advance(time.Second)
	}
	none := func(string) *v3orcapb.OrcaLoadReport { return nil }
	good := func(string) *v3orcapb.OrcaLoadReport {
		return &v3orcapb.OrcaLoadReport{RpsFractional: 100, CpuUtilization: 0.5}
	}
	bad := func(string) *v3orcapb.OrcaLoadReport { return &v3orcapb.OrcaLoadReport{RpsFractional: -1} }
	serve(30, none)
	serve(30, good)
	serve(30, good)
	serve(30, bad)
	for i := 0; i < 5; i++ {
		serve(30, none)
	}
	note(h.Metrics)

	// pickwise_prequal: servers that answer probes and report on every
	// call, one that never answers (a failed probe), and one whose
	// requests in flight stand above the rest (hot).
	prober := testkit.NewProber()
	h = testkit.NewProbingHarness(t, "pickwise_prequal", `{"hotQuantile": 0.5}`, prober)
	as = testkit.Addrs(4)
	for i, a := range as[:3] {
		prober.Set(a, engine.LoadAnswer{RIF: uint32(1 + 20*i), Latency: 0.01})
	}
	h.Start(as...)
	for i := 0; i < 300; i++ {
		a, done := h.Pick()
		done(balancer.DoneInfo{BytesSent: true, BytesReceived: true, ServerLoad: &v3orcapb.OrcaLoadReport{
			NamedMetrics: map[string]float64{"pickwise.rif": float64(len(a) % 7), "pickwise.latency": 0.01},
		}})
		h.Clock.Advance(time.Millisecond)
	}
	note(h.Metrics)

	// pickwise_ring_hash: lazy, so keyless picks wake the endpoints one at
	// a time; then keyed calls held past bounded load's cap.
	h = testkit.NewHarness(t, "pickwise_ring_hash", `{"balanceFactor": 1.25}`)
	as = testkit.Addrs(4)
	h.StartLazy(as...)
	for i := 0; i < 40; i++ {
		res, err := h.CC.State().Picker.Pick(balancer.PickInfo{Ctx: ringhash.WithKey(context.Background(), fmt.Sprint("k", i%3))})
		if err != nil {
			t.Fatal(err)
		}
		defer res.Done(balancer.DoneInfo{})
	}
	note(h.Metrics)

	// Every engine policy: a black hole ejected, probed and readmitted
	// once it heals, and a retry placed away from its first attempt.
	for _, p := range []string{"pickwise_p2c", "pickwise_peak_ewma", "pickwise_orca_wrr", "pickwise_ring_hash", "pickwise_prequal"} {
		// pickwise_prequal's servers answer its load probes alike.
		prober := testkit.NewProber()
		as := testkit.Addrs(4)
		for _, a := range as {
			prober.Set(a, engine.LoadAnswer{RIF: 1, Latency: 0.002})
		}
		h := testkit.NewProbingHarness(t, p, `{}`, prober)
		h.Start(as...)
		c := &testkit.Caller{H: h, Every: 2 * time.Millisecond, Backend: func(a string, at time.Duration) error {
			if a == as[0] && at < 3*time.Second {
				return status.Error(codes.Unavailable, "black hole")
			}
			return nil
		}}
		c.Context = func(i int) context.Context { return ringhash.WithKey(context.Background(), fmt.Sprint("k", i%100)) }
		c.Run(5*time.Second, 5*time.Second)
		ctx := engine.WithAttempts(ringhash.WithKey(context.Background(), "retried"))
		for i := 0; i < 2; i++ {
			res, err := h.CC.State().Picker.Pick(balancer.PickInfo{Ctx: ctx})
			if err != nil {
				t.Fatal(err)
			}
			res.Done(testkit.Outcome(status.Error(codes.Unavailable, "attempt failed")))
		}
		note(h.Metrics)
	}

	// pickwise_subset over pickwise_p2c: a subset, then a scale-out that
	// changes it.
	cc := testkit.NewClientConn()
	sb := balancer.Get("pickwise_subset")
	cfg, err := sb.(balancer.ConfigParser).ParseConfig([]byte(`{"subsetSize": 2, "clientIndex": 0, "clientCount": 3}`))
	if err != nil {
		t.Fatal(err)
	}
	b := sb.Build(cc, balancer.BuildOptions{})
	defer b.Close()
	for _, n := range []int{6, 9} {
		if err := b.UpdateClientConnState(balancer.ClientConnState{
			ResolverState:  resolver.State{Endpoints: testkit.Endpoints(testkit.Addrs(n))},
			BalancerConfig: cfg,
		}); err != nil {
			t.Fatal(err)
		}
	}
	note(cc.Metrics)

	// pickwise_shadow: round_robin live, pickwise_p2c asked on every pick
	// and canaried on half of them.
	cc = testkit.NewClientConn()
	shb := balancer.Get("pickwise_shadow")
	cfg, err = shb.(balancer.ConfigParser).ParseConfig([]byte(`{"live": [{"round_robin": {}}], "candidate": [{"pickwise_p2c": {}}], "sampleRate": 1, "canaryPercent": 50}`))
	if err != nil {
		t.Fatal(err)
	}
	sh := shb.Build(cc, balancer.BuildOptions{})
	defer sh.Close()
	as = testkit.Addrs(3)
	if err := sh.UpdateClientConnState(balancer.ClientConnState{ResolverState: resolver.State{Endpoints: testkit.Endpoints(as)}, BalancerConfig: cfg}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := cc.SetReady(ctx, as...); err != nil {
		t.Fatal(err)
	}
	// Until both children are READY some picks queue; the calls below
	// are counted once they go out.
	if _, err := cc.WaitForPicks(ctx, 50, func(_ balancer.PickResult, err error) error { return err }); err != nil {
		t.Fatal(err)
	}
	note(cc.Metrics)

	var missing []string
	for _, n := range allNames() {
		if !recorded[n] {
			missing = append(missing, n)
		}
	}
	if len(missing) > 0 {
		t.Errorf("never recorded: %s", strings.Join(missing, ", "))
	}
}
