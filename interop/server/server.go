package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"math"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pickwise/pickwise/internal/pause"
	"github.com/pickwise/pickwise/serverload"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/orca"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// orcaMinReportingInterval is the smallest MinReportingInterval grpc's
// public ORCA API accepts: orca.NewService raises anything lower to 30s, and
// the switch that lifts the floor lives in a grpc-internal package this
// module cannot import. Passing the floor itself lets clients ask for any
// interval from 30s up.
const orcaMinReportingInterval = 30 * time.Second

// maxPause caps a sampled service time. A lognormal tail can produce values
// past time.Duration's range; a day is longer than any lab run.
const maxPause = 24 * time.Hour

// rebindTimeout bounds how long Restart keeps trying to listen on the old
// address. The port is normally free the moment Stop returns, but another
// socket may hold it briefly, and a slow Restart is better than a flaky one.
const rebindTimeout = 2 * time.Second

// Stats is the server's own view of its traffic, as returned by
// Server.Stats and the Admin/Stats RPC. Counters start at zero when the
// server is created and, Connections aside, again at every Reset.
type Stats struct {
	// Name is the server's name, as in replies and the x-backend trailer.
	Name string `json:"name"`
	// Received counts calls that reached the server, counted on arrival
	// whatever their outcome, so a test can see a call land while it is
	// still in service. Once every call has ended it is Served + Failed +
	// Canceled.
	Received int64 `json:"received"`
	// Served counts calls answered successfully.
	Served int64 `json:"served"`
	// Failed counts injected failures (see Behavior.ErrorRate).
	Failed int64 `json:"failed"`
	// Canceled counts calls the client gave up on (cancellation or
	// deadline) while they were queued or in service; they are neither
	// served nor failed, and they do not count towards QPS.
	Canceled int64 `json:"canceled"`
	// InFlight is the number of calls being worked on now: those holding a
	// capacity slot plus injected failures waiting out ErrorLatency. Queued
	// calls are not included.
	InFlight int `json:"inFlight"`
	// Queued is the number of calls waiting for a capacity slot.
	Queued int `json:"queued"`
	// Utilization is the computed utilization (calls in service /
	// capacity, or / 100 capped at 1 with unlimited capacity). It is the
	// truth even when ORCA is told to report a fixed value.
	Utilization float64 `json:"utilization"`
	// QPS is calls completed (served or failed) per second over the last
	// second.
	QPS float64 `json:"qps"`
	// EPS is injected failures per second over the last second.
	EPS float64 `json:"eps"`
	// UptimeSeconds is the time since the server began serving, or since
	// its last Restart; 0 before.
	UptimeSeconds float64 `json:"uptimeSeconds"`
	// Probes counts the load probes answered (pickwise_prequal's, served
	// by the serverload package): they are questions about the load, not
	// calls, so Received leaves them out.
	Probes int64 `json:"probes"`
	// Connections counts the TCP connections the server has accepted since
	// New, across restarts: the server's view of which clients connect to
	// it, for policies that choose which backends to connect to. Reset
	// leaves it alone, because connections outlive the traffic phase a
	// Reset starts: a client connected before it is still connected after.
	Connections int64 `json:"connections"`
}

// Option configures a Server beyond its Behavior.
type Option func(*Server)

// WithLogger logs one line per Call (request key, status, duration) and
// each behavior change to l. Without it the server logs nothing, because
// a lab run makes far more calls than anyone reads.
func WithLogger(l *log.Logger) Option { return func(s *Server) { s.logger = l } }

