// Command xds runs pickwise policies behind a real xDS management server.
//
// It starts, on 127.0.0.1, four gRPC backends and a go-control-plane xDS
// management server that serves a Listener (with an inline route to one
// cluster), an EDS Cluster and a ClusterLoadAssignment. The Cluster's
// load_balancing_policy names a pickwise policy through an
// xds.type.v3.TypedStruct whose type_url is
// "type.googleapis.com/<policy name>" and whose value is the policy's JSON
// config (gRFC A52). A client dials xds:///<service> and the program prints
// each backend's share of the calls:
//
//   - pickwise_p2c with one backend 20x slower than the others;
//   - pickwise_p2c with EDS load_balancing_weight 1:1:4;
//   - pickwise_ring_hash with the same weights and random keys
//     (ringhash.WithKey);
//   - pickwise_p2c after the server replaces backend-0 by backend-3;
//   - pickwise_peak_ewma with one backend 20x slower than the others;
//   - pickwise_orca_wrr with backends that report, per call (ORCA),
//     ratings of 500, 500 and 2000 calls per second;
//   - pickwise_subset over pickwise_p2c, with subsets of 2 of 3 backends.
//
// Using the policies under xDS takes a blank import of
// google.golang.org/grpc/xds and of each pickwise balancer, a bootstrap
// (normally the file named by GRPC_XDS_BOOTSTRAP or the JSON in
// GRPC_XDS_BOOTSTRAP_CONFIG; this program builds its own and passes it with
// xds.NewXDSResolverWithConfigForTesting), and the cluster's
// load_balancing_policy.
//
// This is a module of its own, so that the library's go.mod does not pull
// in go-control-plane. Run it from examples/xds:
//
//	go run .
//	go run . -rpcs 3000 -concurrency 16
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"math/rand/v2"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/xds" // registers the xds resolver and balancers

	_ "github.com/pickwise/pickwise/balancer/orcawrr"
	_ "github.com/pickwise/pickwise/balancer/p2c"
	_ "github.com/pickwise/pickwise/balancer/peakewma"
	"github.com/pickwise/pickwise/balancer/ringhash"
	_ "github.com/pickwise/pickwise/balancer/shadow"
	_ "github.com/pickwise/pickwise/balancer/subset"
	"github.com/pickwise/pickwise/examples/xds/internal/xdsenv"
	"github.com/pickwise/pickwise/interop/server"
)

func main() {
	rpcs := flag.Int("rpcs", 1200, "RPCs per scenario")
	conc := flag.Int("concurrency", 12, "concurrent callers")
	flag.Parse()
	if err := run(*rpcs, *conc); err != nil {
		log.Fatal(err)
	}
}

