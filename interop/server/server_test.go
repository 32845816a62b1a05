package server

import (
	"context"
	"errors"
	"math"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	v3orcapb "github.com/cncf/xds/go/xds/data/orca/v3"
	v3orcaservicepb "github.com/cncf/xds/go/xds/service/orca/v3"
	"github.com/google/go-cmp/cmp"
	"github.com/pickwise/pickwise/internal/loadpb"
	"github.com/pickwise/pickwise/serverload"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// testTimeout bounds every wait; waits end as soon as their condition
// holds, so it only matters when something is broken.
const testTimeout = 5 * time.Second

// start serves b on a loopback port and dials it directly (no balancer, so
// admin calls reach this server). Cleanup closes the client before
// stopping the server, so no RPC sees a dying server.
func start(t *testing.T, b Behavior) (*Server, *grpc.ClientConn) {
	t.Helper()
	s, err := New("b0", b)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(s.Stop)
	addr, err := s.Start("127.0.0.1:0")
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	if got := s.Addr(); got != addr {
		t.Fatalf("Addr() = %q, Start returned %q", got, addr)
	}
	conn, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	t.Cleanup(func() { conn.Close() })
	return s, conn
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

// timedCall makes one call and returns how long it took.
func timedCall(t *testing.T, ctx context.Context, conn *grpc.ClientConn) time.Duration {
	t.Helper()
	start := time.Now()
	if _, err := Call(ctx, conn, "k"); err != nil {
		t.Fatalf("Call: %v", err)
	}
	return time.Since(start)
}

// waitFor polls cond until it holds. The server's state changes on its own
// goroutines, and polling with a deadline is both faster and less flaky
// than sleeping for a guessed time.
func waitFor(t *testing.T, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("timed out waiting for %s", what)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

func TestCallRepliesWithName(t *testing.T) {
	_, conn := start(t, Behavior{})
	var trailer metadata.MD
	got, err := Call(testCtx(t), conn, "key-1", grpc.Trailer(&trailer))
	if err != nil || got != "b0" {
		t.Fatalf("Call = %q, %v; want b0, nil", got, err)
	}
	if v := trailer.Get(TrailerBackend); len(v) != 1 || v[0] != "b0" {
		t.Errorf("trailer %s = %q, want [b0]", TrailerBackend, v)
	}
}

func TestSetBehaviorRoundTrip(t *testing.T) {
	s, conn := start(t, Behavior{})
	ctx := testCtx(t)

	got, err := SetBehavior(ctx, conn, `{"latency":"20ms","errorCode":"resource_exhausted","orca":{"perCall":true}}`)
	if err != nil {
		t.Fatalf("SetBehavior: %v", err)
	}
	want := Behavior{
		Latency:   Duration(20 * time.Millisecond),
		ErrorCode: "RESOURCE_EXHAUSTED",
		ORCA:      ORCAConfig{PerCall: true, Interval: DefaultORCAInterval, Utilization: UtilizationComputed},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("first patch (-want +got):\n%s", diff)
	}

	// A second patch changes only what it names, nested fields included.
	got, err = SetBehavior(ctx, conn, `{"capacity":3,"orca":{"outOfBand":true,"interval":"250ms"}}`)
	if err != nil {
		t.Fatalf("SetBehavior: %v", err)
	}
	want.Capacity = 3
	want.ORCA.OutOfBand = true
	want.ORCA.Interval = Duration(250 * time.Millisecond)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("second patch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want, s.Behavior()); diff != "" {
		t.Errorf("Server.Behavior() after patches (-want +got):\n%s", diff)
	}

	// The empty patch reads the behavior without changing it.
	got, err = SetBehavior(ctx, conn, "")
	if err != nil {
		t.Fatalf("SetBehavior(\"\"): %v", err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("empty patch (-want +got):\n%s", diff)
	}
}

func TestSetBehaviorRejectsInvalid(t *testing.T) {
	s, conn := start(t, Behavior{Latency: Duration(time.Millisecond)})
	ctx := testCtx(t)
	before := s.Behavior()
	for _, tc := range []struct {
		patch string
		want  string // a substring of the status message
	}{
		{`{"latency":"-5ms"}`, `latency "-5ms": must be >= 0`},
		{`{"latency":"fast"}`, `latency: cannot use JSON "fast": not a duration`},
		{`{"latency":20}`, `latency: cannot use JSON 20: a duration must be a string`},
		{`{"latencySpread":-1}`, `latencySpread -1`},
		{`{"capacity":-1}`, `capacity -1: must be >= 0`},
		{`{"capacity":"two"}`, `capacity: cannot use JSON string`},
		{`{"errorRate":1.5}`, `errorRate 1.5: must be in [0, 1]`},
		{`{"errorCode":"TEAPOT"}`, `errorCode "TEAPOT": unknown gRPC code name`},
		{`{"errorCode":"OK"}`, `errorCode "OK": must be a failure code`},
		{`{"errorLatency":"-1s"}`, `errorLatency "-1s"`},
		{`{"coldStart":"-1s"}`, `coldStart "-1s"`},
		{`{"coldStart":"1s"}`, `coldFactor 0: must be >= 1 when coldStart is set`},
		{`{"coldFactor":0.5}`, `coldFactor 0.5: must be >= 1`},
		{`{"slowdown":0.5}`, `slowdown 0.5: must be >= 1`},
		{`{"slowdown":-2}`, `slowdown -2: must be >= 1`},
		{`{"orca":{"interval":"1ms"}}`, `orca.interval "1ms": must be >= 10ms`},
		{`{"orca":{"utilization":"guess"}}`, `orca.utilization "guess"`},
		{`{"orca":{"fixedUtilization":-0.1}}`, `orca.fixedUtilization -0.1`},
		{`{"orca":{"utilization":"rate"}}`, `orca.ratedQps 0: must be > 0 when orca.utilization is "rate"`},
		{`{"orca":{"ratedQps":-5}}`, `orca.ratedQps -5`},
		{`{"orca":{"perCall":true,"period":"1s"}}`, `unknown field "orca.period"`},
		{`{"Latency":"1s"}`, `unknown field "Latency"`},
		{`{"latency":"1s"} trailing`, `must be a JSON object`},
		{`[1]`, `must be a JSON object`},
		{`{"orca":3}`, `orca: must be a JSON object`},
	} {
		_, err := SetBehavior(ctx, conn, tc.patch)
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), tc.want) {
			t.Errorf("SetBehavior(%s) = %v; want InvalidArgument containing %q", tc.patch, err, tc.want)
		}
	}
	if diff := cmp.Diff(before, s.Behavior()); diff != "" {
		t.Errorf("rejected patches changed the behavior (-before +after):\n%s", diff)
	}
	if err := s.SetBehavior(Behavior{ErrorRate: -0.5}); err == nil || !strings.Contains(err.Error(), "errorRate") {
		t.Errorf("Server.SetBehavior(ErrorRate -0.5) = %v, want an error naming errorRate", err)
	}
}

func TestLatencyHonoured(t *testing.T) {
	_, conn := start(t, Behavior{Latency: Duration(50 * time.Millisecond)})
	// A timer never fires early, so the lower bound is safe under any load.
	if d := timedCall(t, testCtx(t), conn); d < 45*time.Millisecond {
		t.Errorf("call took %v, want >= 45ms", d)
	}
}

func TestCapacityQueues(t *testing.T) {
	_, conn := start(t, Behavior{Latency: Duration(50 * time.Millisecond), Capacity: 1})
	ctx := testCtx(t)
	start := time.Now()
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			if _, err := Call(ctx, conn, "k"); err != nil {
				t.Errorf("Call: %v", err)
			}
		})
	}
	wg.Wait()
	// One at a time: three 50ms services back to back.
	if d := time.Since(start); d < 140*time.Millisecond {
		t.Errorf("3 calls through capacity 1 took %v, want >= 140ms", d)
	}
}

