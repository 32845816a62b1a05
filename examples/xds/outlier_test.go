package main

import (
	"context"
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"

	"github.com/pickwise/pickwise/examples/xds/internal/xdsenv"
	"github.com/pickwise/pickwise/interop/server"
)

// TestOutlierDetectionComposes runs grpc's outlier_detection_experimental
// (registered by grpc's xds package) as the parent of pickwise_p2c over
// the four backends, one of which fails every call. With pickwise's own
// failure handling off, the black hole leaves the picker only because
// outlier detection ejected it: its ejection reaches pickwise as an
// endpoint that is no longer READY. With both on, they compose: calls
// flow, and the black hole draws next to nothing.
func TestOutlierDetectionComposes(t *testing.T) {
	if err := env.Patch(0, func(b *server.Behavior) { b.ErrorRate, b.ErrorCode = 1, "UNAVAILABLE" }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Patch(0, func(b *server.Behavior) { b.ErrorRate = 0 }) })
	for _, tc := range []struct{ name, child string }{
		{"pickwise failure handling off", `{"pickwise_p2c":{"failurePenalty":{"enabled":false}}}`},
		{"both", `{"pickwise_p2c":{}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sc := fmt.Sprintf(`{"loadBalancingConfig":[{"outlier_detection_experimental":{`+
				`"interval":"0.1s","baseEjectionTime":"30s","maxEjectionPercent":25,`+
				`"failurePercentageEjection":{"threshold":50,"enforcementPercentage":100,"minimumHosts":3,"requestVolume":5},`+
				`"childPolicy":[%s]}}]}`, tc.child)
			r := manual.NewBuilderWithScheme(fmt.Sprintf("od-%d", time.Now().UnixNano()))
			var eps []resolver.Endpoint
			for _, a := range env.Addrs {
				eps = append(eps, resolver.Endpoint{Addresses: []resolver.Address{{Addr: a}}})
			}
			r.InitialState(resolver.State{Endpoints: eps})
			conn, err := grpc.NewClient(r.Scheme()+":///od", grpc.WithResolvers(r),
				grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithDefaultServiceConfig(sc))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			// Enough calls for outlier detection's request volume, then
			// two of its intervals.
			if _, _, err := xdsenv.Drive(ctx, conn, 400, 4, nil); err == nil {
				t.Log("no call failed while warming up")
			}
			time.Sleep(300 * time.Millisecond)
			for _, b := range env.Backends {
				b.Reset(false)
			}
			_, failed, _ := xdsenv.Drive(ctx, conn, 2000, 8, nil)
			hole := env.Backends[0].Stats()
			share := float64(hole.Served+hole.Failed) / 2000
			t.Logf("%s: the black hole got %.2f%% of 2000 calls; %d calls failed", tc.name, 100*share, failed)
			if share > 0.01 {
				t.Errorf("black hole's share %.2f%% under outlier detection, want <= 1%%: its ejection did not reach the policy", 100*share)
			}
		})
	}
}
