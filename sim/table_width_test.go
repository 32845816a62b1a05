package sim

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"
)

// checkWidth fails t for every line of s wider than LineWidth.
func checkWidth(t *testing.T, name, s string) {
	t.Helper()
	for i, l := range strings.Split(s, "\n") {
		if n := utf8.RuneCountInString(l); n > LineWidth {
			t.Errorf("%s: line %d is %d columns wide, want <= %d:\n%s", name, i+1, n, LineWidth, l)
		}
	}
}

// words is every space-separated word of the table's text, to check that
// wrapping drops none.
func words(t *Table) []string {
	var out []string
	add := func(s string) { out = append(out, strings.Fields(s)...) }
	add(t.Title)
	for _, c := range t.Columns {
		add(c)
	}
	for _, r := range t.Rows {
		add(r.Label)
		for _, c := range r.Cells {
			add(c)
		}
	}
	for _, n := range t.Notes {
		add(n)
	}
	return out
}

// wideTable has n columns with long policy-like names, long labels and
// notes, and a word longer than a line.
func wideTable(n int) *Table {
	t := &Table{Title: strings.Repeat("A title that goes on and on about the scenario's parameters; ", 4)}
	for i := range n {
		t.Columns = append(t.Columns, fmt.Sprintf("pickwise_ring_hash (maglev, bounded 1.%d, variant %d)", i, i))
	}
	cells := make([]string, n)
	for i := range cells {
		cells[i] = fmt.Sprintf("%d.%d%%", 10*i, i)
	}
	t.AddRow("a short label", cells...)
	t.AddRow("a label long enough that it has to wrap once the table is split into groups of columns", cells...)
	t.AddRow("  an indented sub-row label, also rather longer than the label column allows", cells...)
	t.AddRow("a row with fewer cells", cells[:n/2]...)
	long := make([]string, n)
	for i := range long {
		long[i] = "n/a (a cell that explains itself at some length, which a column cannot hold on one line)"
	}
	t.AddRow("long cells", long...)
	t.AddNote(strings.Repeat("a note that runs on past any terminal's width, ", 8))
	t.AddNote("unbroken: " + strings.Repeat("x", 3*LineWidth))
	return t
}

func TestTableFitsLineWidth(t *testing.T) {
	for _, n := range []int{0, 1, 2, 5, 13} {
		tb := wideTable(n)
		s := tb.String()
		checkWidth(t, fmt.Sprintf("%d columns", n), s)
		// Nothing is lost: every word appears, cut words as their pieces.
		flat := strings.Join(strings.Fields(s), "")
		for _, w := range words(tb) {
			if !strings.Contains(flat, w) {
				t.Errorf("%d columns: %q missing from\n%s", n, w, s)
			}
		}
	}
}

// A table that fits is printed as it always was: one line per row, one
// header line, columns right-aligned.
func TestTableNarrowUnchanged(t *testing.T) {
	tb := &Table{Title: "Narrow", Columns: []string{"a", "bb"}}
	tb.AddRow("row one", "1", "22")
	tb.AddRow("two", "333", "4")
	tb.AddNote("a note")
	want := "Narrow\n\n" +
		"           a  bb\n" +
		"row one    1  22\n" +
		"two      333   4\n" +
		"  * a note\n"
	if got := tb.String(); got != want {
		t.Errorf("String() =\n%s\nwant\n%s", got, want)
	}
}

// A wide table's column groups each repeat every row label, and every cell
// is printed once.
func TestTableGroups(t *testing.T) {
	tb := wideTable(13)
	s := tb.String()
	groups := strings.Count(s, "a short label")
	if groups < 2 {
		t.Fatalf("a 13-column table printed in %d group(s), want several:\n%s", groups, s)
	}
	for i := range 13 {
		want := 3 // the rows with every cell
		if i < 13/2 {
			want++ // and the one with half of them
		}
		if c := strings.Count(s, fmt.Sprintf(" %d.%d%%", 10*i, i)); c != want {
			t.Errorf("cell %d.%d%% printed %d times, want once per row that has it (%d)", 10*i, i, c, want)
		}
	}
}

// TestScenarioTablesFit renders the real scenarios' tables, at CI's reduced
// scale, and checks every line fits. A scenario whose own test checks its
// table (scenarioTest) is left to it; the others run here.
func TestScenarioTablesFit(t *testing.T) {
	for _, s := range Scenarios() {
		if _, own := ownWidthCheck.Load(s.Name); own {
			continue
		}
		tb, err := s.Run(Reduced)
		if err != nil {
			t.Fatalf("%s: %v", s.Name, err)
		}
		checkWidth(t, s.Name, tb.String())
	}
}