func TestQueuedCallHonoursDeadline(t *testing.T) {
	s, conn := start(t, Behavior{Latency: Duration(time.Hour), Capacity: 1})
	ctx := testCtx(t)

	// Occupy the only slot until the test cancels it.
	holdCtx, release := context.WithCancel(ctx)
	held := make(chan error, 1)
	go func() { _, err := Call(holdCtx, conn, "holder"); held <- err }()
	waitFor(t, ctx, "the holder in service", func() bool { return s.Stats().InFlight == 1 })

	shortCtx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if _, err := Call(shortCtx, conn, "queued"); status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("queued call = %v, want DeadlineExceeded", err)
	}
	// The client gave up; the server notices a moment later.
	waitFor(t, ctx, "the queued call to leave the queue", func() bool {
		st := s.Stats()
		return st.Queued == 0 && st.Canceled == 1
	})

	release()
	if err := <-held; status.Code(err) != codes.Canceled {
		t.Errorf("holder = %v, want Canceled", err)
	}
	waitFor(t, ctx, "the slot to be freed", func() bool { return s.Stats().InFlight == 0 })
	if st := s.Stats(); st.Served != 0 || st.Canceled != 2 {
		t.Errorf("Stats = %+v, want served 0, canceled 2", st)
	}
}

func TestInjectedFailure(t *testing.T) {
	s, conn := start(t, Behavior{ErrorRate: 1, ErrorCode: "RESOURCE_EXHAUSTED"})
	ctx := testCtx(t)
	for range 5 {
		var trailer metadata.MD
		backend, err := Call(ctx, conn, "k", grpc.Trailer(&trailer))
		if status.Code(err) != codes.ResourceExhausted {
			t.Fatalf("Call = %v, want ResourceExhausted", err)
		}
		if backend != "b0" {
			t.Errorf("failed call attributed to %q via trailer, want b0", backend)
		}
	}
	st, err := FetchStats(ctx, conn)
	if err != nil {
		t.Fatalf("FetchStats: %v", err)
	}
	if st.Name != "b0" || st.Failed != 5 || st.Served != 0 || !(st.EPS > 0) || !(st.QPS >= st.EPS) {
		t.Errorf("Stats = %+v, want name b0, failed 5, served 0, eps > 0, qps >= eps", st)
	}

	// Back to healthy, through the admin RPC; ErrorRate 0 never fails.
	if _, err := SetBehavior(ctx, conn, `{"errorRate":0}`); err != nil {
		t.Fatalf("SetBehavior: %v", err)
	}
	for range 5 {
		if _, err := Call(ctx, conn, "k"); err != nil {
			t.Fatalf("Call after errorRate 0: %v", err)
		}
	}
	if got := s.Stats().Served; got != 5 {
		t.Errorf("Served = %d, want 5", got)
	}
}

