package serverload_test

import (
	"context"
	"sync/atomic"
	"testing"

	v3orcapb "github.com/cncf/xds/go/xds/data/orca/v3"
	"github.com/pickwise/pickwise/serverload"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/orca"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// BenchmarkUnaryCall is a real unary call over loopback, one at a time,
// to a server without interceptors; to one with an interceptor that does
// nothing (what grpc charges for any interceptor); to one whose
// interceptor only adds a ready-made ORCA trailer of the same size, one
// of 64 in turn (what grpc charges for carrying a per-call report); and
// to servers with serverload's, the second also with grpc's per-call
// ORCA recorder. Run it in rounds with
// -test.count 1 (docs/design/prequal.md has the command), so that each
// round measures every server back to back and the medians compare like
// with like.
func BenchmarkUnaryCall(b *testing.B) {
	servers := []struct {
		name string
		opts func(*serverload.Server) []grpc.ServerOption
	}{
		{"none", func(*serverload.Server) []grpc.ServerOption { return nil }},
		{"noop", func(*serverload.Server) []grpc.ServerOption {
			return []grpc.ServerOption{grpc.ChainUnaryInterceptor(noop)}
		}},
		{"trailer-only", func(*serverload.Server) []grpc.ServerOption {
			return []grpc.ServerOption{grpc.ChainUnaryInterceptor(trailerOnly(b))}
		}},
		{"serverload", func(l *serverload.Server) []grpc.ServerOption {
			return []grpc.ServerOption{grpc.ChainUnaryInterceptor(l.UnaryInterceptor())}
		}},
		{"serverload+orca", func(l *serverload.Server) []grpc.ServerOption {
			return []grpc.ServerOption{orca.CallMetricsServerOption(nil), grpc.ChainUnaryInterceptor(l.UnaryInterceptor())}
		}},
	}
	ctx := context.Background()
	req := &wrapperspb.StringValue{Value: "fast"}
	for _, s := range servers {
		_, cc := serve(b, s.opts(serverload.New()), nil)
		b.Run("interceptor="+s.name, func(b *testing.B) {
			var reply wrapperspb.StringValue
			b.ReportAllocs()
			for b.Loop() {
				if err := cc.Invoke(ctx, callMethod, req, &reply); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func noop(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	return h(ctx, req)
}

// trailerOnly returns an interceptor that adds one of 64 ORCA trailers
// like serverload's, in turn.
func trailerOnly(b *testing.B) grpc.UnaryServerInterceptor {
	var trailers []metadata.MD
	for i := range 64 {
		r, err := proto.Marshal(&v3orcapb.OrcaLoadReport{NamedMetrics: map[string]float64{
			serverload.RIFMetric: float64(i), serverload.LatencyMetric: 0.001 + float64(i)/1e6,
		}})
		if err != nil {
			b.Fatal(err)
		}
		trailers = append(trailers, metadata.Pairs("endpoint-load-metrics-bin", string(r)))
	}
	var n atomic.Uint32
	return func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		resp, err := h(ctx, req)
		grpc.SetTrailer(ctx, trailers[n.Add(1)%64])
		return resp, err
	}
}

// BenchmarkInterceptor is the unary interceptor alone around a handler that
// does nothing, beside the handler called directly. The transport stream
// keeps the trailer as grpc's would, so the allocations counted are the
// report's own.
func BenchmarkInterceptor(b *testing.B) {
	handler := func(context.Context, any) (any, error) { return nil, nil }
	st := &transportStream{}
	ctx := grpc.NewContextWithServerTransportStream(context.Background(), st)
	intercept := serverload.New().UnaryInterceptor()
	b.Run("interceptor=none", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			handler(ctx, nil)
		}
	})
	for _, m := range []struct{ name, method string }{
		{"serverload", callMethod},
		{"serverload-not-counted", "/pickwise.serverload.v1.LoadProbe/Probe"},
	} {
		info := &grpc.UnaryServerInfo{FullMethod: m.method}
		b.Run("interceptor="+m.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				intercept(ctx, nil, info, handler)
			}
		})
	}
}

type transportStream struct{ trailer metadata.MD }

func (*transportStream) Method() string                    { return callMethod }
func (*transportStream) SetHeader(metadata.MD) error       { return nil }
func (*transportStream) SendHeader(metadata.MD) error      { return nil }
func (s *transportStream) SetTrailer(md metadata.MD) error { s.trailer = md; return nil }
