package orcawrr_test

// The pattern of grpc-go's own end-to-end tests of weighted_round_robin,
// run against pickwise_orca_wrr with its defaults otherwise (slow start
// on): a channel that is READY on one backend learns of a second, both
// report through grpc-go's ORCA server side (utilization 1.0 and 0.1 at
// qps 10, so weights 10 and 100), and every round of 100 calls must split
// 1:10 within two calls. A third test adds a cold backend to a channel
// that has carried traffic: it ramps, and the first two keep their 10:1.

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/pickwise/pickwise/balancer/orcawrr"
	"github.com/pickwise/pickwise/internal/fleet"
	"github.com/pickwise/pickwise/internal/pause"
	"github.com/pickwise/pickwise/interop/server"
	"google.golang.org/grpc"
	_ "google.golang.org/grpc/balancer/weightedroundrobin"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/orca"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// tenOneBackend is a backend whose every report, per call or on its ORCA
// stream, says utilization util at qps 10, through grpc-go's orca package.
type tenOneBackend struct {
	name    string
	util    float64
	latency time.Duration
}

func (b *tenOneBackend) call(ctx context.Context) (*wrapperspb.StringValue, error) {
	if r := orca.CallMetricsRecorderFromContext(ctx); r != nil {
		r.SetApplicationUtilization(b.util)
		r.SetQPS(10)
	}
	_ = grpc.SetTrailer(ctx, metadata.Pairs(server.TrailerBackend, b.name))
	if b.latency > 0 {
		if err := pause.For(ctx, b.latency); err != nil {
			return nil, err
		}
	}
	return wrapperspb.String(b.name), nil
}

var tenOneCallDesc = grpc.ServiceDesc{
	ServiceName: server.BackendService,
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{{
		MethodName: "Call",
		Handler: func(srv any, ctx context.Context, dec func(any) error, intercept grpc.UnaryServerInterceptor) (any, error) {
			req := new(wrapperspb.StringValue)
			if err := dec(req); err != nil {
				return nil, err
			}
			call := func(ctx context.Context, _ any) (any, error) { return srv.(*tenOneBackend).call(ctx) }
			if intercept == nil {
				return call(ctx, req)
			}
			return intercept(ctx, req, &grpc.UnaryServerInfo{Server: srv, FullMethod: server.CallMethod}, call)
		},
	}},
}

// startTenOne starts b, reporting per call or out of band, and returns its
// address.
func startTenOne(t *testing.T, b *tenOneBackend, outOfBand bool) string {
	t.Helper()
	var opts []grpc.ServerOption
	if !outOfBand {
		opts = append(opts, orca.CallMetricsServerOption(nil))
	}
	srv := grpc.NewServer(opts...)
	srv.RegisterService(&tenOneCallDesc, b)
	if outOfBand {
		// grpc-go's service sends a report as a stream opens, and the
		// numbers never change: that first report is the weight.
		smr := orca.NewServerMetricsRecorder()
		smr.SetApplicationUtilization(b.util)
		smr.SetQPS(10)
		if err := orca.Register(srv, orca.ServiceOptions{ServerMetricsProvider: smr}); err != nil {
			t.Fatal(err)
		}
	}
	return serveT(t, srv)
}

// tenOneConfig is grpc-go's test config: only the periods the pattern
// needs, every other field at pickwise_orca_wrr's default.
func tenOneConfig(policy string, outOfBand bool, extra string) string {
	cfg := extra + fmt.Sprintf(`"enableOobLoadReport": %t, "oobReportingPeriod": "0.005s", "blackoutPeriod": "0s", "weightExpirationPeriod": "60s", "weightUpdatePeriod": "0.05s", "errorUtilizationPenalty": 0`, outOfBand)
	if policy == orcawrr.Name {
		cfg += `, "weightHalfLife": "0s"`
	}
	return fmt.Sprintf(`{"loadBalancingConfig":[{%q:{%s}}]}`, policy, cfg)
}

// tenOneRound makes n calls one after the other and counts them per
// backend.
func tenOneRound(t *testing.T, ctx context.Context, c *fleet.Client, n int) map[string]int {
	t.Helper()
	got := map[string]int{}
	for range n {
		b, err := c.Call(ctx)
		if err != nil {
			t.Fatalf("call: %v", err)
		}
		got[b]++
	}
	return got
}

// reachAll calls until every name has answered once.
func reachAll(t *testing.T, ctx context.Context, c *fleet.Client, names ...string) {
	t.Helper()
	seen := map[string]bool{}
	for len(seen) < len(names) {
		b, err := c.Call(ctx)
		if err != nil {
			t.Fatalf("call: %v", err)
		}
		seen[b] = true
	}
}