func TestFailNext(t *testing.T) {
	s, conn := start(t, Behavior{})
	ctx := testCtx(t)
	b, err := SetBehavior(ctx, conn, `{"failNext":2}`)
	if err != nil {
		t.Fatalf("SetBehavior: %v", err)
	}
	if b.FailNext != 0 {
		t.Errorf("behavior in effect has failNext %d, want 0: it is armed, not kept", b.FailNext)
	}
	var codesSeen []codes.Code
	for range 4 {
		_, err := Call(ctx, conn, "k")
		codesSeen = append(codesSeen, status.Code(err))
	}
	if want := []codes.Code{codes.Unavailable, codes.Unavailable, codes.OK, codes.OK}; !slices.Equal(codesSeen, want) {
		t.Errorf("codes after failNext 2 = %v, want %v", codesSeen, want)
	}
	if st := s.Stats(); st.Failed != 2 || st.Served != 2 {
		t.Errorf("Stats = %+v, want 2 failed, 2 served", st)
	}
	if _, err := SetBehavior(ctx, conn, `{"failNext":-1}`); err == nil {
		t.Error("failNext -1 accepted")
	}
}

func TestStatsAndReset(t *testing.T) {
	s, conn := start(t, Behavior{})
	ctx := testCtx(t)
	for range 4 {
		if _, err := Call(ctx, conn, "k"); err != nil {
			t.Fatalf("Call: %v", err)
		}
	}
	st, err := FetchStats(ctx, conn)
	if err != nil {
		t.Fatalf("FetchStats: %v", err)
	}
	if st.Served != 4 || !(st.QPS > 0) || !(st.UptimeSeconds > 0) || st.InFlight != 0 || st.Queued != 0 {
		t.Errorf("Stats = %+v, want served 4, qps > 0, uptime > 0, nothing in flight", st)
	}
	st, err = Reset(ctx, conn, false)
	if err != nil {
		t.Fatalf("Reset: %v", err)
	}
	if st.Served != 0 || st.QPS != 0 || !(st.UptimeSeconds > 0) {
		t.Errorf("Stats after Reset = %+v, want served 0, qps 0, uptime kept", st)
	}
	if got := s.Stats().Served; got != 0 {
		t.Errorf("Server.Stats().Served after Reset = %d", got)
	}

	// The Reset request is strict JSON too.
	err = conn.Invoke(ctx, ResetMethod, wrapperspb.String(`{"cold":true}`), new(wrapperspb.StringValue))
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), `unknown field "cold"`) {
		t.Errorf("Reset with unknown field = %v, want InvalidArgument naming it", err)
	}
}

