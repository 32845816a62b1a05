package metrics_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	// Every policy, so that Names lists every metric a doc may name.
	_ "github.com/pickwise/pickwise/balancer/orcawrr"
	_ "github.com/pickwise/pickwise/balancer/p2c"
	_ "github.com/pickwise/pickwise/balancer/peakewma"
	_ "github.com/pickwise/pickwise/balancer/prequal"
	_ "github.com/pickwise/pickwise/balancer/ringhash"
	_ "github.com/pickwise/pickwise/balancer/shadow"
	_ "github.com/pickwise/pickwise/balancer/subset"
	"github.com/pickwise/pickwise/metrics"
)

// The docs name metrics in three forms: in full (pickwise.p2c.picks), with
// a placeholder for the policy (pickwise.<p>.picks, which the metrics table
// in docs/observability.md spells out in its second column), and as a
// suffix after a full name in the same cell
// (`pickwise.orca_wrr.endpoint_weight_not_yet_usable`, `.endpoint_weight_stale`).
var (
	fullName   = regexp.MustCompile(`pickwise\.([a-z0-9_]+)\.([a-z0-9_]+)`)
	tableRow   = regexp.MustCompile("^\\| `pickwise\\.")
	suffixName = regexp.MustCompile("`\\.([a-z0-9_]+)`")
	// A package doc lists a policy's metrics after a wildcard:
	// "pickwise.orca_wrr.*: rr_fallback, endpoint_weight, ...".
	// The placeholder form alone: pickwise.<p>.name.
	placeholderName = regexp.MustCompile(`pickwise\.<p>\.([a-z0-9_]+)`)
	wildcardList    = regexp.MustCompile(`pickwise\.([a-z0-9_]+)\.\*:\s*([a-z0-9_,\s]+)`)
)

// notMetricPrefixes are the <x> of pickwise.<x>.<y> names that are not
// metrics: the test server's gRPC services (pickwise.interop.Backend) and
// the load probe's (pickwise.serverload.v1.LoadProbe).
var notMetricPrefixes = map[string]bool{"interop": true, "serverload": true}

// TestDocumentedNamesExist fails when a Markdown page, a package doc or a
// comment names a metric that no policy registers: a renamed metric whose
// docs were left behind, or a typo a user would copy into a dashboard.
func TestDocumentedNamesExist(t *testing.T) {
	registered := map[string]bool{}
	for _, n := range allNames() {
		registered[n] = true
	}
	if len(registered) == 0 {
		t.Fatal("no metric registered: the policies' blank imports are missing")
	}
	root := filepath.Join("..")
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); name == ".git" || name == "testdata" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".md") && (!strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go")) {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		// Comment lines joined, so that a list may run over several.
		for _, m := range wildcardList.FindAllStringSubmatch(strings.ReplaceAll(string(data), "\n//", " "), -1) {
			for _, n := range strings.Split(m[2], ",") {
				if n = strings.TrimSpace(n); n != "" && !registered["pickwise."+m[1]+"."+n] {
					t.Errorf("%s lists pickwise.%s.%s, which no policy registers", path, m[1], n)
				}
			}
		}
		for i, line := range strings.Split(string(data), "\n") {
			for _, m := range fullName.FindAllStringSubmatch(line, -1) {
				if notMetricPrefixes[m[1]] {
					continue
				}
				if !isPolicyPrefix(m[1]) {
					t.Errorf("%s:%d names %s, but no policy's metrics start pickwise.%s.", path, i+1, m[0], m[1])
					continue
				}
				if !registered[m[0]] && !isPrefixOfName(m[0], registered) {
					t.Errorf("%s:%d names %s, which no policy registers", path, i+1, m[0])
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestReadmeTableListsEveryMetric checks the metrics table in
// docs/observability.md, which the README links to, against the registry
// both ways: every row names registered metrics for the policies it lists,
// and every registered metric has a row.
func TestReadmeTableListsEveryMetric(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "docs", "observability.md"))
	if err != nil {
		t.Fatal(err)
	}
	registered := allNames()
	documented := map[string]bool{}
	var lastPolicies []string
	for i, line := range strings.Split(string(data), "\n") {
		if !tableRow.MatchString(line) {
			continue
		}
		cells := strings.Split(line, "|")
		if len(cells) < 4 {
			t.Fatalf("docs/observability.md:%d: a metrics row without a policies column: %q", i+1, line)
		}
		nameCell, policyCell := cells[1], strings.TrimSpace(cells[2])
		policies := lastPolicies
		if policyCell != "same" {
			policies = nil
			for _, p := range strings.Split(policyCell, ",") {
				policies = append(policies, strings.TrimSpace(p))
			}
		}
		lastPolicies = policies
		var names []string
		var prefix string
		for _, m := range fullName.FindAllStringSubmatch(strings.ReplaceAll(nameCell, "<p>", "POLICY"), -1) {
			names = append(names, m[0])
			prefix = strings.TrimSuffix(m[0], m[2])
		}
		if prefix == "" {
			// Only the placeholder form: pickwise.<p>.name.
			for _, m := range placeholderName.FindAllStringSubmatch(nameCell, -1) {
				names = append(names, "pickwise.POLICY."+m[1])
				prefix = "pickwise.POLICY."
			}
		}
		for _, m := range suffixName.FindAllStringSubmatch(nameCell, -1) {
			names = append(names, prefix+m[1])
		}
		for _, n := range names {
			if !strings.Contains(n, "POLICY") {
				documented[n] = true
				if !slices.Contains(registered, n) {
					t.Errorf("docs/observability.md:%d documents %s, which no policy registers", i+1, n)
				}
				continue
			}
			for _, p := range policies {
				full := strings.Replace(n, "POLICY", p, 1)
				documented[full] = true
				if !slices.Contains(registered, full) {
					t.Errorf("docs/observability.md:%d documents %s for %s, which that policy does not register", i+1, full, p)
				}
			}
		}
	}
	for _, n := range registered {
		if !documented[n] {
			t.Errorf("%s is registered but the metrics table in docs/observability.md has no row for it", n)
		}
	}
}

// isPolicyPrefix says whether the middle part of pickwise.<x>.<y> is a
// policy's (or the subset parent's) metric prefix.
func isPolicyPrefix(p string) bool {
	for _, n := range allNames() {
		if strings.HasPrefix(n, "pickwise."+p+".") {
			return true
		}
	}
	return false
}

// isPrefixOfName accepts a name that is written as the start of longer
// registered ones, such as pickwise.p2c.endpoints in "pickwise.p2c.endpoints_*"
// or in the Prometheus spelling's explanation.
func isPrefixOfName(name string, registered map[string]bool) bool {
	for n := range registered {
		if strings.HasPrefix(n, name+"_") {
			return true
		}
	}
	return false
}

// allNames is every metric registered, those labelled by endpoint too.
func allNames() []string { return append(metrics.Names(), metrics.EndpointNames()...) }
