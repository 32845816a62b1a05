package serverload

import (
	"math"
	"testing"
	"time"

	v3orcapb "github.com/cncf/xds/go/xds/data/orca/v3"
	v3orcaservicegrpc "github.com/cncf/xds/go/xds/service/orca/v3"
	"github.com/google/go-cmp/cmp"
	"github.com/pickwise/pickwise/internal/loadpb"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
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
		{math.MaxUint32, time.Hour},
		{1 << 40, 1},
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