func TestPerCallORCA(t *testing.T) {
	_, conn := start(t, Behavior{Capacity: 4})
	ctx := testCtx(t)

	// Off by default: the report carries serverload's figures only.
	var trailer metadata.MD
	if _, err := Call(ctx, conn, "k", grpc.Trailer(&trailer)); err != nil {
		t.Fatalf("Call: %v", err)
	}
	if r, err := ParseLoadReport(trailer); err != nil || r == nil || r.GetCpuUtilization() != 0 || r.GetRpsFractional() != 0 || len(r.GetNamedMetrics()) != 2 {
		t.Fatalf("report with perCall off = %v, %v; want serverload's two named metrics only", r, err)
	}

	if _, err := SetBehavior(ctx, conn, `{"orca":{"perCall":true}}`); err != nil {
		t.Fatalf("SetBehavior: %v", err)
	}
	r := reportAfter(t, ctx, conn, 5)
	// The reporting call itself is in service, so utilization is at least
	// 1/capacity.
	if u := r.GetCpuUtilization(); !(u > 0 && u <= 1) {
		t.Errorf("cpu_utilization = %v, want in (0, 1]", u)
	}
	if q := r.GetRpsFractional(); !(q > 0) {
		t.Errorf("rps_fractional = %v, want > 0", q)
	}
	if e := r.GetEps(); e != 0 {
		t.Errorf("eps = %v with no failures, want 0", e)
	}

	// A fixed utilization is reported as is, on failures too.
	if _, err := SetBehavior(ctx, conn, `{"errorRate":1,"orca":{"utilization":"fixed","fixedUtilization":0.25}}`); err != nil {
		t.Fatalf("SetBehavior: %v", err)
	}
	trailer = nil
	if _, err := Call(ctx, conn, "k", grpc.Trailer(&trailer)); status.Code(err) != codes.Unavailable {
		t.Fatalf("Call = %v, want Unavailable", err)
	}
	r, err := ParseLoadReport(trailer)
	if err != nil || r == nil {
		t.Fatalf("ParseLoadReport after failure = %v, %v; want a report", r, err)
	}
	if u := r.GetCpuUtilization(); u != 0.25 {
		t.Errorf("fixed cpu_utilization = %v, want 0.25", u)
	}
	if e := r.GetEps(); !(e > 0) {
		t.Errorf("eps after a failure = %v, want > 0", e)
	}

	// A rated server reports its completed calls per second over its
	// rating: qps / ratedQps, in the same report.
	if _, err := SetBehavior(ctx, conn, `{"errorRate":0,"orca":{"utilization":"rate","ratedQps":50}}`); err != nil {
		t.Fatalf("SetBehavior: %v", err)
	}
	trailer = nil
	if _, err := Call(ctx, conn, "k", grpc.Trailer(&trailer)); err != nil {
		t.Fatalf("Call: %v", err)
	}
	if r, err = ParseLoadReport(trailer); err != nil || r == nil {
		t.Fatalf("ParseLoadReport with rate utilization = %v, %v; want a report", r, err)
	}
	if q, u := r.GetRpsFractional(), r.GetCpuUtilization(); !(q > 0) || math.Abs(u-q/50) > 1e-9 {
		t.Errorf("rate utilization = %v with qps %v, want qps/50 = %v", u, q, q/50)
	}
}