// tenOneStart is the pattern's channel: READY on the loaded backend
// first, then told of the idle one; it returns once both have answered.
func tenOneStart(t *testing.T, ctx context.Context, policy string, outOfBand bool, extra string) (*fleet.Client, []string) {
	t.Helper()
	loaded := startTenOne(t, &tenOneBackend{name: "loaded", util: 1.0}, outOfBand)
	idle := startTenOne(t, &tenOneBackend{name: "idle", util: 0.1}, outOfBand)
	c := fleet.DialT(t, []string{loaded}, tenOneConfig(policy, outOfBand, extra))
	c.Conn.Connect()
	fleet.WaitFor(t, ctx, "READY on one backend", func() bool { return c.Conn.GetState() == connectivity.Ready })
	addrs := []string{loaded, idle}
	c.SetAddrs(addrs)
	reachAll(t, ctx, c, "loaded", "idle")
	return c, addrs
}

// tenOneSplit reports whether a round of 100 calls split 9:91 within two
// calls.
func tenOneSplit(got map[string]int) bool {
	return got["loaded"] >= 9-2 && got["loaded"] <= 9+2 && got["idle"] >= 91-2 && got["idle"] <= 91+2
}

// checkTenOne waits for a round of 100 calls that splits 9:91 (weights
// are read once a weight update period, which the policy raises to
// 100ms), then makes rounds more, 5ms apart, and fails for any that does
// not.
func checkTenOne(t *testing.T, ctx context.Context, c *fleet.Client, rounds int) {
	t.Helper()
	settle := fleet.Context(t, 10*time.Second)
	for got := tenOneRound(t, ctx, c, 100); !tenOneSplit(got); got = tenOneRound(t, ctx, c, 100) {
		if settle.Err() != nil {
			t.Fatalf("no round of 100 calls split 9:91 within 10s; the last: %v", got)
		}
	}
	for r := range rounds {
		_ = pause.For(ctx, 5*time.Millisecond)
		if got := tenOneRound(t, ctx, c, 100); !tenOneSplit(got) {
			t.Errorf("round %d: %v, want loaded 9±2, idle 91±2", r, got)
		}
	}
}

// TestEndToEndTenToOneFromChannelStart runs the pattern with the
// defaults, with ramps that run by time alone (so that answers cannot end
// one early and hide it), and under grpc's weighted_round_robin.
func TestEndToEndTenToOneFromChannelStart(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, policy, extra string }{
		{"defaults", orcawrr.Name, ""},
		{"timeOnly", orcawrr.Name, `"slowStart": {"timeOnly": true}, `},
		{"weighted_round_robin", "weighted_round_robin", ""},
	} {
		for _, oob := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/outOfBand=%t", tc.name, oob), func(t *testing.T) {
				ctx := fleet.Context(t, 30*time.Second)
				c, _ := tenOneStart(t, ctx, tc.policy, oob, tc.extra)
				checkTenOne(t, ctx, c, 10)
			})
		}
	}
}

// TestEndToEndTenToOneNewcomerRamps adds a third backend to a channel that
// has placed calls, reporting as the idle one does: it ramps, getting far
// less than its full share, 100/210, while the first two keep their 10:1
// between them. Its ramp is long (300s), so that its share is a tenth of
// its weight's however slow the machine. Otherwise with the defaults, the
// newcomer is a cold one, answering 20ms slower than the others, so that
// its answers do not end its ramp; with timeOnly it answers as fast as
// they do and its ramp runs by time.
func TestEndToEndTenToOneNewcomerRamps(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		extra   string
		latency time.Duration
	}{
		{"defaults", `"slowStart": {"window": "300s"}, `, 20 * time.Millisecond},
		{"timeOnly", `"slowStart": {"window": "300s", "timeOnly": true}, `, 0},
	} {
		for _, oob := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/outOfBand=%t", tc.name, oob), func(t *testing.T) {
				ctx := fleet.Context(t, 30*time.Second)
				c, addrs := tenOneStart(t, ctx, orcawrr.Name, oob, tc.extra)
				checkTenOne(t, ctx, c, 3)
				newcomer := startTenOne(t, &tenOneBackend{name: "newcomer", util: 0.1, latency: tc.latency}, oob)
				c.SetAddrs(append(addrs, newcomer))
				fleet.WaitFor(t, ctx, "the newcomer placed", func() bool {
					return tenOneRound(t, ctx, c, 10)["newcomer"] > 0
				})
				total := map[string]int{}
				for range 5 {
					for k, v := range tenOneRound(t, ctx, c, 200) {
						total[k] += v
					}
				}
				n := total["loaded"] + total["idle"] + total["newcomer"]
				// At a tenth of its weight: 10/120 of the calls.
				if share := float64(total["newcomer"]) / float64(n); share > 0.2 {
					t.Errorf("newcomer's share %.2f in its first seconds, want about 0.08 and well under its full 0.48: it did not ramp (%v)", share, total)
				}
				if r := float64(total["idle"]) / float64(max(total["loaded"], 1)); r < 8 || r > 12.5 {
					t.Errorf("idle:loaded = %.1f while the newcomer ramps, want 10 (%v)", r, total)
				}
			})
		}
	}
}
