package orcawrr_test

// End-to-end tests: real gRPC channels over loopback to interop/server
// backends that report their load through grpc-go's own ORCA server side
// (per-call trailers and the OpenRcaService stream), with
// pickwise_orca_wrr selected by a service config. Each backend is rated for
// some calls per second and reports utilization = served qps / rated qps,
// so the weight the policy computes, qps / utilization, is its rating
// whatever share of the traffic it gets: the shares must settle at the
// rating shares.
//
// Tolerances are wide enough for a loaded two-core machine under -race;
// nothing asserts how fast a call is.
//
// Under -short the periods that only set how long the test waits (the
// blackout, the expiration) are shorter, and the out-of-band test uses
// e2eFastOOBBackends; every share and tolerance is the same.

import (
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	v3orcapb "github.com/cncf/xds/go/xds/data/orca/v3"
	v3orcaservicepb "github.com/cncf/xds/go/xds/service/orca/v3"
	"github.com/pickwise/pickwise/balancer/orcawrr"
	"github.com/pickwise/pickwise/internal/engine"
	"github.com/pickwise/pickwise/internal/fleet"
	"github.com/pickwise/pickwise/internal/pause"
	"github.com/pickwise/pickwise/interop/server"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// e2eScale is a test's setting: full in the full run, short under -short.
func e2eScale[T any](full, short T) T {
	if testing.Short() {
		return short
	}
	return full
}

// e2eBackends starts one backend per rating, answering in 1ms and
// reporting per call or out of band.
func e2eBackends(t *testing.T, ratings []float64, outOfBand bool) ([]*server.Server, []string) {
	t.Helper()
	var ss []*server.Server
	var addrs []string
	for i, r := range ratings {
		b := server.Behavior{Latency: server.Duration(time.Millisecond)}
		b.ORCA = server.ORCAConfig{PerCall: !outOfBand, OutOfBand: outOfBand, Utilization: server.UtilizationRate, RatedQPS: r}
		s, err := server.New(fmt.Sprintf("backend-%d", i), b)
		if err != nil {
			t.Fatal(err)
		}
		addr, err := s.Start("127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Stop)
		ss = append(ss, s)
		addrs = append(addrs, addr)
	}
	return ss, addrs
}

// e2eOOBBackends starts one backend per rating that reports out of band
// only, through interop/server and so through grpc-go's ORCA service.
func e2eOOBBackends(t *testing.T, ratings []float64) []string {
	_, addrs := e2eBackends(t, ratings, true)
	return addrs
}

// e2eFastOOBBackends starts one e2eFastOOB backend per rating.
//
// grpc-go's ORCA service sends a report when a stream opens and then at
// most every 30s; only a grpc-internal hook lowers that floor, so
// interop/server, which uses it, cannot report faster. These backends
// serve the same Call, answering in 1ms like e2eBackends', and their own
// OpenRcaService, which sends at the interval the client asks for: the
// client's side of the out-of-band path (stream, listener, weights,
// scheduler) runs as with any server, in seconds rather than 30.
func e2eFastOOBBackends(t *testing.T, ratings []float64) []string {
	t.Helper()
	var addrs []string
	for i, r := range ratings {
		b := &e2eFastOOB{name: fmt.Sprintf("backend-%d", i), rated: r}
		srv := grpc.NewServer(grpc.WaitForHandlers(true))
		srv.RegisterService(&e2eFastOOBCallDesc, b)
		v3orcaservicepb.RegisterOpenRcaServiceServer(srv, b)
		addrs = append(addrs, serveT(t, srv))
	}
	return addrs
}

// serveT serves srv on a port of 127.0.0.1 until the test ends, and
// returns its address.
func serveT(t *testing.T, srv *grpc.Server) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln)
	}()
	t.Cleanup(func() {
		srv.Stop()
		<-done
	})
	return ln.Addr().String()
}

// e2eFastOOB is one backend of e2eFastOOBBackends. Its reports carry what
// interop/server's "rate" utilization reports: the calls completed per
// second, here since the stream's previous report, and that rate over the
// rated qps, so that qps / utilization is the rating.
type e2eFastOOB struct {
	v3orcaservicepb.UnimplementedOpenRcaServiceServer
	name  string
	rated float64
	done  atomic.Int64 // calls completed
}

// e2eFastOOBCallDesc serves interop/server's Call method, so that
// server.Call reaches an e2eFastOOB as it reaches a server.Server.
var e2eFastOOBCallDesc = grpc.ServiceDesc{
	ServiceName: server.BackendService,
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{{
		MethodName: "Call",
		Handler: func(srv any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
			if err := dec(new(wrapperspb.StringValue)); err != nil {
				return nil, err
			}
			return srv.(*e2eFastOOB).call(ctx)
		},
	}},
}