// openReport opens an ORCA stream and returns its first report, which
// grpc's service sends as soon as the stream opens.
func openReport(t *testing.T, ctx context.Context, conn *grpc.ClientConn) (cpu, qps float64) {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // ends the stream; the server's handler returns with it
	stream, err := v3orcaservicepb.NewOpenRcaServiceClient(conn).StreamCoreMetrics(ctx,
		&v3orcaservicepb.OrcaLoadReportRequest{ReportInterval: durationpb.New(time.Second)})
	if err != nil {
		t.Fatalf("StreamCoreMetrics: %v", err)
	}
	r, err := stream.Recv()
	if err != nil {
		t.Fatalf("Recv: %v", err)
	}
	return r.GetCpuUtilization(), r.GetRpsFractional()
}

func TestOutOfBandORCA(t *testing.T) {
	s, conn := start(t, Behavior{})
	ctx := testCtx(t)

	// Off: the stream works but reports nothing.
	if cpu, qps := openReport(t, ctx, conn); cpu != 0 || qps != 0 {
		t.Errorf("report with outOfBand off = cpu %v qps %v, want empty", cpu, qps)
	}

	// SetBehavior refreshes the recorder before it returns, so the very
	// next stream sees the fixed value.
	if _, err := SetBehavior(ctx, conn, `{"orca":{"outOfBand":true,"interval":"20ms","utilization":"fixed","fixedUtilization":0.42}}`); err != nil {
		t.Fatalf("SetBehavior: %v", err)
	}
	if cpu, _ := openReport(t, ctx, conn); cpu != 0.42 {
		t.Errorf("fixed cpu_utilization = %v, want 0.42", cpu)
	}

	// Computed: one call in service out of capacity 2 is 0.5, which the
	// refresher picks up within an interval.
	if _, err := SetBehavior(ctx, conn, `{"latency":"1h","capacity":2,"orca":{"utilization":"computed"}}`); err != nil {
		t.Fatalf("SetBehavior: %v", err)
	}
	holdCtx, release := context.WithCancel(ctx)
	held := make(chan struct{})
	go func() { defer close(held); _, _ = Call(holdCtx, conn, "holder") }()
	defer func() { release(); <-held }()
	waitFor(t, ctx, "the holder in service", func() bool { return s.Stats().InFlight == 1 })
	waitFor(t, ctx, "an out-of-band report of utilization 0.5", func() bool {
		cpu, _ := openReport(t, ctx, conn)
		return cpu == 0.5
	})
}

func TestColdStart(t *testing.T) {
	// Cold for 400ms, starting 20x slower: the first call takes up to
	// 200ms, calls after the window 10ms.
	s, conn := start(t, Behavior{
		Latency:    Duration(10 * time.Millisecond),
		ColdStart:  Duration(400 * time.Millisecond),
		ColdFactor: 20,
	})
	ctx := testCtx(t)
	// Restart the clock now, so dial time does not eat into the window.
	if _, err := Reset(ctx, conn, true); err != nil {
		t.Fatalf("Reset: %v", err)
	}
	restarted := time.Now()
	first := timedCall(t, ctx, conn)
	for time.Since(restarted) < 500*time.Millisecond {
		timedCall(t, ctx, conn)
	}
	last := timedCall(t, ctx, conn)
	// Only the order is asserted, with a wide margin: the first call is
	// at least ~7x the latency unless the machine stalled for 250ms
	// between Reset and the call, the last is 1x plus overhead.
	if !(first > 2*last) {
		t.Errorf("first call %v, call after warm-up %v; want the first more than twice as slow", first, last)
	}
	if got := s.Stats().Served; got < 3 {
		t.Errorf("Served = %d, want >= 3", got)
	}
}

