package engine

import (
	"bufio"
	"bytes"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
)

// engineFiles is the order the engine's files read in, lowest first: each
// uses only what it or the files before it declare, so a reader can start
// at the top and never need a file further down. doc.go says what each
// layer is for.
var engineFiles = []string{
	// Injected time and randomness, the sampler's draws, config helpers.
	"doc.go", "clock.go", "recentclock.go", "duration.go", "sampler.go", "config.go", "errors.go", "reasons.go",
	// The evidence an endpoint accumulates: slow start, failures, latency,
	// ejection state, and what its Done hands to the balancer.
	"slowstart.go", "failure.go", "latency.go", "ejector.go", "donework.go",
	// The endpoint, attempts, and the immutable snapshot pickers read.
	"endpoint.go", "attempts.go", "ready.go", "timed.go", "probe.go",
	// Pickers.
	"leastloaded.go", "weighted.go",
	// What a policy supplies, and the parts it may build without a
	// balancer.
	"metrics.go", "policy.go", "static.go", "weightkeeper.go",
	// The balancer: one type whose methods are split by job.
	"balancer.go", "readylist.go", "coalesce.go", "ejection.go", "recording.go", "weights.go", "lazy.go", "observe.go", "children.go", "parked.go",
	// Registering a policy with grpc, and parents that build policies.
	"registry.go", "parents.go",
}

// upwardAllowed are the references that run against engineFiles' order,
// each for the reason given.
var upwardAllowed = map[string]string{
	// doneWork's owner interface names the endpoint a probe readmits: the
	// endpoint holds its balancer's doneWork, and the owner it calls is
	// the balancer, so the interface must mention the endpoint.
	"donework.go -> endpoint.go": "the owner interface's readmitFromProbe(*Endpoint)",
	// engineBalancer's methods live in the balancer's files by job; a call
	// among them is a call within one type, not a layer reaching up.
	"balancer.go -> recording.go": "engineBalancer's own methods",
	"balancer.go -> weights.go":   "engineBalancer's own methods",
	"balancer.go -> children.go":  "engineBalancer's own methods and its children",
	"balancer.go -> coalesce.go":  "engineBalancer's own methods and its publishing state",
	"balancer.go -> readylist.go": "engineBalancer's own methods, its READY and member lists, and state counts",
	// The connect mode is chosen by the balancer and calls back into its
	// publishing: a strategy of the one type.
	"balancer.go -> lazy.go": "the onDemand connectMode",
	// A removed endpoint's child is parked, and its reports while parked
	// are the parking's to judge: the balancer's own methods again.
	"balancer.go -> parked.go": "engineBalancer's own methods",
	"children.go -> parked.go": "a parked child's state report",
	"weights.go -> parked.go":  "the parked endpoints' trackers, stopped with the others'",
}

// TestFilesReadInOneDirection type-checks the engine and fails on any
// reference from a file to a declaration in a file after it in
// engineFiles, unless upwardAllowed lists that pair, and on a file missing
// from engineFiles.
func TestFilesReadInOneDirection(t *testing.T) {
	exports := exportData(t)
	fset := token.NewFileSet()
	names, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	rank := map[string]int{}
	for i, f := range engineFiles {
		rank[f] = i
	}
	var files []*ast.File
	for _, n := range names {
		if strings.HasSuffix(n, "_test.go") {
			continue
		}
		if _, ok := rank[n]; !ok {
			t.Errorf("%s is not in engineFiles: place it in the reading order", n)
			continue
		}
		f, err := parser.ParseFile(fset, n, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	imp := importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		return os.Open(exports[path])
	})
	info := &types.Info{Uses: map[*ast.Ident]types.Object{}}
	pkg, err := (&types.Config{Importer: imp}).Check("github.com/pickwise/pickwise/internal/engine", fset, files, info)
	if err != nil {
		t.Fatal(err)
	}
	up := map[string][]string{}
	for id, obj := range info.Uses {
		if obj.Pkg() != pkg || !obj.Pos().IsValid() {
			continue
		}
		from := filepath.Base(fset.File(id.Pos()).Name())
		to := filepath.Base(fset.File(obj.Pos()).Name())
		if rank[to] > rank[from] {
			k := from + " -> " + to
			if !slices.Contains(up[k], obj.Name()) {
				up[k] = append(up[k], obj.Name())
			}
		}
	}
	var keys []string
	for k := range up {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if _, ok := upwardAllowed[k]; ok {
			continue
		}
		sort.Strings(up[k])
		t.Errorf("%s uses %s, declared further down the reading order: move the declaration up, or the use down", k, strings.Join(up[k], ", "))
	}
	for k := range upwardAllowed {
		if _, ok := up[k]; !ok {
			t.Errorf("upwardAllowed lists %s, which no longer happens: remove it", k)
		}
	}
}

// exportData maps every package the engine imports to its compiled export
// data, as go list reports it.
func exportData(t *testing.T) map[string]string {
	t.Helper()
	cmd := exec.Command("go", "list", "-export", "-deps", "-f", "{{.ImportPath}}={{.Export}}", ".")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	m := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if path, file, ok := strings.Cut(sc.Text(), "="); ok && file != "" {
			m[path] = file
		}
	}
	return m
}
