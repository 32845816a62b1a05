package lbconfig

import (
	"fmt"
	"strings"
)

// policyPackages names each pickwise policy and the package whose blank
// import registers it. lbconfig cannot import those packages (they import
// lbconfig), so a test checks this table against each package's Name.
var policyPackages = []struct{ name, pkg string }{
	{"pickwise_orca_wrr", "github.com/pickwise/pickwise/balancer/orcawrr"},
	{"pickwise_p2c", "github.com/pickwise/pickwise/balancer/p2c"},
	{"pickwise_peak_ewma", "github.com/pickwise/pickwise/balancer/peakewma"},
	{"pickwise_prequal", "github.com/pickwise/pickwise/balancer/prequal"},
	{"pickwise_ring_hash", "github.com/pickwise/pickwise/balancer/ringhash"},
	{"pickwise_shadow", "github.com/pickwise/pickwise/balancer/shadow"},
	{"pickwise_subset", "github.com/pickwise/pickwise/balancer/subset"},
}

// grpcPolicies are grpc-go's policies a service config names, offered as
// suggestions when registered: grpc's registry cannot be listed.
var grpcPolicies = []string{
	"pick_first",
	"round_robin",
	"least_request_experimental",
	"weighted_round_robin",
	"ring_hash_experimental",
	"random_subsetting_experimental",
}

// notRegistered explains why policy, which registered says is not in
// grpc's balancer registry, cannot be used: grpc skips such an entry of a
// loadBalancingConfig list without a word, so the error names the import
// it lacks, or the name it is closest to.
func notRegistered(policy string, registered func(string) bool) error {
	if pkg := policyPackage(policy); pkg != "" {
		return fmt.Errorf("lbconfig: policy %q is not registered: its package is not imported; add import _ %q", policy, pkg)
	}
	if near := closestPolicy(policy, registered); near != "" {
		if pkg := policyPackage(near); pkg != "" && !registered(near) {
			return fmt.Errorf("lbconfig: policy %q is not registered; did you mean %q? (add import _ %q)", policy, near, pkg)
		}
		return fmt.Errorf("lbconfig: policy %q is not registered; did you mean %q?", policy, near)
	}
	return fmt.Errorf("lbconfig: policy %q is not registered: no package this program imports registers it with grpc", policy)
}

// policyPackage returns the package that registers the pickwise policy
// name, or "".
func policyPackage(name string) string {
	for _, p := range policyPackages {
		if strings.EqualFold(p.name, name) {
			return p.pkg
		}
	}
	return ""
}

// closestPolicy returns the pickwise policy, or the registered grpc
// policy, nearest to name, or "" if none is near enough to be a typo.
// "p2c" finds "pickwise_p2c": the prefix is the part most often left out.
func closestPolicy(name string, registered func(string) bool) string {
	name = strings.ToLower(name)
	candidates := make([]string, 0, len(policyPackages)+len(grpcPolicies))
	for _, p := range policyPackages {
		if p.name == "pickwise_"+name {
			return p.name
		}
		candidates = append(candidates, p.name)
	}
	for _, g := range grpcPolicies {
		if registered(g) {
			candidates = append(candidates, g)
		}
	}
	best, bestD := "", 0
	for _, c := range candidates {
		// A typo or two in a short name, a few more in a long one.
		limit := 1 + len(c)/6
		if d := editDistance(name, c, limit); d <= limit && (best == "" || d < bestD) {
			best, bestD = c, d
		}
	}
	return best
}

// editDistance is the optimal string alignment distance between a and b
// (insertions, deletions, substitutions and swaps of adjacent bytes), or
// limit+1 once it must exceed limit: names are short, but a and b are user
// input and may not be.
func editDistance(a, b string, limit int) int {
	if d := len(a) - len(b); d > limit || -d > limit {
		return limit + 1
	}
	// Three rows: the swap looks two back.
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		rowMin := cur[0]
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
			rowMin = min(rowMin, cur[j])
		}
		if rowMin > limit {
			return limit + 1
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}