// Server is a backend for load-balancing experiments: one gRPC server that
// serves BackendService (the traffic), AdminService (run-time control) and
// grpc's ORCA OpenRcaService (out-of-band load reports) on one listener,
// with serverload's probe service and per-call reports for pickwise_prequal.
//
// Start it with Start or Serve and end it with Stop, or gracefully with
// Drain. Restart then serves again on the same address, with the same
// behavior and counters, which is how a rebooted server looks to its
// clients.
type Server struct {
	// Immutable after New.
	name    string
	oob     orca.ServerMetricsRecorder // read by grpc's ORCA service
	reports *serverload.Server         // RIF and latency, for pickwise_prequal
	logger  *log.Logger                // nil: no logging
	kick    chan struct{}              // cap 1: wakes the ORCA refresher

	// behavior is read once per call without a lock. Writers hold setMu,
	// so that a patch (read, modify, write) is atomic and so that the
	// gate's capacity and the ORCA recorder change in step with it.
	setMu    sync.Mutex
	behavior atomic.Pointer[Behavior]

	// gate and rates synchronize themselves.
	gate  *gate
	rates *rates

	// Atomic: touched by every call.
	received, served, failed, canceled atomic.Int64
	probes                             atomic.Int64 // load probes answered
	failing                            atomic.Int64 // injected failures in ErrorLatency
	failNext                           atomic.Int64 // calls still to fail (Behavior.FailNext)
	coldSince                          atomic.Int64 // UnixNano of the cold-start origin
	startedAt                          atomic.Int64 // UnixNano serving (re)began; 0 before
	connections                        atomic.Int64 // accepted, across restarts

	// Guarded by mu: the serving lifecycle. A run is one period of
	// serving, from Start, Serve or Restart to Stop; each has its own
	// grpc.Server, because a stopped one cannot serve again.
	mu      sync.Mutex
	srv     *grpc.Server   // of the current run, or of the next one
	lis     net.Listener   // of the current or last run; nil before any
	serving bool           // a run is in progress
	stopped bool           // Stop was called: Start and Serve refuse, Restart may serve
	quit    chan struct{}  // of the current run; closed by Stop
	bg      sync.WaitGroup // the run's ORCA refresher and, unless Serve runs it, its Serve loop
}

// New creates a Server named name (used in replies, the x-backend trailer
// and Stats; printable ASCII, because it travels in metadata) with
// behavior b, defaulted and validated as Behavior.Patch describes. It does
// not listen yet.
func New(name string, b Behavior, opts ...Option) (*Server, error) {
	if name == "" {
		return nil, errors.New(errPrefix + "name must not be empty")
	}
	for _, r := range name {
		if r < 0x20 || r > 0x7e {
			return nil, fmt.Errorf("%sname %q: must be printable ASCII (it is sent as metadata)", errPrefix, name)
		}
	}
	if err := b.normalize(); err != nil {
		return nil, err
	}
	now := time.Now()
	s := &Server{
		name:    name,
		oob:     orca.NewServerMetricsRecorder(),
		reports: serverload.New(),
		kick:    make(chan struct{}, 1),
		gate:    newGate(b.Capacity),
		rates:   newRates(now),
	}
	for _, o := range opts {
		o(s)
	}
	s.behavior.Store(&b)
	s.coldSince.Store(now.UnixNano())
	// Built now rather than when serving starts, so that a registration
	// error surfaces from New.
	srv, err := s.newGRPCServer()
	if err != nil {
		return nil, err
	}
	s.srv = srv
	return s, nil
}

// newGRPCServer builds the grpc.Server of one run, serving all four
// services.
func (s *Server) newGRPCServer() (*grpc.Server, error) {
	// The per-call ORCA option must come first (its documentation and
	// serverload's ask for that) so its interceptor wraps every handler,
	// and serverload's figures join its report. nil: per-call reports
	// carry only what the handlers record, not the OOB numbers.
	// WaitForHandlers makes Stop return only after every handler has, so
	// no handler goroutine outlives Stop.
	reportLoad := s.reports.UnaryInterceptor()
	// Admin calls are the lab's control, not work: counted, they would
	// add to RIF and teach the latency estimate their microseconds.
	trafficOnly := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if info.FullMethod == CallMethod {
			return reportLoad(ctx, req, info, handler)
		}
		return handler(ctx, req)
	}
	srv := grpc.NewServer(orca.CallMetricsServerOption(nil),
		grpc.ChainUnaryInterceptor(s.countProbes, trafficOnly),
		grpc.ChainStreamInterceptor(s.reports.StreamInterceptor()),
		grpc.WaitForHandlers(true))
	srv.RegisterService(&backendDesc, s)
	srv.RegisterService(&adminDesc, s)
	s.reports.Register(srv)
	if err := orca.Register(srv, orca.ServiceOptions{
		ServerMetricsProvider: s.oob,
		MinReportingInterval:  orcaMinReportingInterval,
	}); err != nil {
		return nil, fmt.Errorf("%sregister ORCA service: %w", errPrefix, err)
	}
	return srv, nil
}

// probeMethod is serverload's probe RPC, which Stats.Probes counts.
const probeMethod = "/pickwise.serverload.v1.LoadProbe/Probe"

