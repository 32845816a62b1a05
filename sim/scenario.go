package sim

import (
	"fmt"
	"sort"
)

// Scale chooses between a scenario's full size and the reduced size its
// tests use in CI. Reduced runs keep the shape of the result (the same
// ratios, the same ordering of policies) at a fraction of the requests.
type Scale int

const (
	// Reduced is sized for CI.
	Reduced Scale = iota
	// Full is the size the scenario is described at.
	Full
)

// Scenario is a named, runnable comparison.
type Scenario struct {
	// Name is what -scenario selects, e.g. "black-hole".
	Name string
	// Run runs every policy of the scenario and returns its table.
	Run func(Scale) (*Table, error)
}

var scenarios = map[string]Scenario{}

// register adds a scenario; scenario files call it from init.
func register(s Scenario) {
	if _, dup := scenarios[s.Name]; dup {
		panic("sim: duplicate scenario " + s.Name)
	}
	scenarios[s.Name] = s
}

// Scenarios returns every scenario, in a fixed order.
func Scenarios() []Scenario {
	out := make([]Scenario, 0, len(scenarios))
	for _, s := range scenarios {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return order(out[i].Name) < order(out[j].Name) })
	return out
}

// Lookup returns the scenario called name.
func Lookup(name string) (Scenario, error) {
	s, ok := scenarios[name]
	if !ok {
		names := make([]string, 0, len(scenarios))
		for _, s := range Scenarios() {
			names = append(names, s.Name)
		}
		return Scenario{}, fmt.Errorf("sim: no scenario %q (have %v)", name, names)
	}
	return s, nil
}

// scenarioOrder is the order tables are printed in: from the simplest
// placement question to fleet-wide effects.
var scenarioOrder = []string{
	"balls-into-bins", "black-hole", "transient-failure", "one-stall", "flapping-backend", "retry-storm",
	"cold-start", "cold-join-unary", "warm-rejoin", "hardware-generations", "slow-backend", "noisy-reports",
	"noisy-neighbours",
	"hot-key", "hash-black-hole", "remap-storm", "flapping-cache", "subsetting", "rollout",
}

func order(name string) int {
	for i, n := range scenarioOrder {
		if n == name {
			return i
		}
	}
	return len(scenarioOrder)
}

// columns returns the policies' names.
func columns(policies []Policy) []string {
	out := make([]string, len(policies))
	for i, p := range policies {
		out[i] = p.Name
	}
	return out
}

// notes adds every policy's note to t.
func notes(t *Table, policies []Policy) {
	for _, p := range policies {
		t.AddNote(p.Note)
	}
}
