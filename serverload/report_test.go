package serverload

import (
	"math"
	"reflect"
	"sync"
	"testing"
	"time"

	v3orcapb "github.com/cncf/xds/go/xds/data/orca/v3"
	v3orcaservicegrpc "github.com/cncf/xds/go/xds/service/orca/v3"
	"github.com/google/go-cmp/cmp"
	"github.com/pickwise/pickwise/internal/loadpb"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
)

// TestTrailerEncoding: the hand-encoded report decodes as the
// OrcaLoadReport it stands for, and is byte for byte what proto.Marshal
// writes for it.
func TestTrailerEncoding(t *testing.T) {
	tests := []struct {
		rif int
		lat time.Duration
	}{
		{0, 0},
		{1, time.Millisecond},
		{3, 1234567 * time.Nanosecond},
		{math.MaxInt32, time.Hour},
		{1 << 30, 1},
	}
	for _, tc := range tests {
		md := trailer(tc.rif, tc.lat)
		vs := md.Get(trailerKey)
		if len(md) != 1 || len(vs) != 1 {
			t.Fatalf("trailer(%d, %v) = %v, want one %s value", tc.rif, tc.lat, md, trailerKey)
		}
		want := &v3orcapb.OrcaLoadReport{NamedMetrics: map[string]float64{
			RIFMetric:     float64(tc.rif),
			LatencyMetric: tc.lat.Seconds(),
		}}
		got := new(v3orcapb.OrcaLoadReport)
		if err := proto.Unmarshal([]byte(vs[0]), got); err != nil {
			t.Fatalf("trailer(%d, %v): %v", tc.rif, tc.lat, err)
		}
		if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
			t.Errorf("trailer(%d, %v) decodes as (-want +got):\n%s", tc.rif, tc.lat, diff)
		}
		b, err := proto.MarshalOptions{Deterministic: true}.Marshal(want)
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != vs[0] {
			t.Errorf("trailer(%d, %v) = %x, proto.Marshal writes %x", tc.rif, tc.lat, vs[0], b)
		}
	}
}

// TestNotCountedServices: the prefixes name the services they mean.
func TestNotCountedServices(t *testing.T) {
	for _, name := range []string{
		loadpb.LoadProbe_ServiceDesc.ServiceName,
		v3orcaservicegrpc.OpenRcaService_ServiceDesc.ServiceName,
		healthpb.Health_ServiceDesc.ServiceName,
	} {
		if counted("/" + name + "/Any") {
			t.Errorf("calls to %s count in RIF", name)
		}
	}
	for _, m := range []string{"/pickwise.interop.Backend/Call", "/grpc.health.v1.HealthX/Check", "", "/"} {
		if !counted(m) {
			t.Errorf("calls to %q do not count in RIF", m)
		}
	}
}

func TestQuantize(t *testing.T) {
	prev := time.Duration(0)
	for d := time.Duration(1); d < time.Hour; d = d*21/20 + 1 {
		q := quantize(d)
		if rel := math.Abs(float64(q-d)) / float64(d); rel > 1.0/64 {
			t.Errorf("quantize(%v) = %v, %.3g off, want within 1/64", d, q, rel)
		}
		if quantize(q) != q {
			t.Errorf("quantize(%v) = %v, but quantize(%v) = %v", d, q, q, quantize(q))
		}
		if q < prev {
			t.Errorf("quantize(%v) = %v, below a shorter latency's %v", d, q, prev)
		}
		prev = q
	}
	if quantize(0) != 0 || quantize(-1) != 0 {
		t.Errorf("quantize(0), quantize(-1) = %v, %v; want 0 (unknown)", quantize(0), quantize(-1))
	}
}

// TestTrailerCache: a report always gets a trailer that says it, shared
// with the last call that made the same report, whatever collides.
func TestTrailerCache(t *testing.T) {
	var c trailerCache
	same := func(a, b metadata.MD) bool { return reflect.ValueOf(a).Pointer() == reflect.ValueOf(b).Pointer() }
	check := func(rif int, lat time.Duration) metadata.MD {
		t.Helper()
		md := c.get(rif, lat)
		if want := trailer(rif, lat); md.Get(trailerKey)[0] != want.Get(trailerKey)[0] {
			t.Fatalf("get(%d, %v) = a trailer for another report", rif, lat)
		}
		return md
	}
	a := check(3, quantize(time.Millisecond))
	if b := check(3, quantize(time.Millisecond)); !same(a, b) {
		t.Errorf("the same report twice built two trailers")
	}
	for rif := range 100 {
		for lat := time.Microsecond; lat < time.Second; lat *= 3 {
			check(rif, quantize(lat))
		}
	}
}

func TestTrailerCacheConcurrent(t *testing.T) {
	var c trailerCache
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 1000 {
				rif, lat := (g+i)%20, quantize(time.Duration(1+i%50)*time.Millisecond)
				if got, want := c.get(rif, lat).Get(trailerKey)[0], trailer(rif, lat).Get(trailerKey)[0]; got != want {
					t.Errorf("get(%d, %v) = a trailer for another report", rif, lat)
					return
				}
			}
		})
	}
	wg.Wait()
}

// sink keeps benchmarked trailers on the heap, as grpc's API makes them.
var sink metadata.MD

// BenchmarkTrailer: a trailer built, as on a cache miss, and found.
func BenchmarkTrailer(b *testing.B) {
	b.Run("built", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			sink = trailer(3, time.Millisecond)
		}
	})
	b.Run("cached", func(b *testing.B) {
		var c trailerCache
		b.ReportAllocs()
		for b.Loop() {
			sink = c.get(3, time.Millisecond)
		}
	})
}
