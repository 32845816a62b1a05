package main

import (
	"testing"

	"google.golang.org/grpc"

	"github.com/pickwise/pickwise/examples/xds/internal/xdsenv"
	"github.com/pickwise/pickwise/internal/testkit"
)

// TestXDSMetrics checks each policy's metrics on a real channel configured
// by xDS: picks are counted with the channel's target, and the gauges see
// the endpoints. Named directly by the cluster, a policy balances across
// localities and has none to label with; wrapped in WrrLocality, each
// locality's instance labels its metrics with it.
func TestXDSMetrics(t *testing.T) {
	for _, perLocality := range []bool{false, true} {
		t.Run(map[bool]string{false: "cluster", true: "wrr_locality"}[perLocality], func(t *testing.T) {
			testXDSMetrics(t, perLocality)
		})
	}
}

func testXDSMetrics(t *testing.T, perLocality bool) {
	for _, p := range []struct{ name, policy, config, short string }{
		{"metrics-p2c", "pickwise_p2c", `{}`, "p2c"},
		{"metrics-peakewma", "pickwise_peak_ewma", `{}`, "peak_ewma"},
		{"metrics-orcawrr", "pickwise_orca_wrr", `{"blackoutPeriod": "0s", "weightUpdatePeriod": "100ms"}`, "orca_wrr"},
		{"metrics-ringhash", "pickwise_ring_hash", `{}`, "ring_hash"},
		// The subset's child is pickwise_p2c: its picks are p2c's.
		{"metrics-subset", "pickwise_subset", `{"subsetSize": 2}`, "p2c"},
	} {
		if perLocality && p.short == "ring_hash" {
			// A hash ring spans the cluster: per locality it would map a
			// key to a different endpoint in each. Like grpc's ring_hash,
			// ours connects only where picks lead, and a parent that
			// holds calls while its child is IDLE never lets one lead.
			continue
		}
		t.Run(p.name, func(t *testing.T) {
			m := testkit.NewMetrics()
			name := p.name
			if perLocality {
				name += "-per-locality"
			}
			svc := xdsenv.Service{Name: name, Policy: p.policy, Config: p.config, Endpoints: endpoints(0, 0, 0), PerLocality: perLocality}
			conn := dial(t, svc, grpc.WithStatsHandler(m))
			ctxFor := randomKey
			if p.short != "ring_hash" {
				ctxFor = nil
			}
			drive(t, conn, 200, 4, ctxFor)
			if err := m.Collect(); err != nil {
				t.Fatal(err)
			}
			picks := m.Records("pickwise." + p.short + ".picks")
			total := 0.0
			for _, r := range picks {
				total += r.Value
			}
			if total != 200 {
				t.Fatalf("pickwise.%s.picks = %v, want 200", p.short, total)
			}
			l := picks[0].Labels
			t.Logf("%s: picks labels %v", p.policy, l)
			if l["grpc.target"] != "xds:///"+name {
				t.Errorf("grpc.target = %q, want xds:///%s", l["grpc.target"], name)
			}
			if loc := l["grpc.lb.locality"]; (loc != "") != perLocality {
				t.Errorf("grpc.lb.locality = %q; want it set exactly when the policy runs per locality", loc)
			}
			ready, ok := m.Last("pickwise." + p.short + ".endpoints_ready")
			want := 3.0
			if p.policy == "pickwise_subset" {
				want = 2
				if size, _ := m.Last("pickwise.subset.size"); size != 2 {
					t.Errorf("pickwise.subset.size = %v, want 2", size)
				}
			}
			if !ok || ready != want {
				t.Errorf("endpoints_ready = %v (recorded %v), want %v", ready, ok, want)
			}
		})
	}
}
