// Command orcawrr shows what pickwise_orca_wrr does for a gRPC client whose
// backends differ in capacity, side by side with grpc-go's round_robin.
//
// It starts two gRPC servers on 127.0.0.1: one that serves at most 1000
// calls per second and one that serves at most 600, two hardware
// generations of the same service. Both report their load to the client in
// every response's trailer (ORCA, gRFC A51). 32 callers send the same
// bounded traffic through two channels that differ only in their service
// config, and the program prints each backend's share of the calls beside
// the utilization the backend reported, then each policy's latency and
// throughput.
//
// Round robin gives each backend half of the calls, so the 600/s backend is
// the bottleneck: it is saturated and queues calls while the 1000/s one
// idles 40% of the time, and the pair serve at most 1200 calls per second.
// pickwise_orca_wrr turns each backend's reports into a weight, queries
// per second divided by utilization, which is the backend's capacity: it
// sends 62.5% of the calls to the bigger backend and 37.5% to the smaller,
// both run equally hot, and the pair serve up to 1600 calls per second, a
// third more.
//
// Using the policy takes a blank import that registers it, a service config
// that selects it, and backends that report their load (package
// github.com/pickwise/pickwise/orcaweight shows how a grpc-go server does that):
//
//	import _ "github.com/pickwise/pickwise/balancer/orcawrr"
//
//	grpc.WithDefaultServiceConfig(`{"loadBalancingConfig": [{"pickwise_orca_wrr": {}}]}`)
//
// Run it from the module root; it takes about fifteen seconds:
//
//	go run ./examples/orcawrr
//	go run ./examples/orcawrr -rpcs 1000
package main

import (
	"fmt"
	"math"
	"time"

	"github.com/pickwise/pickwise/examples/internal/compare"
	"github.com/pickwise/pickwise/interop/server"

	// Registers pickwise_orca_wrr with grpc's balancer registry.
	_ "github.com/pickwise/pickwise/balancer/orcawrr"
)

// orcaWRRServiceConfig selects pickwise_orca_wrr. A weight is used only
// after its backend has reported for blackoutPeriod, so that a backend's
// first, optimistic reports do not draw a flood; the default, 10s, would
// make this example wait that long for every channel, so it is 1s here.
// weightUpdatePeriod, how often weights are recomputed, is shortened from
// 1s to 0.1s for the same reason. Both are written as grpc-go's
// weighted_round_robin also accepts them. Every other field keeps its
// default; see the package documentation of balancer/orcawrr.
const orcaWRRServiceConfig = `{"loadBalancingConfig": [{"pickwise_orca_wrr": {"blackoutPeriod": "1s", "weightUpdatePeriod": "0.1s"}}]}`

// policies are compared in this order, which is also the column order.
var policies = []compare.Policy{
	{Name: "round_robin", ServiceConfig: `{"loadBalancingConfig": [{"round_robin": {}}]}`},
	{Name: "pickwise_orca_wrr", ServiceConfig: orcaWRRServiceConfig},
}

// latency is how long every call holds one of its backend's slots. A call
// holds its slot about half a millisecond longer (timer wake-up, recording
// its load report), which would cost a 10ms call 5% of its backend's
// capacity; at 20ms the real ceiling stays within about 3% of the rating,
// so a saturated backend reports close to 100%.
const latency = 20 * time.Millisecond

// ratings are the backends' capacities in calls per second.
var ratings = []float64{1000, 600}

// rated describes a backend that serves at most qps calls per second: slots
// calls at once, each for exactly latency, and later calls wait in a queue,
// so qps really is its limit.
//
// It reports its utilization as calls served per second over its rating
// ("rate"). With a fixed service time that is exactly its mean number of
// busy slots over its slots across the last second, the figure a CPU meter
// would show, so the utilization printed is honest. The alternative,
// "computed", is the same ratio sampled at the instant each call finishes;
// it agrees on average but counts the finishing call itself, so at light
// load each sample is at least 1/slots, and it moves in steps of 1/slots.
// Either way the weight the policy derives, qps / utilization, is the
// backend's rating whatever share of the traffic it gets.
func rated(qps float64) compare.Backend {
	slots := int(math.Round(qps * latency.Seconds()))
	return compare.Backend{
		About: fmt.Sprintf("%.0f/s: %d slots x %v", qps, slots, latency),
		Server: &server.Behavior{
			Latency:  server.Duration(latency),
			Capacity: slots,
			ORCA: server.ORCAConfig{
				PerCall:     true, // a report in every response's trailer
				Utilization: server.UtilizationRate,
				RatedQPS:    qps,
			},
		},
	}
}

// settle is how long each channel calls before it is measured: the 1s
// blackout, a few weight updates, and the backends' one-second rate
// window, so that measuring starts with the weights in use and with
// reports that no longer count the previous policy's calls.
const settle = 2 * time.Second

// notes explain the table under it.
var notes = []string{
	"share: the backend's share of the measured calls. util: the utilization it reported over ORCA (calls served per second / its rating), averaged over the calls it answered.",
	fmt.Sprintf("pickwise_orca_wrr runs with blackoutPeriod 1s and weightUpdatePeriod 0.1s (defaults 10s and 1s) so that this example is quick; each channel's first %v of calls are not counted, so its weights are in use when measuring starts.", settle),
}

// check fails the run unless pickwise_orca_wrr followed the reports: every
// call succeeded, every backend reported, and its shares are near the
// ratings. The bounds are loose, because CI may run this on a busy machine.
func check(outs []compare.Outcome) error {
	var sum float64
	for _, r := range ratings {
		sum += r
	}
	for _, o := range outs {
		if o.Failed > 0 {
			return fmt.Errorf("%s: %d calls failed", o.Policy, o.Failed)
		}
		for i, u := range o.Utilization {
			if math.IsNaN(u) {
				return fmt.Errorf("%s: backend-%d sent no ORCA report", o.Policy, i)
			}
		}
		if o.Policy != "pickwise_orca_wrr" {
			continue
		}
		for i, r := range ratings {
			if want := r / sum; math.Abs(o.Share[i]-want) > 0.08 {
				return fmt.Errorf("%s: backend-%d got %.1f%% of the calls, want %.1f%% ± 8", o.Policy, i, 100*o.Share[i], 100*want)
			}
		}
	}
	return nil
}

func main() {
	compare.MainOptions("orcawrr", []compare.Backend{rated(ratings[0]), rated(ratings[1])}, policies, compare.Options{
		RPCs: 6000,
		// As many callers as the two backends have slots: enough to keep
		// both busy when the calls are split by capacity.
		Concurrency: 32,
		Settle:      settle,
		Notes:       notes,
		Check:       check,
	})
}
