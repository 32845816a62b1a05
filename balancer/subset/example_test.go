package subset_test

import (
	"fmt"

	_ "github.com/pickwise/pickwise/balancer/p2c" // the default child
	"github.com/pickwise/pickwise/balancer/subset"
)

// Example builds a channel's service config at startup from a StatefulSet
// pod's host name. A real program reads the name with os.Hostname and the
// replica count from its deployment, then passes the string to
// grpc.WithDefaultServiceConfig.
func Example() {
	host, replicas := "api-7.api.default.svc.cluster.local", 300 // os.Hostname(), from the deployment
	index, err := subset.IndexFromHostname(host)
	if err != nil {
		// Not a StatefulSet pod: fall back to a stable identity, here
		// the host name itself (rendezvous, statistical balance).
		fmt.Printf(`{"loadBalancingConfig": [{%q: {"subsetSize": 10, "clientId": %q}}]}`+"\n", subset.Name, host)
		return
	}
	sc := fmt.Sprintf(`{"loadBalancingConfig": [{%q: {"subsetSize": 10, "clientIndex": %d, "clientCount": %d}}]}`,
		subset.Name, index, replicas)
	fmt.Println(sc)
	// conn, err := grpc.NewClient("dns:///backend.default.svc:443",
	//	grpc.WithTransportCredentials(creds), grpc.WithDefaultServiceConfig(sc))
	// Output:
	// {"loadBalancingConfig": [{"pickwise_subset": {"subsetSize": 10, "clientIndex": 7, "clientCount": 300}}]}
}
