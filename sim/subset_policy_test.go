package sim

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestPickwiseSubsetMatchesBalancer checks that the simulator's
// pickwise_subset columns connect to exactly the backends the real
// balancer, built from the same config, connects to. The real child closes
// the connections of backends that leave its subset at once
// (removalGrace "0s"), so that only the subset's are counted.
func TestPickwiseSubsetMatchesBalancer(t *testing.T) {
	const closingChild = `"childPolicy":[{"pickwise_p2c":{"removalGrace":"0s"}}]`
	const n, size, clients = 30, 5, 12
	ids := backendIDs(n)
	after := slices.Delete(slices.Clone(ids), 7, 8)
	for _, tc := range []struct {
		kind subsetKind
		cfg  func(i int) string
	}{
		{subsetBalanced, func(i int) string {
			return fmt.Sprintf(`{"subsetSize":%d,"clientIndex":%d,"clientCount":%d,%s}`, size, i, clients, closingChild)
		}},
		{subsetStable, func(i int) string {
			return fmt.Sprintf(`{"subsetSize":%d,"clientIndex":%d,"clientCount":%d,"mode":"stable",%s}`, size, i, clients, closingChild)
		}},
		{subsetNoIndex, func(i int) string {
			return fmt.Sprintf(`{"subsetSize":%d,"clientId":%q,%s}`, size, subsetClientID(i), closingChild)
		}},
	} {
		sim, err := newClients(PickwiseSubset("sim", tc.kind, size, clients, pickwiseP2C()), 1, make([]Backend, n), ids, clients)
		if err != nil {
			t.Fatal(err)
		}
		e := &env{loop: &Loop{}, rand: rand.New(rand.NewPCG(1, 2)), backends: make([]Backend, n)}
		for i, s := range sim {
			real, err := newGRPCInstance(e, "pickwise_subset", tc.cfg(i))
			if err != nil {
				t.Fatal(err)
			}
			for _, list := range [][]int{ids, after} {
				if err := s.setBackends(list); err != nil {
					t.Fatal(err)
				}
				if err := real.setBackends(list); err != nil {
					t.Fatal(err)
				}
				want, err := subsetConnections(real, n)
				if err != nil {
					t.Fatal(err)
				}
				got, _ := subsetConnections(s, n)
				if !slices.Equal(got, want) || len(got) != size {
					t.Errorf("kind %d, client %d, %d backends: simulated subset %v, pickwise_subset connects to %v", tc.kind, i, len(list), got, want)
				}
			}
			real.close()
			s.close()
		}
	}
}