// countProbes counts the probes this server answers: serverload leaves
// them out of its figures, and the lab needs their cost to servers.
func (s *Server) countProbes(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if info.FullMethod == probeMethod {
		s.probes.Add(1)
	}
	return handler(ctx, req)
}

// Name returns the server's name.
func (s *Server) Name() string { return s.name }

// Start listens on addr (for example "127.0.0.1:0") and serves in the
// background until Stop. It returns the bound address, the same as Addr.
func (s *Server) Start(addr string) (string, error) {
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return "", fmt.Errorf("%s%s: listen on %s: %w", errPrefix, s.name, addr, err)
	}
	if _, err := s.begin(lis, true); err != nil {
		return "", err
	}
	return lis.Addr().String(), nil
}

// Serve serves on lis and blocks until Stop, when it returns nil, or until
// lis fails. It is for callers that own the listener (an in-memory one in
// a test, an inherited socket); Start is the usual way. Serve closes lis
// when it returns, and fails at once if the Server was started already or
// stopped.
func (s *Server) Serve(lis net.Listener) error {
	srv, err := s.begin(lis, false)
	if err != nil {
		return err
	}
	err = srv.Serve(countingListener{lis, &s.connections})
	if errors.Is(err, grpc.ErrServerStopped) {
		// Stop won the race with the line above; that is a normal end.
		return nil
	}
	return err
}

// begin starts the first run on lis, for Start and Serve. It returns the
// run's grpc.Server, which Serve must use rather than s.srv: once mu is
// released, a Stop and Restart may replace s.srv.
func (s *Server) begin(lis net.Listener, async bool) (*grpc.Server, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.serving:
		lis.Close()
		return nil, fmt.Errorf("%s%s: already serving on %s", errPrefix, s.name, s.lis.Addr())
	case s.stopped:
		lis.Close()
		return nil, fmt.Errorf("%s%s: %w", errPrefix, s.name, grpc.ErrServerStopped)
	}
	s.runLocked(lis, async)
	return s.srv, nil
}

// runLocked starts a run of s.srv on lis: the refresher and, if async, the
// Serve loop. Starting them under mu, and only while no run is in progress,
// guarantees that Stop's Wait sees every goroutine the run will start.
func (s *Server) runLocked(lis net.Listener, async bool) {
	s.lis, s.serving = lis, true
	s.quit = make(chan struct{})
	now := time.Now()
	// Warm-up starts when traffic can arrive, not when the struct was
	// built, so a server created early, or restarted, begins cold.
	s.startedAt.Store(now.UnixNano())
	s.coldSince.Store(now.UnixNano())
	quit := s.quit
	s.bg.Go(func() { s.refreshLoop(quit) })
	if async {
		srv := s.srv
		s.bg.Go(func() {
			if err := srv.Serve(countingListener{lis, &s.connections}); err != nil && s.logger != nil {
				s.logger.Printf("%s: serve: %v", s.name, err)
			}
		})
	}
}

// Addr is the address being served ("127.0.0.1:port"), or "" before Start
// or Serve. It keeps its value through Stop, because Restart serves on it
// again.
func (s *Server) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lis == nil {
		return ""
	}
	return s.lis.Addr().String()
}

// Stop kills the server abruptly, as a crash would look to clients: the
// listener and every connection close, in-flight and queued calls fail,
// ORCA streams end. It returns once every handler and background goroutine
// has returned. Stopping a stopped server does nothing; Restart serves
// again.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopped = true
	if !s.serving {
		// Nothing runs, but a grpc.Server that never served still holds
		// its registration with grpc's channelz until stopped; stopping
		// one twice does nothing.
		s.srv.Stop()
		return
	}
	s.serving = false
	// Closing the transports cancels every call's context, which is what
	// wakes handlers sleeping or queued in the gate. Handlers never take
	// mu, so holding it here cannot deadlock.
	s.srv.Stop()
	close(s.quit)
	s.bg.Wait()
}

