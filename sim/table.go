package sim

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Table is a scenario's printed result: one row per measure, one column per
// policy.
type Table struct {
	Title   string
	Columns []string
	Rows    []Row
	Notes   []string
}

// Row is one measure across the policies.
type Row struct {
	Label string
	Cells []string
}

// AddRow appends a row; cells are in column order.
func (t *Table) AddRow(label string, cells ...string) {
	t.Rows = append(t.Rows, Row{Label: label, Cells: cells})
}

// AddNote appends a note printed under the table, once.
func (t *Table) AddNote(note string) {
	if note == "" {
		return
	}
	for _, n := range t.Notes {
		if n == note {
			return
		}
	}
	t.Notes = append(t.Notes, note)
}

// String renders the table as aligned plain text.
func (t *Table) String() string {
	widths := make([]int, len(t.Columns)+1)
	for _, r := range t.Rows {
		widths[0] = max(widths[0], utf8.RuneCountInString(r.Label))
		for i, c := range r.Cells {
			widths[i+1] = max(widths[i+1], utf8.RuneCountInString(c))
		}
	}
	for i, c := range t.Columns {
		widths[i+1] = max(widths[i+1], utf8.RuneCountInString(c))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n\n", t.Title)
	line := func(label string, cells []string) {
		b.WriteString(pad(label, widths[0], false))
		for i := range t.Columns {
			c := ""
			if i < len(cells) {
				c = cells[i]
			}
			b.WriteString("  ")
			b.WriteString(pad(c, widths[i+1], true))
		}
		b.WriteString("\n")
	}
	line("", t.Columns)
	for _, r := range t.Rows {
		line(r.Label, r.Cells)
	}
	for _, n := range t.Notes {
		fmt.Fprintf(&b, "  * %s\n", n)
	}
	return b.String()
}

func pad(s string, w int, right bool) string {
	n := w - utf8.RuneCountInString(s)
	if n <= 0 {
		return s
	}
	if right {
		return strings.Repeat(" ", n) + s
	}
	return s + strings.Repeat(" ", n)
}

// Pct formats a share as a percentage.
func Pct(x float64) string { return fmt.Sprintf("%.1f%%", 100*x) }

// Ms formats a duration in milliseconds.
func Ms(d interface{ Seconds() float64 }) string { return fmt.Sprintf("%.0fms", d.Seconds()*1000) }

// thousands formats n with commas between groups of three digits, as the
// tables' titles write rates: 9,000 rps.
func thousands(n int) string {
	if n < 0 {
		return "-" + thousands(-n)
	}
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
