package serverload_test

import (
	"context"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	v3orcapb "github.com/cncf/xds/go/xds/data/orca/v3"
	v3orcaservicegrpc "github.com/cncf/xds/go/xds/service/orca/v3"
	"github.com/pickwise/pickwise/internal/loadpb"
	"github.com/pickwise/pickwise/serverload"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/orca"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

const testTimeout = 10 * time.Second

// The work service the tests call. Call's request says what to do:
// "block" waits for release, "fail" fails, "panic" panics, "metric" sets
// a per-call metric of the application's own; anything else returns at
// once. Hold is a bidirectional stream that lasts until the client
// closes its side.
const (
	callMethod = "/pickwise.serverload.test.Work/Call"
	holdMethod = "/pickwise.serverload.test.Work/Hold"
)

type work struct {
	entered chan struct{} // a value per call or stream that reached its handler
	release chan struct{} // closed to let blocked calls return
}

func (w *work) call(ctx context.Context, req *wrapperspb.StringValue) (*wrapperspb.StringValue, error) {
	switch req.GetValue() {
	case "block":
		w.entered <- struct{}{}
		select {
		case <-w.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	case "fail":
		return nil, status.Error(codes.Unavailable, "failing")
	case "panic":
		panic("handler panicked")
	case "metric":
		if rec := orca.CallMetricsRecorderFromContext(ctx); rec != nil {
			rec.SetNamedMetric("app.cost", 7)
		}
	}
	return &wrapperspb.StringValue{Value: "ok"}, nil
}

var workDesc = grpc.ServiceDesc{
	ServiceName: "pickwise.serverload.test.Work",
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{{
		MethodName: "Call",
		Handler: func(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
			req := new(wrapperspb.StringValue)
			if err := dec(req); err != nil {
				return nil, err
			}
			h := func(ctx context.Context, req any) (any, error) {
				return srv.(*work).call(ctx, req.(*wrapperspb.StringValue))
			}
			if interceptor == nil {
				return h(ctx, req)
			}
			return interceptor(ctx, req, &grpc.UnaryServerInfo{Server: srv, FullMethod: callMethod}, h)
		},
	}},
	Streams: []grpc.StreamDesc{{
		StreamName:    "Hold",
		ClientStreams: true,
		ServerStreams: true,
		Handler: func(srv any, stream grpc.ServerStream) error {
			srv.(*work).entered <- struct{}{}
			for {
				if err := stream.RecvMsg(new(wrapperspb.StringValue)); err != nil {
					if errors.Is(err, io.EOF) {
						return nil
					}
					return err
				}
			}
		},
	}},
}

var holdDesc = grpc.StreamDesc{StreamName: "Hold", ClientStreams: true, ServerStreams: true}

// env is a server with serverload on 127.0.0.1 and a client of it.
type env struct {
	load *serverload.Server
	work *work
	cc   *grpc.ClientConn
}

// newEnv starts a server with the given options first, then serverload's
// interceptors, the work service, the probe, health checking and ORCA's
// out-of-band service.
func newEnv(t *testing.T, opts ...grpc.ServerOption) *env {
	t.Helper()
	e := &env{load: serverload.New()}
	opts = append(opts,
		grpc.ChainUnaryInterceptor(e.load.UnaryInterceptor()),
		grpc.ChainStreamInterceptor(e.load.StreamInterceptor()))
	e.work, e.cc = serve(t, opts, func(srv *grpc.Server) {
		e.load.Register(srv)
		healthpb.RegisterHealthServer(srv, health.NewServer())
		rec := orca.NewServerMetricsRecorder()
		rec.SetCPUUtilization(0.25)
		if err := orca.Register(srv, orca.ServiceOptions{ServerMetricsProvider: e.load.MetricsProvider(rec)}); err != nil {
			t.Fatal(err)
		}
	})
	return e
}

// serve starts a server with the work service on 127.0.0.1, lets register
// add others, and returns a client of it.
func serve(tb testing.TB, opts []grpc.ServerOption, register func(*grpc.Server)) (*work, *grpc.ClientConn) {
	tb.Helper()
	w := &work{entered: make(chan struct{}, 100), release: make(chan struct{})}
	srv := grpc.NewServer(opts...)
	srv.RegisterService(&workDesc, w)
	if register != nil {
		register(srv)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	go srv.Serve(lis)
	tb.Cleanup(srv.Stop)
	cc, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { cc.Close() })
	return w, cc
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

// block starts n calls that wait in their handler until release, and
// returns once all are in it. done receives each call's error.
func (e *env) block(t *testing.T, ctx context.Context, n int) (done chan error) {
	t.Helper()
	done = make(chan error, n)
	for range n {
		go func() {
			done <- e.cc.Invoke(ctx, callMethod, &wrapperspb.StringValue{Value: "block"}, new(wrapperspb.StringValue))
		}()
	}
	for range n {
		select {
		case <-e.work.entered:
		case <-ctx.Done():
			t.Fatal("blocked calls did not reach the handler")
		}
	}
	return done
}

// releaseAll lets every blocked call return, and checks they succeeded.
func (e *env) releaseAll(t *testing.T, done chan error, n int) {
	t.Helper()
	close(e.work.release)
	for range n {
		if err := <-done; err != nil {
			t.Errorf("blocked call: %v", err)
		}
	}
}

func (e *env) probe(t *testing.T, ctx context.Context) *loadpb.ProbeResponse {
	t.Helper()
	resp, err := loadpb.NewLoadProbeClient(e.cc).Probe(ctx, &loadpb.ProbeRequest{})
	if err != nil {
		t.Fatalf("Probe: %v", err)
	}
	return resp
}

// call makes one Call and returns the named metrics of its ORCA trailer
// and its error, decoded as a client would.
func (e *env) call(t *testing.T, ctx context.Context, what string) (map[string]float64, error) {
	t.Helper()
	var tr metadata.MD
	err := e.cc.Invoke(ctx, callMethod, &wrapperspb.StringValue{Value: what}, new(wrapperspb.StringValue), grpc.Trailer(&tr))
	return namedMetrics(t, tr), err
}

func namedMetrics(t *testing.T, tr metadata.MD) map[string]float64 {
	t.Helper()
	vs := tr.Get("endpoint-load-metrics-bin")
	if len(vs) != 1 {
		t.Fatalf("trailer has %d ORCA reports, want 1: %v", len(vs), tr)
	}
	r := new(v3orcapb.OrcaLoadReport)
	if err := proto.Unmarshal([]byte(vs[0]), r); err != nil {
		t.Fatalf("ORCA report: %v", err)
	}
	return r.GetNamedMetrics()
}

func TestProbeSeesRIF(t *testing.T) {
	e := newEnv(t)
	ctx := testContext(t)

	if p := e.probe(t, ctx); p.RequestsInFlight != 0 || p.LatencyNanos != 0 {
		t.Errorf("idle server: probe = %v, want 0 in flight, latency unknown", p)
	}
	done := e.block(t, ctx, 3)
	if p := e.probe(t, ctx); p.RequestsInFlight != 3 || p.LatencyNanos != 0 {
		t.Errorf("3 calls blocked, none answered: probe = %v, want 3 in flight, latency unknown", p)
	}
	e.releaseAll(t, done, 3)
	p := e.probe(t, ctx)
	if p.RequestsInFlight != 0 || p.LatencyNanos <= 0 {
		t.Errorf("after the calls: probe = %v, want 0 in flight and a latency", p)
	}
	if rif, lat := e.load.Load(); rif != 0 || int64(lat) != p.LatencyNanos {
		t.Errorf("Load() = %d, %v; the probe said %v", rif, lat, p)
	}
}

// TestPerCallReport: a call's trailer carries the RIF it leaves behind and
// the latency estimate, in grpc's per-call report when the server uses
// orca.CallMetricsServerOption (merged with the application's own
// metrics), in a report of serverload's own otherwise.
func TestPerCallReport(t *testing.T) {
	tests := []struct {
		name string
		opts []grpc.ServerOption
		app  map[string]float64 // the application's metrics in the report
	}{
		{name: "own trailer"},
		{name: "grpc recorder", opts: []grpc.ServerOption{orca.CallMetricsServerOption(nil)}, app: map[string]float64{"app.cost": 7}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, tc.opts...)
			ctx := testContext(t)

			m, err := e.call(t, ctx, "metric")
			if err != nil {
				t.Fatal(err)
			}
			if m[serverload.RIFMetric] != 0 || m[serverload.LatencyMetric] <= 0 {
				t.Errorf("first call's report = %v, want RIF 0 and its own latency", m)
			}
			for k, v := range tc.app {
				if m[k] != v {
					t.Errorf("report's %s = %v, want %v (the application's)", k, m[k], v)
				}
			}

			done := e.block(t, ctx, 2)
			if m, err = e.call(t, ctx, "fast"); err != nil {
				t.Fatal(err)
			}
			if m[serverload.RIFMetric] != 2 || m[serverload.LatencyMetric] <= 0 {
				t.Errorf("with 2 calls blocked, report = %v, want RIF 2 and a latency", m)
			}
			m, err = e.call(t, ctx, "fail")
			if status.Code(err) != codes.Unavailable {
				t.Fatalf("failing call: %v", err)
			}
			if m[serverload.RIFMetric] != 2 {
				t.Errorf("a failed call's report = %v, want RIF 2", m)
			}
			e.releaseAll(t, done, 2)
		})
	}
}

// TestFailuresTeachNoLatency: failed calls count in RIF but their latency
// is not learnt, so a server that only fails has no latency to report.
func TestFailuresTeachNoLatency(t *testing.T) {
	e := newEnv(t)
	ctx := testContext(t)
	for range 3 {
		m, err := e.call(t, ctx, "fail")
		if status.Code(err) != codes.Unavailable {
			t.Fatalf("failing call: %v", err)
		}
		if m[serverload.LatencyMetric] != 0 {
			t.Errorf("after failures only, latency = %v s, want 0 (unknown)", m[serverload.LatencyMetric])
		}
	}
}

// TestPanicLeavesRIF: a call that panics, recovered by an interceptor
// outside serverload's, leaves RIF.
func TestPanicLeavesRIF(t *testing.T) {
	recovering := func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (resp any, err error) {
		defer func() {
			if recover() != nil {
				err = status.Error(codes.Internal, "recovered")
			}
		}()
		return h(ctx, req)
	}
	e := newEnv(t, grpc.ChainUnaryInterceptor(recovering))
	ctx := testContext(t)
	if _, err := e.call(t, ctx, "panic"); status.Code(err) != codes.Internal {
		t.Fatalf("panicking call: %v", err)
	}
	if rif, lat := e.load.Load(); rif != 0 || lat != 0 {
		t.Errorf("after a panic: Load() = %d, %v; want 0, unknown", rif, lat)
	}
}

// TestStreamCountsInRIF: a stream counts while it is open, its trailer
// carries the report, and its length teaches no latency.
func TestStreamCountsInRIF(t *testing.T) {
	e := newEnv(t)
	ctx := testContext(t)

	st, err := e.cc.NewStream(ctx, &holdDesc, holdMethod)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.SendMsg(&wrapperspb.StringValue{}); err != nil {
		t.Fatal(err)
	}
	<-e.work.entered
	if p := e.probe(t, ctx); p.RequestsInFlight != 1 {
		t.Errorf("one stream open: probe = %v, want 1 in flight", p)
	}
	done := e.block(t, ctx, 1)
	if err := st.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if err := st.RecvMsg(new(wrapperspb.StringValue)); !errors.Is(err, io.EOF) {
		t.Fatalf("stream ended with %v, want EOF", err)
	}
	m := namedMetrics(t, st.Trailer())
	if m[serverload.RIFMetric] != 1 || m[serverload.LatencyMetric] != 0 {
		t.Errorf("stream's report = %v, want RIF 1 (the blocked call) and latency unknown", m)
	}
	e.releaseAll(t, done, 1)
	if p := e.probe(t, ctx); p.RequestsInFlight != 0 {
		t.Errorf("stream closed: probe = %v, want 0 in flight", p)
	}
}

// TestOutOfBand: grpc's ORCA service reports the figures beside the
// application's own metrics, and neither its stream, nor a health
// watch, nor probes count in RIF.
func TestOutOfBand(t *testing.T) {
	e := newEnv(t)
	ctx := testContext(t)

	watch, err := healthpb.NewHealthClient(e.cc).Watch(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := watch.Recv(); err != nil {
		t.Fatal(err)
	}
	done := e.block(t, ctx, 2)
	e.probe(t, ctx)
	oob, err := v3orcaservicegrpc.NewOpenRcaServiceClient(e.cc).StreamCoreMetrics(ctx, &v3orcaservicegrpc.OrcaLoadReportRequest{})
	if err != nil {
		t.Fatal(err)
	}
	r, err := oob.Recv() // the service sends its first report at once
	if err != nil {
		t.Fatal(err)
	}
	if r.GetCpuUtilization() != 0.25 || r.GetNamedMetrics()[serverload.RIFMetric] != 2 {
		t.Errorf("ORCA report = %v, want the application's CPU 0.25 and %s 2", r, serverload.RIFMetric)
	}
	if p := e.probe(t, ctx); p.RequestsInFlight != 2 {
		t.Errorf("probe = %v, want 2 in flight: ORCA, health and probes do not count", p)
	}
	e.releaseAll(t, done, 2)
}

// fixedMetrics is a provider whose metrics are shared and read-only.
type fixedMetrics struct{ m *orca.ServerMetrics }

func (f fixedMetrics) ServerMetrics() *orca.ServerMetrics { return f.m }

func TestMetricsProvider(t *testing.T) {
	load := serverload.New()
	m := load.MetricsProvider(nil).ServerMetrics()
	if m.CPUUtilization != -1 || m.MemUtilization != -1 || m.AppUtilization != -1 || m.QPS != -1 || m.EPS != -1 ||
		m.Utilization == nil || m.RequestCost == nil || len(m.NamedMetrics) != 2 {
		t.Errorf("without a base: %+v, want unset fields, empty maps and the two figures", m)
	}

	shared := &orca.ServerMetrics{
		CPUUtilization: 0.5, MemUtilization: -1, AppUtilization: -1, QPS: 10, EPS: -1,
		Utilization: map[string]float64{}, RequestCost: map[string]float64{},
		NamedMetrics: map[string]float64{"app.queue": 3},
	}
	m = load.MetricsProvider(fixedMetrics{shared}).ServerMetrics()
	if m.CPUUtilization != 0.5 || m.QPS != 10 || m.NamedMetrics["app.queue"] != 3 || len(m.NamedMetrics) != 3 {
		t.Errorf("with a base: %+v, want the base's metrics and the two figures", m)
	}
	if len(shared.NamedMetrics) != 1 {
		t.Errorf("the base's named metrics were written to: %v", shared.NamedMetrics)
	}
}
