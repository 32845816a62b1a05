package subset_test

import (
	"errors"
	"fmt"

	_ "github.com/pickwise/pickwise/balancer/p2c" // the default child
	"github.com/pickwise/pickwise/balancer/subset"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// Example selects pickwise_subset for a channel with a service config built
// at startup from a StatefulSet pod's host name. A real program reads the
// name with os.Hostname and the replica count from its deployment.
func Example() {
	host, replicas := "api-7.api.default.svc.cluster.local", 300 // os.Hostname(), from the deployment
	var sc string
	if index, err := subset.IndexFromHostname(host); err == nil {
		sc = fmt.Sprintf(`{"loadBalancingConfig": [{%q: {"subsetSize": 10, "clientIndex": %d, "clientCount": %d}}]}`,
			subset.Name, index, replicas)
	} else {
		// Not a StatefulSet pod: fall back to a stable identity, here
		// the host name itself (rendezvous, statistical balance).
		sc = fmt.Sprintf(`{"loadBalancingConfig": [{%q: {"subsetSize": 10, "clientId": %q}}]}`, subset.Name, host)
	}
	fmt.Println(sc)
	conn, err := grpc.NewClient("dns:///backend.default.svc:443",
		grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithDefaultServiceConfig(sc))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer conn.Close()
	fmt.Println("channel to", conn.Target())
	// Output:
	// {"loadBalancingConfig": [{"pickwise_subset": {"subsetSize": 10, "clientIndex": 7, "clientCount": 300}}]}
	// channel to dns:///backend.default.svc:443
}

// A StatefulSet's pod names end in their ordinal, a dense and stable client
// index; a Deployment's pods have a random suffix instead, which is
// rejected rather than read as an index.
func ExampleIndexFromHostname() {
	// In a StatefulSet "api" with 3 replicas, pod api-2 reads its host
	// name (os.Hostname) and uses the ordinal as its client index.
	index, err := subset.IndexFromHostname("api-2")
	fmt.Println(index, err)

	_, err = subset.IndexFromHostname("api-7f9c4-x2bq") // a Deployment pod: no ordinal
	fmt.Println(err)
	fmt.Println(errors.Is(err, subset.ErrHostname))
	// Output:
	// 2 <nil>
	// subset: host name does not end in -<index>: "api-7f9c4-x2bq"
	// true
}
