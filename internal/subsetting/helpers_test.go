package subsetting

import (
	"fmt"
	"math/rand/v2"
	"slices"
)

// backendIDs returns n distinct addresses.
func backendIDs(n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("10.0.%d.%d:8080", i/250, i%250+1)
	}
	return ids
}

// algo computes every client's subset.
type algo struct {
	name string
	all  func(backends []string, size, count int) ([][]string, error)
}

func perClient(f func(backends []string, size, index, count int) ([]string, error)) func([]string, int, int) ([][]string, error) {
	return func(backends []string, size, count int) ([][]string, error) {
		out := make([][]string, count)
		for i := range out {
			s, err := f(backends, size, i, count)
			if err != nil {
				return nil, err
			}
			out[i] = s
		}
		return out, nil
	}
}

// rendezvousAll gives client i a random clientID drawn from a fixed seed.
func rendezvousAll(backends []string, size, count int) ([][]string, error) {
	r := rand.New(rand.NewPCG(42, 7))
	out := make([][]string, count)
	for i := range out {
		s, err := Rendezvous(backends, size, fmt.Sprintf("client-%016x", r.Uint64()))
		if err != nil {
			return nil, err
		}
		out[i] = s
	}
	return out, nil
}

// algos are the algorithms compared; balanced and stable are ours.
var algos = []algo{
	{"balanced", BalancedAll},
	{"stable", perClient(Stable)},
	{"rendezvous", rendezvousAll},
	{"sre", perClient(SRE[string])},
}

// spread returns the fewest and most clients per backend of backends.
func spread(backends []string, rows [][]string) (lo, hi int) {
	n := make(map[string]int, len(backends))
	for _, b := range backends {
		n[b] = 0
	}
	for _, row := range rows {
		for _, b := range row {
			n[b]++
		}
	}
	lo, hi = -1, 0
	for _, v := range n {
		if lo < 0 || v < lo {
			lo = v
		}
		hi = max(hi, v)
	}
	return lo, hi
}

// churn counts the (client, backend) pairs of before that after lacks.
// Every client has subsetSize backends before and after, so it is also the
// number of new pairs.
func churn(before, after [][]string) int {
	n := 0
	for i := range before {
		for _, b := range before[i] {
			if !slices.Contains(after[i], b) {
				n++
			}
		}
	}
	return n
}

// load is the number of clients of backend b.
func load(rows [][]string, b string) int {
	n := 0
	for _, row := range rows {
		if slices.Contains(row, b) {
			n++
		}
	}
	return n
}