// Drain shuts the server down gracefully, as a process stopped for a
// rolling restart does: the listener closes, every connection is sent a
// GOAWAY, so that clients place new calls elsewhere, and the calls in
// flight and queued run to their end. Calls that outlast grace (an
// out-of-band ORCA stream never ends by itself) are then cut as Stop cuts
// them, as an orchestrator's kill after its grace period would. It
// returns once every handler and background goroutine has returned.
// Restart serves again; draining a stopped server does nothing.
func (s *Server) Drain(grace time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopped = true
	if !s.serving {
		s.srv.Stop()
		return
	}
	s.serving = false
	// Handlers never take mu, so they can finish while it is held.
	srv, done := s.srv, make(chan struct{})
	go func() {
		srv.GracefulStop()
		close(done)
	}()
	t := time.NewTimer(grace)
	select {
	case <-done:
	case <-t.C:
		srv.Stop()
		<-done
	}
	t.Stop()
	close(s.quit)
	s.bg.Wait()
}

// Restart serves again after Stop or Drain, on the TCP address the server
// last listened on, in the background as Start does. Clients that hold the
// address reconnect without any resolver change, as they would to a
// rebooted server. Behavior and counters carry over; uptime and the
// cold-start clock begin again, as in a new process. Restarting a running
// server does nothing, and a server that never served has no address to
// restart on.
func (s *Server) Restart() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.serving:
		return nil
	case s.lis == nil:
		return fmt.Errorf("%s%s: restart: never served, so there is no address to serve again", errPrefix, s.name)
	}
	srv, err := s.newGRPCServer()
	if err != nil {
		return err
	}
	addr := s.lis.Addr().String()
	deadline := time.Now().Add(rebindTimeout)
	for {
		lis, err := net.Listen("tcp", addr)
		if err == nil {
			s.srv = srv
			s.runLocked(lis, true)
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s%s: restart: listen on %s: %w", errPrefix, s.name, addr, err)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// Running reports whether the server is serving: started, and not stopped
// since, or restarted.
func (s *Server) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.serving
}

// Behavior returns the behavior in effect, with defaults filled in.
func (s *Server) Behavior() Behavior { return *s.behavior.Load() }

// SetBehavior replaces the whole behavior. It is validated first; an
// invalid one is rejected with an error naming the field, and the old one
// stays. Calls already running keep the behavior they started with, except
// that a capacity change applies to the queue at once.
func (s *Server) SetBehavior(b Behavior) error {
	if err := b.normalize(); err != nil {
		return err
	}
	s.setMu.Lock()
	defer s.setMu.Unlock()
	s.applyLocked(b)
	return nil
}

// patch applies a JSON patch atomically with respect to other changes and
// returns the result.
func (s *Server) patch(patchJSON string) (Behavior, error) {
	s.setMu.Lock()
	defer s.setMu.Unlock()
	b, err := s.behavior.Load().Patch(patchJSON)
	if err != nil {
		return Behavior{}, err
	}
	s.applyLocked(b)
	return *s.behavior.Load(), nil
}

func (s *Server) applyLocked(b Behavior) {
	if b.FailNext > 0 {
		// Armed here and spent by calls: the stored behavior keeps none,
		// so that a later patch does not fail them again.
		s.failNext.Store(int64(b.FailNext))
		b.FailNext = 0
	}
	s.behavior.Store(&b)
	s.gate.setCapacity(b.Capacity)
	// Refresh now rather than at the next tick, so an ORCA stream opened
	// right after the change already reports it.
	s.refreshOOBLocked()
	select {
	case s.kick <- struct{}{}: // the refresher may need a new interval
	default:
	}
	if s.logger != nil {
		js, _ := json.Marshal(b)
		s.logger.Printf("%s: behavior %s", s.name, js)
	}
}

// Reset zeroes the counters and rates in Stats, Connections aside. With
// coldRestart it also restarts the cold-start clock, as if the process had
// just restarted but without dropping connections, so the lab can replay a
// warm-up at will.
func (s *Server) Reset(coldRestart bool) {
	now := time.Now()
	s.received.Store(0)
	s.served.Store(0)
	s.failed.Store(0)
	s.canceled.Store(0)
	s.probes.Store(0)
	s.rates.reset(now)
	if coldRestart {
		s.coldSince.Store(now.UnixNano())
	}
	s.setMu.Lock()
	s.refreshOOBLocked()
	s.setMu.Unlock()
}

// Stats returns a snapshot of the counters and current load.
func (s *Server) Stats() Stats {
	now := time.Now()
	active, queued, capacity := s.gate.load()
	qps, eps := s.rates.rate(now)
	st := Stats{
		Name:        s.name,
		Received:    s.received.Load(),
		Served:      s.served.Load(),
		Failed:      s.failed.Load(),
		Canceled:    s.canceled.Load(),
		Probes:      s.probes.Load(),
		InFlight:    active + int(s.failing.Load()),
		Queued:      queued,
		Utilization: computedUtilization(active, capacity),
		QPS:         qps,
		EPS:         eps,
		Connections: s.connections.Load(),
	}
	if t := s.startedAt.Load(); t != 0 {
		st.UptimeSeconds = now.Sub(time.Unix(0, t)).Seconds()
	}
	return st
}

// computedUtilization is calls in service over capacity. With unlimited
// capacity there is no denominator, so 100 concurrent calls stand for
// "full"; that keeps the number in ORCA's usual [0, 1] range and still
// rises with load.
func computedUtilization(active, capacity int) float64 {
	if capacity == 0 {
		return min(float64(active)/100, 1)
	}
	return float64(active) / float64(capacity)
}

// load is the triple both ORCA channels report.
func (s *Server) load(b *Behavior) (util, qps, eps float64) {
	active, _, capacity := s.gate.load()
	qps, eps = s.rates.rate(time.Now())
	switch b.ORCA.Utilization {
	case UtilizationFixed:
		util = b.ORCA.FixedUtilization
	case UtilizationRate:
		util = qps / b.ORCA.RatedQPS
	default:
		util = computedUtilization(active, capacity)
	}
	return util, qps, eps
}

// refreshOOBLocked brings the out-of-band recorder up to date, or empties it
// when out-of-band reporting is off. The caller holds setMu, so a refresh
// based on an old behavior can never overwrite one based on a newer one.
func (s *Server) refreshOOBLocked() {
	b := s.behavior.Load()
	if !b.ORCA.OutOfBand {
		s.oob.DeleteCPUUtilization()
		s.oob.DeleteQPS()
		s.oob.DeleteEPS()
		return
	}
	util, qps, eps := s.load(b)
	s.oob.SetCPUUtilization(util)
	s.oob.SetQPS(qps)
	s.oob.SetEPS(eps)
}

// refreshLoop refreshes the out-of-band recorder every ORCA.Interval while
// out-of-band reporting is on, and sleeps until the next behavior change
// while it is off. It ends when Stop closes quit, the channel of the run
// it belongs to.
func (s *Server) refreshLoop(quit <-chan struct{}) {
	for {
		s.setMu.Lock()
		s.refreshOOBLocked()
		o := s.behavior.Load().ORCA
		s.setMu.Unlock()

		var tick <-chan time.Time
		var t *time.Timer
		if o.OutOfBand {
			t = time.NewTimer(time.Duration(o.Interval))
			tick = t.C
		}
		select {
		case <-quit:
		case <-s.kick:
		case <-tick:
		}
		if t != nil {
			t.Stop()
		}
		select {
		case <-quit:
			return
		default:
		}
	}
}

// outcome is how a call ended, for the counters.
type outcome int

const (
	served outcome = iota
	failed
	canceled
)

func (s *Server) rpcCall(ctx context.Context, req *wrapperspb.StringValue) (proto.Message, error) {
	s.received.Add(1)
	// Set first so that it is sent on every path, failures included.
	_ = grpc.SetTrailer(ctx, metadata.Pairs(TrailerBackend, s.name))
	start := time.Now()
	err := s.handle(ctx, s.behavior.Load())
	if s.logger != nil {
		s.logger.Printf("%s: call key=%q code=%v took=%v", s.name, req.GetValue(), status.Code(err), time.Since(start).Round(time.Microsecond))
	}
	if err != nil {
		return nil, err
	}
	return wrapperspb.String(s.name), nil
}

// handle plays one call under behavior b, read once on arrival so that a
// concurrent change cannot give a call half of each; only the slowdown is
// read as the call enters service (see Behavior.Slowdown).
func (s *Server) handle(ctx context.Context, b *Behavior) error {
	if s.failNext.Load() > 0 && s.failNext.Add(-1) >= 0 {
		s.finish(ctx, b, failed)
		return status.Errorf(b.Code(), "%s%s: injected one-off failure", errPrefix, s.name)
	}
	if b.ErrorRate > 0 && rand.Float64() < b.ErrorRate {
		// Decided before the queue: a server that sheds or drops work
		// does so without waiting for a worker.
		s.failing.Add(1)
		err := pause.For(ctx, time.Duration(b.ErrorLatency))
		s.failing.Add(-1)
		if err != nil {
			s.finish(ctx, b, canceled)
			return err
		}
		s.finish(ctx, b, failed)
		return status.Errorf(b.Code(), "%s%s: injected failure", errPrefix, s.name)
	}
	if err := s.gate.acquire(ctx); err != nil {
		s.finish(ctx, b, canceled)
		return status.FromContextError(err).Err()
	}
	// Released after finish, so the per-call utilization counts this call:
	// a report that says "idle" while answering would mislead a balancer.
	defer s.gate.release()
	if err := pause.For(ctx, s.serviceTime(b, s.behavior.Load().Slowdown)); err != nil {
		s.finish(ctx, b, canceled)
		return err
	}
	s.finish(ctx, b, served)
	return nil
}

// finish counts the call and, when per-call ORCA is on, records the load
// report grpc's interceptor puts in the trailer.
func (s *Server) finish(ctx context.Context, b *Behavior, o outcome) {
	switch o {
	case served:
		s.served.Add(1)
	case failed:
		s.failed.Add(1)
	case canceled:
		// The client is gone; nobody would read a report.
		s.canceled.Add(1)
		return
	}
	s.rates.add(time.Now(), o == failed)
	if !b.ORCA.PerCall {
		return
	}
	rec := orca.CallMetricsRecorderFromContext(ctx)
	if rec == nil {
		return
	}
	util, qps, eps := s.load(b)
	rec.SetCPUUtilization(util)
	rec.SetQPS(qps)
	rec.SetEPS(eps)
}

// serviceTime samples how long a successful call takes: lognormal around
// Latency, slowed by the cold-start factor and by slowdown, the
// Behavior.Slowdown in force as the call enters service.
func (s *Server) serviceTime(b *Behavior, slowdown float64) time.Duration {
	d := float64(b.Latency)
	if d == 0 {
		return 0
	}
	if b.LatencySpread > 0 {
		// exp(sigma*N(0,1)) has median 1, so Latency stays the median.
		d *= math.Exp(b.LatencySpread * rand.NormFloat64())
	}
	d *= coldFactor(b, time.Since(time.Unix(0, s.coldSince.Load())))
	d *= max(slowdown, 1)
	return time.Duration(min(d, float64(maxPause)))
}

// coldFactor is the slowdown at time since into the cold-start window:
// ColdFactor at 0, falling linearly to 1 at ColdStart.
func coldFactor(b *Behavior, since time.Duration) float64 {
	if b.ColdStart <= 0 || b.ColdFactor <= 1 || since >= time.Duration(b.ColdStart) {
		return 1
	}
	frac := float64(max(since, 0)) / float64(b.ColdStart)
	return b.ColdFactor + (1-b.ColdFactor)*frac
}

func (s *Server) rpcSetBehavior(_ context.Context, req *wrapperspb.StringValue) (proto.Message, error) {
	b, err := s.patch(req.GetValue())
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	return jsonReply(b)
}

func (s *Server) rpcStats(context.Context, *emptypb.Empty) (proto.Message, error) {
	return jsonReply(s.Stats())
}

// ResetRequest is the JSON the Admin/Reset RPC accepts; an empty request
// string means the zero value.
type ResetRequest struct {
	// ColdRestart also restarts the cold-start clock (see Server.Reset).
	ColdRestart bool `json:"coldRestart"`
}

func (s *Server) rpcReset(_ context.Context, req *wrapperspb.StringValue) (proto.Message, error) {
	var r ResetRequest
	if req.GetValue() != "" {
		if err := decodeStrict(req.GetValue(), &r); err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "%sreset: %v", errPrefix, err)
		}
	}
	s.Reset(r.ColdRestart)
	return jsonReply(s.Stats())
}

// jsonReply wraps v's JSON in a StringValue. The types marshalled here
// cannot fail to encode, but an Internal status is the honest answer if
// one ever does.
func jsonReply(v any) (proto.Message, error) {
	js, err := json.Marshal(v)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "%sencode reply: %v", errPrefix, err)
	}
	return wrapperspb.String(string(js)), nil
}

// countingListener counts the connections it accepts, for
// Stats.Connections.
type countingListener struct {
	net.Listener
	n *atomic.Int64
}

func (l countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.n.Add(1)
	}
	return c, err
}