func run(rpcs, conc int) error {
	env, err := xdsenv.Start(4)
	if err != nil {
		return err
	}
	defer env.Stop()
	bootstrap := env.Bootstrap()
	fmt.Printf("bootstrap: %s\n", bootstrap)
	res, err := xds.NewXDSResolverWithConfigForTesting([]byte(bootstrap))
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	eps := func(first int, weights ...uint32) []xdsenv.Endpoint {
		var out []xdsenv.Endpoint
		for i, w := range weights {
			out = append(out, xdsenv.Endpoint{Addr: env.Addrs[first+i], Weight: w})
		}
		return out
	}
	latency := func(d ...time.Duration) error {
		for i, d := range d {
			if err := env.Patch(i, func(b *server.Behavior) { b.Latency = server.Duration(d) }); err != nil {
				return err
			}
		}
		return nil
	}
	show := func(what string, conn *grpc.ClientConn, ctxFor func(context.Context, int) context.Context) error {
		c, failed, err := xdsenv.Drive(ctx, conn, rpcs, conc, ctxFor)
		if failed > 0 {
			return fmt.Errorf("%s: %d RPCs failed, first: %w", what, failed, err)
		}
		fmt.Printf("%-52s %v\n", what, c)
		return nil
	}
	// settle makes calls until ok holds for a batch: the xDS update has
	// reached the policy.
	settle := func(conn *grpc.ClientConn, ctxFor func(context.Context, int) context.Context, ok func(xdsenv.Counts) bool) error {
		for range 200 {
			c, failed, err := xdsenv.Drive(ctx, conn, 60, 6, ctxFor)
			if failed > 0 {
				return err
			}
			if ok(c) {
				return nil
			}
		}
		return fmt.Errorf("xDS update not seen")
	}
	dial := func(svc xdsenv.Service) (*grpc.ClientConn, error) {
		if err := env.Set(ctx, svc); err != nil {
			return nil, err
		}
		return grpc.NewClient("xds:///"+svc.Name,
			grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithResolvers(res))
	}

	// pickwise_p2c, one slow backend.
	p2c := xdsenv.Service{Name: "p2c", Policy: "pickwise_p2c", Config: `{}`, Endpoints: eps(0, 0, 0, 0)}
	conn, err := dial(p2c)
	if err != nil {
		return err
	}
	defer conn.Close()
	if err := latency(40*time.Millisecond, 2*time.Millisecond, 2*time.Millisecond); err != nil {
		return err
	}
	if err := show("pickwise_p2c, backend-0 40ms, others 2ms", conn, nil); err != nil {
		return err
	}

	// pickwise_p2c, EDS weights 1:1:4.
	if err := latency(2*time.Millisecond, 2*time.Millisecond, 2*time.Millisecond, 2*time.Millisecond); err != nil {
		return err
	}
	p2c.Endpoints = eps(0, 1, 1, 4)
	if err := env.Set(ctx, p2c); err != nil {
		return err
	}
	if err := settle(conn, nil, func(c xdsenv.Counts) bool { return c.Share("backend-2") > 0.5 }); err != nil {
		return err
	}
	if err := show("pickwise_p2c, EDS weights 1:1:4 (2ms each)", conn, nil); err != nil {
		return err
	}

	// pickwise_p2c after an endpoint-set update: backend-0 out, backend-3 in.
	p2c.Endpoints = eps(1, 1, 1, 1)
	if err := env.Set(ctx, p2c); err != nil {
		return err
	}
	if err := settle(conn, nil, func(c xdsenv.Counts) bool { return c["backend-0"] == 0 && c["backend-3"] > 0 }); err != nil {
		return err
	}
	if err := show("pickwise_p2c, EDS now backends 1, 2, 3", conn, nil); err != nil {
		return err
	}
	if err := latency(0, 0, 0, 0); err != nil {
		return err
	}

	// pickwise_ring_hash, EDS weights 1:1:4, random keys.
	rconn, err := dial(xdsenv.Service{Name: "ringhash", Policy: "pickwise_ring_hash", Config: `{}`, Endpoints: eps(0, 1, 1, 4)})
	if err != nil {
		return err
	}
	defer rconn.Close()
	randomKey := func(ctx context.Context, _ int) context.Context {
		return ringhash.WithKey(ctx, fmt.Sprint(rand.Uint64()))
	}
	if err := show("pickwise_ring_hash, EDS weights 1:1:4, random keys", rconn, randomKey); err != nil {
		return err
	}

	// pickwise_peak_ewma, one slow backend.
	pconn, err := dial(xdsenv.Service{Name: "peakewma", Policy: "pickwise_peak_ewma", Config: `{}`, Endpoints: eps(0, 0, 0, 0)})
	if err != nil {
		return err
	}
	defer pconn.Close()
	if err := latency(40*time.Millisecond, 2*time.Millisecond, 2*time.Millisecond); err != nil {
		return err
	}
	if err := show("pickwise_peak_ewma, backend-0 40ms, others 2ms", pconn, nil); err != nil {
		return err
	}
	if err := latency(0, 0, 0); err != nil {
		return err
	}

	// pickwise_orca_wrr: the backends report served/rated calls per second
	// as their utilization (ORCA, per call), so each weight is its rating.
	oconn, err := dial(xdsenv.Service{Name: "orcawrr", Policy: "pickwise_orca_wrr",
		Config: `{"blackoutPeriod": "0s", "weightUpdatePeriod": "100ms"}`, Endpoints: eps(0, 0, 0, 0)})
	if err != nil {
		return err
	}
	defer oconn.Close()
	for i, rated := range []float64{500, 500, 2000} {
		if err := env.Patch(i, func(b *server.Behavior) {
			b.ORCA = server.ORCAConfig{PerCall: true, Utilization: server.UtilizationRate, RatedQPS: rated}
		}); err != nil {
			return err
		}
	}
	if err := settle(oconn, nil, func(c xdsenv.Counts) bool { return c.Share("backend-2") > 0.55 }); err != nil {
		return err
	}
	if err := show("pickwise_orca_wrr, ORCA ratings 500/500/2000", oconn, nil); err != nil {
		return err
	}

	// pickwise_subset: this client connects to 2 of the 3 backends.
	sconn, err := dial(xdsenv.Service{Name: "subset", Policy: "pickwise_subset",
		Config: `{"subsetSize": 2, "childPolicy": [{"pickwise_p2c": {}}]}`, Endpoints: eps(0, 0, 0, 0)})
	if err != nil {
		return err
	}
	defer sconn.Close()
	return show("pickwise_subset over pickwise_p2c, 2 of 3 backends", sconn, nil)
}
