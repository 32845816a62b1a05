package sim

import (
	"fmt"
	"slices"

	_ "google.golang.org/grpc/balancer/randomsubsetting" // registers random_subsetting_experimental
)

func init() {
	register(Scenario{Name: "subsetting", Run: func(s Scale) (*Table, error) {
		r, err := Subsetting(s)
		if err != nil {
			return nil, err
		}
		return r.Table, nil
	}})
}

// SubsetResult holds the subsetting scenario's numbers per policy, in
// column order.
type SubsetResult struct {
	Policies []string
	// Min and Max are the fewest and the most client connections a backend
	// has; Spread is Max-Min. SpreadAfter is the spread once one backend has
	// been removed.
	Min, Max, Spread, SpreadAfter []int
	// Moved counts the connections to surviving backends that clients
	// dropped when one backend was removed: churn beyond the removed
	// backend's own connections, which must move.
	Moved []int
	// Changed is the share of clients whose subset changed other than by
	// losing the removed backend.
	Changed []float64
	// Lost is the removed backend's connections: the minimum churn, since
	// each of its clients must replace it. Churn is (Lost+Moved)/Lost, the
	// connections replaced over that minimum.
	Lost  []int
	Churn []float64
	Table *Table
}

// Subsetting: 300 clients, 100 backends, subsets of 10; the ideal is 30
// connections on every backend. Then one backend is removed. No subsetting
// costs every client a connection to every backend. Random subsetting
// (gRFC A68: each client ranks backends by a hash seeded at random and
// takes the first 10) keeps the churn minimal, since a client's ranking does
// not depend on the other backends, but its connection counts scatter like
// balls thrown into bins. The SRE book's deterministic subsetting spreads
// connections exactly, and reshuffles nearly every client when the backend
// count changes. pickwise_subset offers both ends with a client index:
// "balanced" keeps every backend within one connection of the mean and
// moves a few times the minimum, "stable" moves exactly the minimum and
// balances only statistically, as random subsetting does.
//
// No requests are sent: the numbers are the connections each client's real
// balancer opens (for grpc-go's policies, the live SubConns it created).
func Subsetting(scale Scale) (*SubsetResult, error) {
	const size = 10
	clients, n := 300, 100
	if scale == Reduced {
		clients, n = 120, 40
	}
	backends := make([]Backend, n)
	removed := n / 2 // any backend; one in the middle of the list
	after := slices.DeleteFunc(backendIDs(n), func(id int) bool { return id == removed })
	allToAll := GRPC("all-to-all", "round_robin", `{}`)
	// Which backends round_robin connects to does not depend on its random
	// start, so the column needs no warning about unseeded randomness.
	allToAll.Note = ""
	policies := []Policy{
		allToAll,
		GRPC("random_subsetting", "random_subsetting_experimental", fmt.Sprintf(`{"subsetSize":%d,"childPolicy":[{"round_robin":{}}]}`, size)),
		DeterministicSubset(size, clients),
		PickwiseSubset("pickwise_subset (balanced)", subsetBalanced, size, clients, pickwiseP2C()),
		PickwiseSubset("pickwise_subset (stable)", subsetStable, size, clients, pickwiseP2C()),
	}
	out := &SubsetResult{Policies: columns(policies)}
	for _, p := range policies {
		ins, err := newClients(p, 9, backends, backendIDs(n), clients)
		if err != nil {
			return nil, err
		}
		r, err := measureSubsets(ins, n, after, removed)
		for _, in := range ins {
			in.close()
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p.Name, err)
		}
		out.Min = append(out.Min, r.min)
		out.Max = append(out.Max, r.max)
		out.Spread = append(out.Spread, r.max-r.min)
		out.SpreadAfter = append(out.SpreadAfter, r.spreadAfter)
		out.Moved = append(out.Moved, r.moved)
		out.Changed = append(out.Changed, float64(r.changed)/float64(clients))
		out.Lost = append(out.Lost, r.lost)
		churn := 0.0
		if r.lost > 0 {
			churn = float64(r.lost+r.moved) / float64(r.lost)
		}
		out.Churn = append(out.Churn, churn)
	}

	t := &Table{
		Title: fmt.Sprintf("Subsetting: %d clients, %d backends, subsets of %d (ideal: %d connections per backend); then one backend is removed",
			clients, n, size, clients*size/n),
		Columns: out.Policies,
	}
	minMax, spread, spreadAfter := make([]string, len(policies)), make([]string, len(policies)), make([]string, len(policies))
	moved, changed, churn := make([]string, len(policies)), make([]string, len(policies)), make([]string, len(policies))
	for i := range policies {
		minMax[i] = fmt.Sprintf("%d-%d", out.Min[i], out.Max[i])
		spread[i], spreadAfter[i] = fmt.Sprint(out.Spread[i]), fmt.Sprint(out.SpreadAfter[i])
		moved[i], changed[i] = fmt.Sprint(out.Moved[i]), Pct(out.Changed[i])
		churn[i] = "-"
		if out.Lost[i] > 0 {
			churn[i] = fmt.Sprintf("%.2fx", out.Churn[i])
		}
	}
	t.AddRow("connections per backend, min-max", minMax...)
	t.AddRow("spread (max-min)", spread...)
	t.AddRow("spread after removing one backend", spreadAfter...)
	t.AddRow("connections moved off surviving backends", moved...)
	t.AddRow("clients whose subset changed beyond the loss", changed...)
	t.AddRow("connections replaced over the minimum", churn...)
	t.AddNote("moved: connections to surviving backends that clients replaced; the removed backend's own connections must move and are not counted")
	t.AddNote("over the minimum: (the removed backend's connections + moved) / the removed backend's connections; 1.00x is the least any policy can do")
	t.AddNote("pickwise_subset: clientIndex = the client's number, clientCount = the client count, child pickwise_p2c; the subsets are pickwise_subset's own functions (modes balanced and stable) over the backends' addresses")
	notes(t, policies)
	out.Table = t
	return out, nil
}

