package engine

import (
	"context"

	"github.com/pickwise/pickwise/internal/loadpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/balancer"
)

// grpcLoadProber probes over the endpoint's own connection with grpc's
// producer API, as grpc's ORCA and health producers do: a probe is a small
// call on the connection the endpoint's calls use, never a new one.
type grpcLoadProber struct{}

func (grpcLoadProber) Probe(ctx context.Context, sc balancer.SubConn, _ string, answer func(LoadAnswer)) {
	p, release := sc.GetOrBuildProducer(probeProducerBuilder{})
	conn := p.(probeProducer).conn
	go func() {
		defer release()
		resp := new(loadpb.ProbeResponse)
		if err := conn.Invoke(ctx, loadpb.LoadProbe_Probe_FullMethodName, &loadpb.ProbeRequest{}, resp); err != nil {
			answer(LoadAnswer{Err: err})
			return
		}
		answer(LoadAnswer{RIF: resp.GetRequestsInFlight(), Latency: float64(resp.GetLatencyNanos()) / 1e9})
	}()
}

// probeProducerBuilder builds a SubConn's probeProducer; grpc keeps one per
// SubConn while any probe holds it.
type probeProducerBuilder struct{}

func (probeProducerBuilder) Build(cci any) (balancer.Producer, func()) {
	return probeProducer{conn: cci.(grpc.ClientConnInterface)}, func() {}
}

// probeProducer is the way to call one SubConn's server.
type probeProducer struct{ conn grpc.ClientConnInterface }
