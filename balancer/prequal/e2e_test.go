package prequal_test

// End-to-end tests: real gRPC servers on 127.0.0.1 running serverload's
// interceptors and probe service, and real channels selecting
// pickwise_prequal by service config. They check what only the whole
// stack shows: probes travel over the connections calls use (no server
// accepts a second one), the servers' reports steer calls off a slow
// server, and a fleet whose servers serve no probes is still served.
// Shares have tolerances wide enough for a two-core machine under -race.

import (
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pickwise/pickwise/balancer/prequal"
	"github.com/pickwise/pickwise/serverload"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"
	"google.golang.org/grpc/status"
)

// e2eProbeMethod is the probe's full method name, as servers see it.
const e2eProbeMethod = "/pickwise.serverload.v1.LoadProbe/Probe"

// e2eServer is one backend: a TestService whose EmptyCall takes delay,
// with or without serverload, counting the connections it accepted and
// the probes it answered or refused.
type e2eServer struct {
	testgrpc.UnimplementedTestServiceServer
	addr     string
	delay    atomic.Int64 // nanoseconds
	accepted atomic.Int64
	probes   atomic.Int64
	srv      *grpc.Server
}

func (s *e2eServer) EmptyCall(context.Context, *testgrpc.Empty) (*testgrpc.Empty, error) {
	time.Sleep(time.Duration(s.delay.Load()))
	return &testgrpc.Empty{}, nil
}

// countingListener counts the connections its server accepts.
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

// e2eStart starts a backend; withLoad runs serverload on it. It stops
// when the test ends.
func e2eStart(t *testing.T, delay time.Duration, withLoad bool) *e2eServer {
	t.Helper()
	s := &e2eServer{}
	s.delay.Store(int64(delay))
	countProbes := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		if info.FullMethod == e2eProbeMethod {
			s.probes.Add(1)
		}
		return h(ctx, req)
	}
	opts := []grpc.ServerOption{grpc.ChainUnaryInterceptor(countProbes)}
	var load *serverload.Server
	if withLoad {
		load = serverload.New()
		opts = append(opts, grpc.ChainUnaryInterceptor(load.UnaryInterceptor()), grpc.ChainStreamInterceptor(load.StreamInterceptor()))
	} else {
		// A server without the probe service refuses the probe as an
		// unknown service; count those refusals.
		opts = append(opts, grpc.UnknownServiceHandler(func(_ any, ss grpc.ServerStream) error {
			if m, ok := grpc.MethodFromServerStream(ss); ok && m == e2eProbeMethod {
				s.probes.Add(1)
			}
			return errUnknown
		}))
	}
	s.srv = grpc.NewServer(opts...)
	if load != nil {
		load.Register(s.srv)
	}
	testgrpc.RegisterTestServiceServer(s.srv, s)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.addr = lis.Addr().String()
	go s.srv.Serve(countingListener{lis, &s.accepted})
	t.Cleanup(s.srv.Stop)
	return s
}

// e2eDial is a channel over the servers selecting pickwise_prequal.
func e2eDial(t *testing.T, servers []*e2eServer, config string) *grpc.ClientConn {
	t.Helper()
	r := manual.NewBuilderWithScheme(fmt.Sprintf("prequal-e2e-%d", e2eSeq.Add(1)))
	var eps []resolver.Endpoint
	for _, s := range servers {
		eps = append(eps, resolver.Endpoint{Addresses: []resolver.Address{{Addr: s.addr}}})
	}
	r.InitialState(resolver.State{Endpoints: eps})
	cc, err := grpc.NewClient(r.Scheme()+":///fleet",
		grpc.WithResolvers(r),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultServiceConfig(fmt.Sprintf(`{"loadBalancingConfig":[{%q:%s}]}`, prequal.Name, config)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return cc
}

var e2eSeq atomic.Int64

// e2eLoad sends calls from workers goroutines until total are done and
// counts them by server address; every call must succeed.
func e2eLoad(t *testing.T, cc *grpc.ClientConn, total, workers int) map[string]int {
	t.Helper()
	client := testgrpc.NewTestServiceClient(cc)
	var (
		mu    sync.Mutex
		got   = map[string]int{}
		left  atomic.Int64
		wg    sync.WaitGroup
		first error
	)
	left.Store(int64(total))
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for left.Add(-1) >= 0 {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				var p peer.Peer
				_, err := client.EmptyCall(ctx, &testgrpc.Empty{}, grpc.Peer(&p))
				cancel()
				mu.Lock()
				if err != nil && first == nil {
					first = err
				}
				if err == nil {
					got[p.Addr.String()]++
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if first != nil {
		t.Fatalf("a call failed: %v", first)
	}
	return got
}

// TestEndToEndSlowServerAvoided: three fast servers and one that takes
// 20 ms; a busy client sends the slow one far less than its even share,
// and probes travel on the connections the calls use.
func TestEndToEndSlowServerAvoided(t *testing.T) {
	var servers []*e2eServer
	for i := range 4 {
		delay := time.Millisecond
		if i == 0 {
			delay = 20 * time.Millisecond
		}
		servers = append(servers, e2eStart(t, delay, true))
	}
	cc := e2eDial(t, servers, `{}`)
	e2eLoad(t, cc, 200, 8) // warm-up: the pool fills
	got := e2eLoad(t, cc, 1000, 8)
	slow := float64(got[servers[0].addr]) / 1000
	t.Logf("shares by server %v, probes %d %d %d %d", got, servers[0].probes.Load(), servers[1].probes.Load(), servers[2].probes.Load(), servers[3].probes.Load())
	if slow > 0.10 {
		t.Errorf("the slow server took %.1f%% of calls, want at most 10%% (even: 25%%)", 100*slow)
	}
	probes := int64(0)
	for _, s := range servers {
		probes += s.probes.Load()
		if n := s.accepted.Load(); n != 1 {
			t.Errorf("server %s accepted %d connections, want 1: probes share the calls' connection", s.addr, n)
		}
	}
	if probes == 0 || probes > 1200 {
		t.Errorf("%d probes for 1,200 calls, want some and at most one per call", probes)
	}
}

// TestEndToEndNoProbeService: servers that run no serverload get every
// call placed, as pickwise_p2c would place it, and are asked for their
// load once per connection.
func TestEndToEndNoProbeService(t *testing.T) {
	var servers []*e2eServer
	for range 4 {
		servers = append(servers, e2eStart(t, time.Millisecond, false))
	}
	cc := e2eDial(t, servers, `{}`)
	got := e2eLoad(t, cc, 800, 8)
	for _, s := range servers {
		if n := got[s.addr]; n < 100 {
			t.Errorf("server %s took %d of 800 calls, want near its share of 200", s.addr, n)
		}
		if n := s.probes.Load(); n > 1 {
			t.Errorf("server %s was asked for its load %d times, want at most once on its one connection", s.addr, n)
		}
	}
}

// errUnknown is how a server without the probe service refuses it.
var errUnknown = status.Error(codes.Unimplemented, "unknown service")
