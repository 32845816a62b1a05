package sim

import (
	"context"
	"strconv"
	"strings"
	"time"

	v3orcapb "github.com/cncf/xds/go/xds/data/orca/v3"
	"github.com/pickwise/pickwise/internal/engine"
	"github.com/pickwise/pickwise/internal/loadest"
	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Every simulated backend runs serverload, as a server with its
// interceptors and probe service would: it keeps its requests in flight
// and latency by RIF band (internal/loadest, the estimator serverload
// runs), answers load probes, and adds both figures to every response's
// ORCA report. A policy that asks for them (pickwise_prequal) gets them
// in any scenario; the others ignore them.

// defaultProbeRTT is a probe's round trip when Run.ProbeRTT is 0: a
// network hop inside a data centre, each way half of it.
const defaultProbeRTT = time.Millisecond

// withLoad is the report a response sent now carries: the backend's ORCA
// report (nil before its first window closes, as before) with its RIF,
// not counting the call that carries it, and latency estimate added.
func (s *server) withLoad(now time.Duration, r *v3orcapb.OrcaLoadReport) *v3orcapb.OrcaLoadReport {
	if r == nil {
		return nil
	}
	rif, lat := s.est.Load(now)
	return &v3orcapb.OrcaLoadReport{
		CpuUtilization: r.CpuUtilization,
		RpsFractional:  r.RpsFractional,
		Eps:            r.Eps,
		NamedMetrics:   map[string]float64{"pickwise.rif": float64(rif), "pickwise.latency": lat.Seconds()},
	}
}

// prober answers pickwise_prequal's load probes with the state of the
// backend when the probe reaches it, half a round trip after it is sent;
// the answer arrives half a round trip later.
type prober struct {
	state *state
	rtt   time.Duration
}

func (p prober) Probe(_ context.Context, _ balancer.SubConn, addr string, answer func(engine.LoadAnswer)) {
	id, err := strconv.Atoi(strings.TrimPrefix(addr, "backend-"))
	loop := p.state.loop
	if err != nil || id < 0 || id >= len(p.state.servers) {
		loop.After(p.rtt, func() { answer(engine.LoadAnswer{Err: status.Errorf(codes.Unavailable, "sim: no backend %q", addr)}) })
		return
	}
	srv := p.state.servers[id]
	if loop.Now() >= p.state.run.Warmup {
		p.state.res.Probes++
	}
	loop.After(p.rtt/2, func() {
		rif, lat := srv.est.Load(loop.Now())
		a := engine.LoadAnswer{RIF: uint32(rif), Latency: lat.Seconds()}
		loop.After(p.rtt-p.rtt/2, func() { answer(a) })
	})
}

// serverload is a backend's estimator and the calls it counts in.
type serverload = loadest.Estimator