func (b *e2eFastOOB) call(ctx context.Context) (*wrapperspb.StringValue, error) {
	_ = grpc.SetTrailer(ctx, metadata.Pairs(server.TrailerBackend, b.name))
	if err := pause.For(ctx, time.Millisecond); err != nil {
		return nil, err
	}
	b.done.Add(1)
	return wrapperspb.String(b.name), nil
}

// StreamCoreMetrics sends a report at once, as grpc-go's service does,
// and then one every interval the request asks for (1s if it asks for
// none, never under 10ms). The first report has no rate to tell of.
func (b *e2eFastOOB) StreamCoreMetrics(req *v3orcaservicepb.OrcaLoadReportRequest, stream grpc.ServerStreamingServer[v3orcapb.OrcaLoadReport]) error {
	every := time.Second
	if req.GetReportInterval() != nil {
		every = max(req.GetReportInterval().AsDuration(), 10*time.Millisecond)
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	lastN, lastT := b.done.Load(), time.Now()
	for first := true; ; first = false {
		var qps float64
		if n, now := b.done.Load(), time.Now(); !first {
			qps = float64(n-lastN) / now.Sub(lastT).Seconds()
			lastN, lastT = n, now
		}
		if err := stream.Send(&v3orcapb.OrcaLoadReport{CpuUtilization: qps / b.rated, RpsFractional: qps}); err != nil {
			return err
		}
		select {
		case <-stream.Context().Done():
			return nil
		case <-tick.C:
		}
	}
}

// e2eDial opens a pickwise_orca_wrr channel to addrs with config.
func e2eDial(t *testing.T, addrs []string, config string) *grpc.ClientConn {
	t.Helper()
	c := fleet.DialT(t, addrs, fmt.Sprintf(`{"loadBalancingConfig":[{%q:%s}]}`, orcawrr.Name, config))
	return c.Conn
}

// e2eCalls makes n calls from 4 goroutines and counts them per backend.
func e2eCalls(t *testing.T, ctx context.Context, conn *grpc.ClientConn, n int) map[string]int {
	t.Helper()
	var mu sync.Mutex
	got := map[string]int{}
	var wg sync.WaitGroup
	per := n / 4
	for w := 0; w < 4; w++ {
		wg.Go(func() {
			for i := 0; i < per && ctx.Err() == nil; i++ {
				b, err := server.Call(ctx, conn, "k")
				if err != nil {
					t.Errorf("call: %v", err)
					return
				}
				mu.Lock()
				got[b]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return got
}

// e2eShares is the share of each backend-i in got.
func e2eShares(got map[string]int, n int) []float64 {
	total := 0
	for _, c := range got {
		total += c
	}
	out := make([]float64, n)
	for i := range out {
		out[i] = float64(got[fmt.Sprintf("backend-%d", i)]) / float64(max(total, 1))
	}
	return out
}

// e2eWithin reports whether every share is within tol of want.
func e2eWithin(got, want []float64, tol float64) bool {
	for i := range want {
		if d := got[i] - want[i]; d > tol || d < -tol {
			return false
		}
	}
	return true
}

// e2eSettle drives batches of calls until the shares are within tol of
// want for two batches in a row, and returns the last batch's shares; it
// fails the test if ctx ends first.
func e2eSettle(t *testing.T, ctx context.Context, conn *grpc.ClientConn, batch int, want []float64, tol float64, what string) []float64 {
	t.Helper()
	inARow := 0
	var last []float64
	for inARow < 2 {
		if ctx.Err() != nil {
			t.Fatalf("%s: shares %.3f never settled within ±%.2f of %.3f", what, last, tol, want)
		}
		last = e2eShares(e2eCalls(t, ctx, conn, batch), len(want))
		if e2eWithin(last, want, tol) {
			inARow++
		} else {
			inARow = 0
		}
	}
	t.Logf("%s: shares %.3f (want %.3f)", what, last, want)
	return last
}

// e2eWeightStatus is the status of the reported weight that a
// pickwise_orca_wrr balancer keeps for the endpoint at addr ("Usable",
// "Blackout", "NoReports", "Stale"), as the admin page shows it; "" while
// no balancer has it. Every test's backends have ports of their own.
func e2eWeightStatus(addr string) string {
	for _, b := range engine.Inspect(time.Now()) {
		if b.Policy != orcawrr.Name {
			continue
		}
		for _, e := range b.Endpoints {
			if e.Address == addr {
				return e.WeightStatus
			}
		}
	}
	return ""
}

// e2eInUse reports whether the weights of every addr are in use.
func e2eInUse(addrs ...string) bool {
	for _, a := range addrs {
		if e2eWeightStatus(a) != "Usable" {
			return false
		}
	}
	return true
}

// e2eCallUntil drives batches of n calls until cond holds, and fails the
// test if ctx ends first. Shares say what the weights do only once the
// weights are in use, which takes reports, and so calls, and the
// blackout: before that every weight is the same, and the calls in
// flight alone move the shares (engine.WeightedRR), which a tolerance
// cannot tell from the split a phase waits for.
func e2eCallUntil(t *testing.T, ctx context.Context, conn *grpc.ClientConn, n int, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		if ctx.Err() != nil {
			t.Fatalf("timed out waiting for %s", what)
		}
		e2eCalls(t, ctx, conn, n)
	}
}

// shares of capacity for ratings.
func capacityShares(ratings []float64) []float64 {
	sum := 0.0
	for _, r := range ratings {
		sum += r
	}
	out := make([]float64, len(ratings))
	for i, r := range ratings {
		out[i] = r / sum
	}
	return out
}

func TestEndToEndPerCallSharesFollowCapacity(t *testing.T) {
	t.Parallel()
	ratings := []float64{1000, 600, 600}
	_, addrs := e2eBackends(t, ratings, false)
	conn := e2eDial(t, addrs, `{"blackoutPeriod": "1s", "weightUpdatePeriod": "100ms", "weightHalfLife": "1s"}`)
	ctx := fleet.Context(t, 60*time.Second)
	e2eCallUntil(t, ctx, conn, 100, "the weights in use", func() bool { return e2eInUse(addrs...) })
	e2eSettle(t, ctx, conn, 800, capacityShares(ratings), 0.05, "per-call reports")
}

func TestEndToEndOutOfBandSharesFollowCapacity(t *testing.T) {
	t.Parallel()
	// grpc-go's ORCA service sends a report when the stream opens and then
	// at most every 30s, so the full run takes about that long: the first
	// report, sent before any traffic, has no load to tell of. The short
	// run's backends send one every oobReportingPeriod.
	ratings := []float64{1000, 600}
	addrs := e2eScale(e2eOOBBackends, e2eFastOOBBackends)(t, ratings)
	conn := e2eDial(t, addrs, `{"enableOobLoadReport": true, "oobReportingPeriod": "1s", "blackoutPeriod": "0s", "weightUpdatePeriod": "100ms"}`)
	ctx := fleet.Context(t, 120*time.Second)
	e2eCallUntil(t, ctx, conn, 100, "the weights in use", func() bool { return e2eInUse(addrs...) })
	e2eSettle(t, ctx, conn, 800, capacityShares(ratings), 0.05, "out-of-band reports")
}

func TestEndToEndSilentThenReporting(t *testing.T) {
	t.Parallel()
	ratings := []float64{1000, 600, 300}
	ss, addrs := e2eBackends(t, ratings, false)
	// The third starts silent: it gets the median of the others' weights,
	// (1000+600)/2 = 800.
	silent := ss[2].Behavior()
	silent.ORCA.PerCall = false
	if err := ss[2].SetBehavior(silent); err != nil {
		t.Fatal(err)
	}
	// How long the two periods are sets only how long the test waits for
	// them: the short run's 2s blackout and 1s expiration are still ten
	// weight updates and more.
	blackout := e2eScale(5*time.Second, 2*time.Second)
	expiration := e2eScale(2*time.Second, time.Second)
	// What is measured is the weights, so picks follow them alone: the
	// comparison of calls in flight, on only with the failure penalty,
	// moves a few percent of the calls where each endpoint holds about
	// one, as here, by whether that one is more than its baseline latency
	// makes it expected to hold (engine.WeightedRR). The tests above keep
	// it.
	conn := e2eDial(t, addrs, fmt.Sprintf(`{"blackoutPeriod": %q, "weightExpirationPeriod": %q, "weightUpdatePeriod": "100ms", "weightHalfLife": "0s", "failurePenalty": {"enabled": false}}`, blackout, expiration))
	ctx := fleet.Context(t, 90*time.Second)
	median := []float64{1000.0 / 2400, 600.0 / 2400, 800.0 / 2400}
	e2eCallUntil(t, ctx, conn, 100, "the reporting backends' weights in use", func() bool { return e2eInUse(addrs[0], addrs[1]) })
	e2eSettle(t, ctx, conn, 600, median, 0.05, "silent backend at the median")

	// It starts reporting: for the blackout it stays at the median. What
	// is measured is every batch that ends with its weight still unused,
	// however many the machine's speed fits in the blackout: a batch that
	// outlasts it says nothing, and one batch alone is as much the calls
	// in flight's doing as the weights'.
	silent.ORCA.PerCall = true
	start := time.Now()
	if err := ss[2].SetBehavior(silent); err != nil {
		t.Fatal(err)
	}
	during := map[string]int{}
	calls := 0
	for {
		if ctx.Err() != nil {
			t.Fatal("timed out waiting for the reporting backend's weight in use")
		}
		got := e2eCalls(t, ctx, conn, 100)
		if e2eInUse(addrs[2]) {
			break
		}
		for b, n := range got {
			during[b] += n
			calls += n
		}
	}
	if took := time.Since(start); took < blackout {
		t.Errorf("its weight was in use %v after it started reporting, before the blackout of %v", took, blackout)
	}
	if calls < 300 {
		t.Fatalf("%d calls ended within the blackout, too few to measure it by", calls)
	}
	got := e2eShares(during, 3)
	if !e2eWithin(got, median, 0.05) {
		t.Errorf("shares during the blackout = %.3f over %d calls, want the median's %.3f", got, calls, median)
	}
	t.Logf("during the blackout: shares %.3f over %d calls (median %.3f)", got, calls, median)
	e2eSettle(t, ctx, conn, 600, capacityShares(ratings), 0.05, "after the blackout")

	// Its reports stop: after the expiration it is back at the median.
	silent.ORCA.PerCall = false
	if err := ss[2].SetBehavior(silent); err != nil {
		t.Fatal(err)
	}
	e2eSettle(t, ctx, conn, 600, median, 0.05, "expired weight at the median")
}

// TestEndToEndSaturatedAfterIdleWarmUp: backends that really serve only
// their rating (slots x 20ms, later calls queue) and are kept busy by as
// many callers as they have slots, so that calls in flight say as much as
// the weights. The channel's first calls come seconds before the load,
// and the larger backend answers them idle and at once, the smaller in
// 20ms: the shares must still settle at the ratings' and stay there.
func TestEndToEndSaturatedAfterIdleWarmUp(t *testing.T) {
	t.Parallel()
	const latency = 20 * time.Millisecond
	ratings := []float64{1000, 600}
	ss, addrs := e2eBackends(t, ratings, false)
	for i, s := range ss {
		var b server.Behavior
		if i == 1 {
			b.Latency = server.Duration(latency)
		}
		if err := s.SetBehavior(b); err != nil {
			t.Fatal(err)
		}
	}
	conn := e2eDial(t, addrs, `{"blackoutPeriod": "1s", "weightUpdatePeriod": "100ms"}`)
	ctx := fleet.Context(t, 60*time.Second)
	for range 20 {
		if _, err := server.Call(ctx, conn, "k"); err != nil {
			t.Fatalf("warm-up call: %v", err)
		}
	}
	if err := pause.For(ctx, 2*time.Second); err != nil {
		t.Fatal(err)
	}
	slots := 0
	for i, s := range ss {
		n := int(ratings[i] * latency.Seconds())
		slots += n
		b := server.Behavior{Latency: server.Duration(latency), Capacity: n}
		b.ORCA = server.ORCAConfig{PerCall: true, Utilization: server.UtilizationRate, RatedQPS: ratings[i]}
		if err := s.SetBehavior(b); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	got := map[string]int{}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range slots {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				b, err := server.Call(ctx, conn, "k")
				if err != nil {
					if ctx.Err() == nil {
						t.Errorf("call: %v", err)
					}
					return
				}
				mu.Lock()
				got[b]++
				mu.Unlock()
			}
		})
	}
	defer func() {
		close(stop)
		wg.Wait()
	}()
	fleet.WaitFor(t, ctx, "the weights in use", func() bool { return e2eInUse(addrs...) })
	mu.Lock()
	clear(got)
	mu.Unlock()
	want := capacityShares(ratings)
	var last []float64
	for inARow := 0; inARow < 3; {
		if pause.For(ctx, time.Second) != nil {
			t.Fatalf("shares %.3f never settled within ±0.05 of %.3f", last, want)
		}
		mu.Lock()
		last = e2eShares(got, len(ratings))
		clear(got)
		mu.Unlock()
		if e2eWithin(last, want, 0.05) {
			inARow++
		} else {
			inARow = 0
		}
	}
	t.Logf("shares %.3f (want %.3f)", last, want)
}