// subsetNumbers is what measureSubsets finds.
type subsetNumbers struct {
	min, max, spreadAfter int
	moved, changed, lost  int
}

// measureSubsets reads every client's connections over n backends, gives
// them the backends after (all but removed), and compares.
func measureSubsets(ins []instance, n int, after []int, removed int) (subsetNumbers, error) {
	var r subsetNumbers
	before := make([][]int, len(ins))
	perBackend := make([]int, n)
	for c, in := range ins {
		conns, err := subsetConnections(in, n)
		if err != nil {
			return r, err
		}
		before[c] = conns
		for _, id := range conns {
			perBackend[id]++
		}
	}
	r.min, r.max = slices.Min(perBackend), slices.Max(perBackend)
	r.lost = perBackend[removed]

	clear(perBackend)
	for c, in := range ins {
		if err := in.setBackends(after); err != nil {
			return r, err
		}
		conns, err := subsetConnections(in, n)
		if err != nil {
			return r, err
		}
		for _, id := range conns {
			perBackend[id]++
		}
		changed := false
		for _, id := range before[c] {
			if id != removed && !slices.Contains(conns, id) {
				r.moved++
				changed = true
			}
		}
		for _, id := range conns {
			if !slices.Contains(before[c], id) {
				changed = true
			}
		}
		if changed {
			r.changed++
		}
	}
	survivors := slices.Delete(perBackend, removed, removed+1)
	r.spreadAfter = slices.Max(survivors) - slices.Min(survivors)
	return r, nil
}

// subsetConnections returns the sorted backends, out of n, that a client's
// instance holds connections to: for a grpc balancer, its live SubConns.
func subsetConnections(in instance, n int) ([]int, error) {
	switch in := in.(type) {
	case interface{ connections() []int }:
		return slices.Sorted(slices.Values(in.connections())), nil
	case *grpcInstance:
		ids := make(map[string]int, n)
		for id := range n {
			ids[backendAddr(id)] = id
		}
		var out []int
		for _, sc := range in.cc.SubConns() {
			if sc.IsShutdown() {
				continue
			}
			id, ok := ids[sc.Addr()]
			if !ok {
				return nil, fmt.Errorf("SubConn for unknown address %q", sc.Addr())
			}
			if !slices.Contains(out, id) {
				out = append(out, id)
			}
		}
		slices.Sort(out)
		return out, nil
	default:
		return nil, fmt.Errorf("cannot see the connections of a %T", in)
	}
}