func TestStopEndsSlowCalls(t *testing.T) {
	s, conn := start(t, Behavior{Latency: Duration(time.Hour)})
	ctx := testCtx(t)
	done := make(chan error, 1)
	go func() { _, err := Call(ctx, conn, "k"); done <- err }()
	waitFor(t, ctx, "the call in service", func() bool { return s.Stats().InFlight == 1 })
	s.Stop() // must not wait an hour; goleak checks nothing is left behind
	if err := <-done; status.Code(err) != codes.Unavailable {
		t.Errorf("call during Stop = %v, want Unavailable", err)
	}
	s.Stop() // idempotent

	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Serve(lis); !errors.Is(err, grpc.ErrServerStopped) {
		t.Errorf("Serve after Stop = %v, want ErrServerStopped", err)
	}
}

func TestRestartSameAddress(t *testing.T) {
	s, conn := start(t, Behavior{Latency: Duration(time.Millisecond)})
	ctx := testCtx(t)
	addr := s.Addr()
	for range 3 {
		if _, err := Call(ctx, conn, "k", grpc.WaitForReady(true)); err != nil {
			t.Fatalf("Call: %v", err)
		}
	}
	if err := s.Restart(); err != nil || !s.Running() {
		t.Fatalf("Restart while running = %v, Running %v; want a no-op", err, s.Running())
	}

	s.Stop()
	if s.Running() || s.Addr() != addr {
		t.Fatalf("after Stop: Running %v, Addr %q; want false, %q", s.Running(), s.Addr(), addr)
	}
	if _, err := s.Start("127.0.0.1:0"); !errors.Is(err, grpc.ErrServerStopped) {
		t.Errorf("Start after Stop = %v, want ErrServerStopped: only Restart serves again", err)
	}
	if err := s.Restart(); err != nil {
		t.Fatalf("Restart: %v", err)
	}
	if !s.Running() || s.Addr() != addr {
		t.Fatalf("after Restart: Running %v, Addr %q; want true, %q", s.Running(), s.Addr(), addr)
	}
	// The same channel reconnects to the same address. A call may still
	// be sent on the connection the crash closed before the client notices,
	// and fail, so retry until one succeeds; WaitForReady rides out the
	// reconnect backoff.
	waitFor(t, ctx, "a call to succeed after Restart", func() bool {
		_, err := Call(ctx, conn, "k", grpc.WaitForReady(true))
		return err == nil
	})
	st := s.Stats()
	if st.Served != 4 || s.Behavior().Latency != Duration(time.Millisecond) {
		t.Errorf("after Restart: Stats %+v, Behavior %+v; want counters and behavior kept (4 served)", st, s.Behavior())
	}
	// One connection before the crash, one after: counted across runs.
	if st.Connections != 2 {
		t.Errorf("Connections = %d, want 2", st.Connections)
	}
	s.Stop()
	s.Stop() // idempotent after a restart too
}

