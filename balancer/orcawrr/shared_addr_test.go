package orcawrr_test

import (
	"fmt"
	"testing"

	"github.com/pickwise/pickwise/balancer/orcawrr"
	"github.com/pickwise/pickwise/internal/testkit"
	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/resolver"
)

// Two endpoints may share an address (one backend reachable in two
// localities, say): each has its own connection to it, and each
// connection must carry the ORCA stream of its own endpoint, so that one
// endpoint never takes the other's weight.
func TestOutOfBandStreamPerEndpointWithSharedAddress(t *testing.T) {
	h := testkit.NewHarness(t, orcawrr.Name, `{"enableOobLoadReport": true}`)
	shared := "127.0.0.1:19999"
	eps := []resolver.Endpoint{
		{Addresses: []resolver.Address{{Addr: shared}, {Addr: "127.0.0.1:20001"}}},
		{Addresses: []resolver.Address{{Addr: shared}, {Addr: "127.0.0.1:20002"}}},
	}
	if err := h.Update(eps...); err != nil {
		t.Fatal(err)
	}
	// Each endpoint's pickfirst connects to its first address: two
	// connections to the shared one.
	waitFor(t, h, "two connections to the shared address", func() bool {
		n := 0
		for _, sc := range h.CC.SubConns() {
			if sc.Addr() == shared {
				n++
			}
		}
		return n == 2
	})
	var conns []*testkit.SubConn
	for _, sc := range h.CC.SubConns() {
		if sc.Addr() == shared {
			conns = append(conns, sc)
			sc.UpdateState(balancer.SubConnState{ConnectivityState: connectivity.Connecting})
			sc.UpdateState(balancer.SubConnState{ConnectivityState: connectivity.Ready})
		}
	}
	if err := h.CC.WaitForState(h.Ctx, connectivity.Ready); err != nil {
		t.Fatal(err)
	}
	const method = "/xds.service.orca.v3.OpenRcaService/StreamCoreMetrics"
	for i, sc := range conns {
		waitFor(t, h, fmt.Sprintf("an ORCA stream on connection %d", i), func() bool {
			n := 0
			for _, m := range sc.Streams() {
				if m == method {
					n++
				}
			}
			return n == 1
		})
	}
}
