package subsetting_test

import (
	"fmt"

	"github.com/pickwise/pickwise/internal/subsetting"
)

// Client 2 of a fleet of 3 (pod api-2 of a StatefulSet of 3 replicas)
// takes 2 of 6 backends; the fleet as a whole puts exactly one client on
// every backend.
func ExampleBalanced() {
	backends := []string{"10.0.0.1:443", "10.0.0.2:443", "10.0.0.3:443", "10.0.0.4:443", "10.0.0.5:443", "10.0.0.6:443"}
	subset, err := subsetting.Balanced(backends, 2, 2, 3)
	if err != nil {
		panic(err)
	}
	fmt.Println(len(subset))

	all, err := subsetting.BalancedAll(backends, 2, 3)
	if err != nil {
		panic(err)
	}
	clients := map[string]int{}
	for _, row := range all {
		for _, b := range row {
			clients[b]++
		}
	}
	perBackend := make([]int, len(backends))
	for i, b := range backends {
		perBackend[i] = clients[b]
	}
	fmt.Println(perBackend)
	// Output:
	// 2
	// [1 1 1 1 1 1]
}
