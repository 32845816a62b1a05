package subsetting

import (
	"slices"
	"strconv"
)

// Balanced is mode "balanced": clientIndex's subset of subsetSize backends
// in the balanced global assignment for clientCount clients (see
// [BalancedAll]). Every backend gets floor or ceil of
// clientCount*subsetSize/backends clients, and a change of the backend
// list moves few pairs ([Stable] trades the exact balance for minimal
// churn). Every client computes the assignment up to its own row, so
// clients agree without talking to each other.
//
// Cost: every row up to clientIndex, since a row depends on every row
// before it; a row costs about what the backends it walks past cost, not
// the fleet's size. The last of 10,000 clients takes about 7 ms over
// 10,000 backends and 18 ms over 50,000 (BenchmarkBalanced,
// BenchmarkBalancedUpdate), and nothing is kept between calls.
//
// With subsetSize >= the number of distinct backends every backend is
// returned. Errors: ErrSubsetSize, ErrClientIndex.
func Balanced(backends []string, subsetSize, clientIndex, clientCount int) ([]string, error) {
	if err := checkArgs(subsetSize, clientIndex, clientCount); err != nil {
		return nil, err
	}
	ids := Normalize(backends)
	if subsetSize >= len(ids) {
		return ids, nil
	}
	a := newAssignment(ids)
	return a.names(a.rows(subsetSize, clientCount, clientIndex, nil)), nil
}

// BalancedAll returns the subsets of all clientCount clients under
// [Balanced], row i being client i's: what the fleet as a whole connects
// to, for tests, the simulator and capacity planning.
//
// The assignment is a capacity-bounded rendezvous assignment. Every pair
// has a score that depends only on the client index and the backend's
// identity (pairScore), so a surviving backend keeps its scores when
// others join or leave. With q, r = divmod(clientCount*subsetSize,
// backends), every backend ends with q or q+1 clients, the r extras going
// to whichever backends fill first. Clients are served in index order,
// each taking its highest-scoring backends that still have room, except
// for the picks that keep the rest solvable (by the Gale-Ryser theorem:
// see assignment.rows). So the last client always finds a valid subset
// and the spread is at most 1 by construction.
//
// Churn above the minimum comes from capacity: a removed backend's
// clients fill other backends earlier, displacing later clients in turn.
// It is 1.4x the minimum when backends have hundreds of clients each,
// about 6x with ten each among 300 clients and 10x to 18x with 2 to 20
// each among 10,000 (TestSpreadAndChurn, TestChurnSpread, BenchmarkChurn;
// the tables are in docs/design/subsetting.md). Where churn matters more
// than exact balance use [Stable].
//
// Errors: ErrSubsetSize, and ErrClientIndex for clientCount < 1.
func BalancedAll(backends []string, subsetSize, clientCount int) ([][]string, error) {
	if err := checkArgs(subsetSize, 0, clientCount); err != nil {
		return nil, err
	}
	ids := Normalize(backends)
	out := make([][]string, clientCount)
	if subsetSize >= len(ids) {
		for i := range out {
			out[i] = slices.Clone(ids)
		}
		return out, nil
	}
	a := newAssignment(ids)
	rows := make([][]int32, clientCount)
	a.rows(subsetSize, clientCount, clientCount-1, rows)
	for i, row := range rows {
		out[i] = a.names(row)
	}
	return out, nil
}

// Stable is mode "stable" of the index-based subsetting: client
// clientIndex takes the [Rendezvous] subset for a client identity derived
// from its index. A backend change moves exactly the pairs it must (the
// removed backend's clients, or those the new backend outranks), but the
// balance is only statistical, as with gRFC A68: at 300 clients x 300
// backends, subsets of 10, backends get 2 to 19 clients instead of 10; at
// 1,000 x 100, subsets of 20, 164 to 227 instead of 200.
// Choose it over [Balanced] when connections are expensive to move and
// the fleet tolerates that spread.
//
// Errors: ErrSubsetSize, ErrClientIndex.
func Stable(backends []string, subsetSize, clientIndex, clientCount int) ([]string, error) {
	if err := checkArgs(subsetSize, clientIndex, clientCount); err != nil {
		return nil, err
	}
	return Rendezvous(backends, subsetSize, stableID(clientIndex))
}

// stableID is the client identity Stable hashes; a fixed prefix keeps index
// identities apart from identities that callers pass to Rendezvous.
func stableID(clientIndex int) string {
	return "pickwise-subset-index:" + strconv.Itoa(clientIndex)
}
