package sim

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var updateGolden = flag.Bool("update", false, "rewrite testdata/golden from this run")

// TestGolden holds every scenario's seeded figures to the ones recorded in
// testdata/golden: a change meant to keep behaviour (a refactoring, a
// faster data structure) must leave every one of them as it was. Columns
// whose randomness is not the run's seed (grpc-go's own policies, and
// stages built on them) are left out, as their figures differ run to run.
// -sim.full checks the full-scale figures, those docs quote.
func TestGolden(t *testing.T) {
	if raceEnabled {
		// Every scenario already runs under the detector in its own test;
		// the figures are compared in the runs without it, which CI makes
		// at both scales.
		t.Skip("the figures are compared without the race detector")
	}
	dir := filepath.Join("testdata", "golden", "reduced")
	if testScale() == Full {
		dir = filepath.Join("testdata", "golden", "full")
	}
	for _, s := range Scenarios() {
		t.Run(s.Name, func(t *testing.T) {
			tbl, err := s.Run(testScale())
			if err != nil {
				t.Fatal(err)
			}
			got := seededFigures(tbl)
			path := filepath.Join(dir, s.Name+".txt")
			if *updateGolden {
				if err := os.MkdirAll(dir, 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (go test ./sim -run TestGolden -update writes it)", err)
			}
			if diff := cmp.Diff(string(want), got); diff != "" {
				t.Errorf("%s: seeded figures changed (-recorded +now):\n%s", s.Name, diff)
			}
		})
	}
}

// seededFigures lists tbl's cells one per line, "row | column | value",
// leaving out the columns a note marks as not seeded.
func seededFigures(tbl *Table) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n", tbl.Title)
	for _, r := range tbl.Rows {
		for j, c := range r.Cells {
			if j >= len(tbl.Columns) || unseeded(tbl, tbl.Columns[j]) {
				continue
			}
			fmt.Fprintf(&b, "%s | %s | %s\n", r.Label, tbl.Columns[j], c)
		}
	}
	return b.String()
}

// unseededStages are columns whose notes say as a group that they do not
// repeat: the rollout's shadow and canary stages run over round_robin.
var unseededStages = map[string]bool{"shadow, sampleRate 1": true, "shadow, sampleRate 0.1": true, "canary 10%": true}

// unseeded reports whether a note of tbl says column's figures do not
// follow the run's seed.
func unseeded(tbl *Table, column string) bool {
	if unseededStages[column] {
		return true
	}
	for _, n := range tbl.Notes {
		if strings.HasPrefix(n, column+": grpc-go's own code") {
			return true
		}
	}
	return false
}
