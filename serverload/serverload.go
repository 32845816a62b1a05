package serverload

import (
	"context"
	"maps"
	"math"
	"strings"
	"time"

	"github.com/pickwise/pickwise/internal/loadest"
	"github.com/pickwise/pickwise/internal/loadpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/orca"
)

// The ORCA named metrics every report carries. Clients read them by name.
const (
	// RIFMetric is the server's requests in flight, excluding the call
	// whose response carries the report.
	RIFMetric = "pickwise.rif"
	// LatencyMetric is the latency the server expects for a call
	// arriving now, in seconds; 0 means unknown.
	LatencyMetric = "pickwise.latency"
)

// Services whose calls are not work: the probe and ORCA answer questions
// about the load, and health checks and ORCA streams last as long as the
// connection, so counting them would add a constant per client to RIF.
const (
	probePrefix  = "/pickwise.serverload.v1.LoadProbe/"
	orcaPrefix   = "/xds.service.orca.v3.OpenRcaService/"
	healthPrefix = "/grpc.health.v1.Health/"
)

// Server keeps the load of one gRPC server. Create it with New, install
// its interceptors on the grpc.Server, and register its probe service.
// Its methods are safe for concurrent use.
type Server struct {
	// Immutable after New. origin is the instant time is measured from;
	// only its monotonic reading is used, as the estimator takes durations.
	origin time.Time

	// Atomic inside.
	est      loadest.Estimator
	trailers trailerCache
}

// New returns a Server with no calls in flight and no latency known.
func New() *Server {
	return &Server{origin: time.Now()}
}

// Load returns the calls in flight now and the latency a call arriving now
// can expect, to within 1.6%; 0 means unknown. These are the figures
// reported to clients.
func (s *Server) Load() (rif int, latency time.Duration) {
	return s.load(time.Since(s.origin))
}

// load is the report at now: latency is quantized so that the three ways
// of reporting agree and reports repeat.
func (s *Server) load(now time.Duration) (rif int, latency time.Duration) {
	rif, latency = s.est.Load(now)
	return rif, quantize(latency)
}

// UnaryInterceptor returns the interceptor that counts unary calls in RIF,
// learns their latency and adds the report to their trailer.
func (s *Server) UnaryInterceptor() grpc.UnaryServerInterceptor {
	return s.unary
}

// StreamInterceptor returns the interceptor that counts streams in RIF for
// their lifetime and adds the report to their trailer.
func (s *Server) StreamInterceptor() grpc.StreamServerInterceptor {
	return s.stream
}

// Register registers the probe service, pickwise.serverload.v1.LoadProbe,
// on r. Its answers carry the same figures as Load.
func (s *Server) Register(r grpc.ServiceRegistrar) {
	loadpb.RegisterLoadProbeServer(r, probeService{s: s})
}

// MetricsProvider returns a provider for grpc's ORCA service
// (orca.ServiceOptions.ServerMetricsProvider) whose reports are base's
// with this server's figures added as named metrics. The figures are read
// as each report is sent, so nothing runs between reports. base may be
// nil, for reports with these figures only.
func (s *Server) MetricsProvider(base orca.ServerMetricsProvider) orca.ServerMetricsProvider {
	return metricsProvider{s: s, base: base}
}

func (s *Server) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (resp any, err error) {
	if !counted(info.FullMethod) {
		return handler(ctx, req)
	}
	start := time.Now()
	tok := s.est.Begin()
	succeeded := false
	// Deferred so that a call that panics past a recovering interceptor
	// still leaves RIF.
	defer func() {
		rif, lat := s.end(tok, start, succeeded)
		if rec := orca.CallMetricsRecorderFromContext(ctx); rec != nil {
			record(rec, rif, lat)
			return
		}
		grpc.SetTrailer(ctx, s.trailers.get(rif, lat))
	}()
	resp, err = handler(ctx, req)
	succeeded = err == nil
	return resp, err
}

func (s *Server) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	if !counted(info.FullMethod) {
		return handler(srv, ss)
	}
	tok := s.est.Begin()
	defer func() {
		rif, lat := s.end(tok, time.Time{}, false)
		if rec := orca.CallMetricsRecorderFromContext(ss.Context()); rec != nil {
			record(rec, rif, lat)
			return
		}
		ss.SetTrailer(s.trailers.get(rif, lat))
	}()
	return handler(srv, ss)
}

// end counts a call out, with its latency if sample, and returns the load
// a call arriving now would find: the figures of the call's report.
func (s *Server) end(tok loadest.Token, start time.Time, sample bool) (rif int, latency time.Duration) {
	end := time.Now()
	now := end.Sub(s.origin)
	if sample {
		s.est.End(tok, now, end.Sub(start))
	} else {
		s.est.Drop(tok)
	}
	return s.load(now)
}

func counted(method string) bool {
	return !strings.HasPrefix(method, probePrefix) &&
		!strings.HasPrefix(method, orcaPrefix) &&
		!strings.HasPrefix(method, healthPrefix)
}

func record(rec orca.CallMetricsRecorder, rif int, latency time.Duration) {
	rec.SetNamedMetric(RIFMetric, float64(rif))
	rec.SetNamedMetric(LatencyMetric, latency.Seconds())
}

type probeService struct {
	loadpb.UnimplementedLoadProbeServer
	s *Server
}

func (p probeService) Probe(context.Context, *loadpb.ProbeRequest) (*loadpb.ProbeResponse, error) {
	rif, lat := p.s.Load()
	return &loadpb.ProbeResponse{
		RequestsInFlight: uint32(min(uint64(rif), math.MaxUint32)),
		LatencyNanos:     int64(lat),
	}, nil
}

type metricsProvider struct {
	s    *Server
	base orca.ServerMetricsProvider
}

func (p metricsProvider) ServerMetrics() *orca.ServerMetrics {
	sm := orca.ServerMetrics{
		CPUUtilization: -1, MemUtilization: -1, AppUtilization: -1, QPS: -1, EPS: -1,
		Utilization: map[string]float64{}, RequestCost: map[string]float64{},
	}
	if p.base != nil {
		if b := p.base.ServerMetrics(); b != nil {
			sm = *b
		}
	}
	// A provider's metrics are read-only: the named ones are copied.
	named := make(map[string]float64, len(sm.NamedMetrics)+2)
	maps.Copy(named, sm.NamedMetrics)
	rif, lat := p.s.Load()
	named[RIFMetric] = float64(rif)
	named[LatencyMetric] = lat.Seconds()
	sm.NamedMetrics = named
	return &sm
}
