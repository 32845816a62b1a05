package subset

import (
	"slices"
	"testing"

	"github.com/pickwise/pickwise/internal/testkit"
	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/resolver"
)

// FuzzParseConfig checks that every input is either rejected with an error
// that names the policy, or yields a config the balancer runs with: the
// child gets min(subsetSize, backends) distinct endpoints of the list.
// The child is swapped for the recording one, since any registered policy
// may be named and the point is the parent's filtering.
func FuzzParseConfig(f *testing.F) {
	for _, seed := range []string{
		`{"subsetSize": 3}`, `{}`, ``, `null`, `[]`, `{"subsetSize": 0}`, `{"subsetSize": -1}`,
		`{"subsetSize": 2, "clientIndex": 1, "clientCount": 3}`,
		`{"subsetSize": 2, "clientIndex": 3, "clientCount": 3}`,
		`{"subsetSize": 2, "clientIndex": 9999, "clientCount": 10000}`,
		`{"subsetSize": 2, "clientIndex": 0, "clientCount": 10001}`,
		`{"subsetSize": 4, "clientIndex": 2147483646, "clientCount": 2147483647, "mode": "stable"}`,
		`{"subsetSize": 2, "clientIndex": 1}`, `{"subsetSize": 2, "clientCount": 1}`,
		`{"subsetSize": 5, "clientId": "pod-a"}`, `{"subsetSize": 5, "clientId": ""}`,
		`{"subsetSize": 1, "mode": "stable"}`, `{"subsetSize": 1, "mode": "fast"}`,
		`{"subsetSize": 100, "childPolicy": [{"pickwise_p2c": {"choiceCount": 3}}]}`,
		`{"subsetSize": 2, "childPolicy": [{"pickwise_p2c": {"choiceCount": 1}}]}`,
		`{"subsetSize": 2, "childPolicy": [{"nope": {}}, {"pickwise_subset_test_child": {"tag": "x"}}]}`,
		`{"subsetSize": 2, "childPolicy": [{"pickwise_subset": {"subsetSize": 1}}]}`,
		`{"subsetSize": 2, "childPolicy": []}`, `{"subsetSize": 2, "childPolicy": [{}]}`,
		`{"subsetSize": 2, "childPolicy": {"a": {}}}`, `{"subsetSize": 2, "childPolicy": null}`,
		`{"subsetSize": 2, "unknown": 1}`, `{"subsetSize": 2}{}`, `{"subsetSize": 1e3}`,
	} {
		f.Add(seed)
	}
	f.Add(nested(MaxNesting, ""))
	f.Add(nested(MaxNesting+1, ""))
	addrs := testkit.Addrs(7)
	eps := endpointsOf(append(slices.Clone(addrs), addrs[2])) // one repeat
	f.Fuzz(func(t *testing.T, in string) {
		parsed := testkit.FuzzParse(t, Name, ParseConfig, in)
		if parsed == nil {
			return
		}
		cfg := *parsed.(*Config)
		cfg.ChildPolicy = ChildPolicy{Name: testChildName, Config: &recConfig{}}
		b := newBalancer(testkit.NewClientConn(), balancer.BuildOptions{}, 5)
		defer b.Close()
		if err := b.UpdateClientConnState(balancer.ClientConnState{
			ResolverState:  resolver.State{Endpoints: eps},
			BalancerConfig: &cfg,
		}); err != nil {
			t.Fatalf("config %s parsed but the balancer rejected it: %v", in, err)
		}
		got := lastChild().ids()
		if len(got) != min(cfg.SubsetSize, len(addrs)) {
			t.Fatalf("config %s: child got %d endpoints %v", in, len(got), got)
		}
		if len(slices.Compact(sorted(got))) != len(got) || !isSubsetOf(got, addrs) {
			t.Fatalf("config %s: child got %v, want distinct members of %v", in, got, addrs)
		}
		// Keep the recording children from piling up over a long run.
		builtMu.Lock()
		built = nil
		builtMu.Unlock()
	})
}

func isSubsetOf(a, b []string) bool {
	for _, x := range a {
		if !slices.Contains(b, x) {
			return false
		}
	}
	return true
}