// TestDrainFinishesCallsInFlight: a drain lets the calls in service end
// with their answer, refuses new ones, and cuts what outlasts its grace.
func TestDrainFinishesCallsInFlight(t *testing.T) {
	s, conn := start(t, Behavior{Latency: Duration(200 * time.Millisecond)})
	ctx := testCtx(t)
	const n = 3
	done := make(chan error, n)
	for range n {
		go func() { _, err := Call(ctx, conn, "k"); done <- err }()
	}
	waitFor(t, ctx, "the calls in service", func() bool { return s.Stats().InFlight == n })
	s.Drain(testTimeout)
	if s.Running() {
		t.Fatal("Running after Drain")
	}
	for range n {
		if err := <-done; err != nil {
			t.Errorf("call in flight at the drain = %v, want it answered", err)
		}
	}
	if st := s.Stats(); st.Served != n || st.Canceled != 0 {
		t.Errorf("Stats after Drain = %+v, want %d served, none canceled", st, n)
	}
	// Drained, it refuses new calls (the listener is closed).
	cctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if _, err := Call(cctx, conn, "k"); err == nil {
		t.Error("a call after Drain succeeded")
	}
	s.Drain(testTimeout) // idempotent
	if err := s.Restart(); err != nil {
		t.Fatalf("Restart after Drain: %v", err)
	}
	if _, err := Call(ctx, conn, "k", grpc.WaitForReady(true)); err != nil {
		t.Fatalf("Call after Restart: %v", err)
	}

	// A call that outlasts the grace is cut when it ends.
	if err := s.SetBehavior(Behavior{Latency: Duration(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	go func() { _, err := Call(ctx, conn, "k"); done <- err }()
	waitFor(t, ctx, "the slow call in service", func() bool { return s.Stats().InFlight == 1 })
	s.Drain(10 * time.Millisecond)
	if err := <-done; status.Code(err) != codes.Unavailable {
		t.Errorf("call past the drain's grace = %v, want Unavailable", err)
	}
}

func TestReceivedCountsOnArrival(t *testing.T) {
	s, conn := start(t, Behavior{Latency: Duration(time.Hour)})
	ctx := testCtx(t)
	callCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _, _ = Call(callCtx, conn, "k") }()
	waitFor(t, ctx, "the call to arrive", func() bool { return s.Stats().Received == 1 })
	if st := s.Stats(); st.Served+st.Failed+st.Canceled != 0 || st.InFlight != 1 {
		t.Errorf("Stats with one call in service = %+v, want it received and in flight only", st)
	}
	cancel()
	<-done
	waitFor(t, ctx, "the call to be counted as canceled", func() bool { return s.Stats().Canceled == 1 })
	// Reset zeroes the call counters but not the connection count.
	s.Reset(false)
	if st := s.Stats(); st.Received != 0 || st.Canceled != 0 || st.Connections != 1 {
		t.Errorf("Stats after Reset = %+v, want received 0, canceled 0, connections 1", st)
	}
}

func TestServeLifecycle(t *testing.T) {
	s, err := New("b1", Behavior{})
	if err != nil {
		t.Fatal(err)
	}
	if s.Addr() != "" {
		t.Errorf("Addr before serving = %q, want empty", s.Addr())
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- s.Serve(lis) }()
	waitFor(t, testCtx(t), "Addr", func() bool { return s.Addr() != "" })
	if _, err := s.Start("127.0.0.1:0"); err == nil || !strings.Contains(err.Error(), "already serving") {
		t.Errorf("Start while serving = %v, want an error", err)
	}
	s.Stop()
	if err := <-served; err != nil {
		t.Errorf("Serve after Stop = %v, want nil", err)
	}

	// Stop without ever serving must not hang or leak, and leaves no
	// address to restart on.
	s2, err := New("b2", Behavior{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s2.Restart(); err == nil || !strings.Contains(err.Error(), "never served") {
		t.Errorf("Restart before serving = %v, want an error", err)
	}
	s2.Stop()
}

func TestNewRejects(t *testing.T) {
	for _, tc := range []struct {
		name string
		b    Behavior
		want string
	}{
		{"", Behavior{}, "name must not be empty"},
		{"b\n0", Behavior{}, "printable ASCII"},
		{"b0", Behavior{Capacity: -2}, "capacity -2"},
		{"b0", Behavior{Latency: Duration(-time.Second)}, `latency "-1s"`},
	} {
		if _, err := New(tc.name, tc.b); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%q, %+v) = %v, want error containing %q", tc.name, tc.b, err, tc.want)
		}
	}
}

// TestSlowdown: a slowdown multiplies the service time of calls that enter
// service while it is set, those queued before it too, and ends when it is
// cleared.
func TestSlowdown(t *testing.T) {
	s, conn := start(t, Behavior{Latency: Duration(60 * time.Millisecond), Capacity: 1})
	ctx := testCtx(t)
	// The first call holds the only slot; the second queues behind it and
	// enters service after the slowdown is set.
	var wg sync.WaitGroup
	wg.Go(func() { timedCall(t, ctx, conn) })
	waitFor(t, ctx, "the first call in service", func() bool { active, _, _ := s.gate.load(); return active == 1 })
	queued := make(chan time.Duration, 1)
	wg.Go(func() { queued <- timedCall(t, ctx, conn) })
	waitFor(t, ctx, "the second call queued", func() bool { _, q, _ := s.gate.load(); return q == 1 })
	if _, err := SetBehavior(ctx, conn, `{"slowdown":4}`); err != nil {
		t.Fatalf("SetBehavior: %v", err)
	}
	wg.Wait()
	// A timer never fires early: its own 240ms after a wait in the queue.
	if d := <-queued; d < 240*time.Millisecond {
		t.Errorf("call queued before the slowdown took %v, want >= 240ms", d)
	}
	if d := timedCall(t, ctx, conn); d < 240*time.Millisecond {
		t.Errorf("call during the slowdown took %v, want >= 240ms", d)
	}
	if _, err := SetBehavior(ctx, conn, `{"slowdown":0}`); err != nil {
		t.Fatalf("SetBehavior: %v", err)
	}
	// Only the order is asserted: a loaded machine may stretch a call.
	if slow, d := 4*60*time.Millisecond, timedCall(t, ctx, conn); d >= slow {
		t.Errorf("call after the slowdown took %v, want under the slowed %v", d, slow)
	}
	if got := s.Behavior().Capacity; got != 1 {
		t.Errorf("capacity %d after a slowdown, want 1: a slowed server keeps its workers", got)
	}
}

// TestServerLoad: every Call's report carries serverload's figures, the
// admin calls' do not count, and probes are answered and counted apart
// from calls, on the connection the calls use.
func TestServerLoad(t *testing.T) {
	s, conn := start(t, Behavior{Latency: Duration(5 * time.Millisecond), Capacity: 2})
	ctx := testCtx(t)
	r := reportAfter(t, ctx, conn, 3)
	var trailer metadata.MD
	rif, ok := r.GetNamedMetrics()[serverload.RIFMetric]
	if !ok || rif != 0 {
		t.Errorf("%s = %v (present: %v), want 0 with no other call in flight", serverload.RIFMetric, rif, ok)
	}
	if lat := r.GetNamedMetrics()[serverload.LatencyMetric]; !(lat >= 0.005) {
		t.Errorf("%s = %v, want >= 0.005 s after calls of 5ms", serverload.LatencyMetric, lat)
	}
	// An admin call is no work: no report.
	trailer = nil
	if err := conn.Invoke(ctx, StatsMethod, new(emptypb.Empty), new(wrapperspb.StringValue), grpc.Trailer(&trailer)); err != nil {
		t.Fatalf("Stats: %v", err)
	}
	if r, err := ParseLoadReport(trailer); r != nil || err != nil {
		t.Errorf("admin call's report = %v, %v; want none", r, err)
	}

	probe := loadpb.NewLoadProbeClient(conn)
	for range 2 {
		a, err := probe.Probe(ctx, &loadpb.ProbeRequest{})
		if err != nil {
			t.Fatalf("Probe: %v", err)
		}
		if a.GetRequestsInFlight() != 0 || a.GetLatencyNanos() < int64(5*time.Millisecond) {
			t.Errorf("Probe = %v, want no call in flight and a latency >= 5ms", a)
		}
	}
	st := s.Stats()
	if st.Probes != 2 || st.Received != 3 || st.Connections != 1 {
		t.Errorf("Stats: %d probes, %d calls received, %d connections; want 2, 3 and 1", st.Probes, st.Received, st.Connections)
	}
	if _, err := Reset(ctx, conn, false); err != nil {
		t.Fatalf("Reset: %v", err)
	}
	if st := s.Stats(); st.Probes != 0 {
		t.Errorf("Probes = %d after Reset, want 0", st.Probes)
	}
}

// reportAfter makes n calls on conn and returns the load report of the
// last one's trailer.
func reportAfter(t *testing.T, ctx context.Context, conn *grpc.ClientConn, n int) *v3orcapb.OrcaLoadReport {
	t.Helper()
	var trailer metadata.MD
	for range n {
		trailer = nil
		if _, err := Call(ctx, conn, "k", grpc.Trailer(&trailer)); err != nil {
			t.Fatalf("Call: %v", err)
		}
	}
	r, err := ParseLoadReport(trailer)
	if err != nil || r == nil {
		t.Fatalf("ParseLoadReport = %v, %v; want a report", r, err)
	}
	return r
}
