package sim

import (
	"fmt"
	"strconv"
	"strings"
	"time"
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

// LineWidth is the widest line String renders. Tables go to terminals,
// logs and CI output, where a longer line wraps mid-row or is cut off.
const LineWidth = 120

// String renders the table as aligned plain text, no line wider than
// LineWidth. A table that fits is laid out one line per row; one that does
// not first wraps its column headers, then its row labels, and then splits
// its columns into groups printed one under another, each repeating the
// row labels. The title and notes wrap at word boundaries.
func (t *Table) String() string {
	var b strings.Builder
	for _, l := range wrap(t.Title, LineWidth, "", "") {
		b.WriteString(l)
		b.WriteString("\n")
	}
	b.WriteString("\n")
	t.writeGrid(&b)
	for _, n := range t.Notes {
		for _, l := range wrap(n, LineWidth, "  * ", "    ") {
			b.WriteString(l)
			b.WriteString("\n")
		}
	}
	return b.String()
}

const (
	// colGap is the space between columns.
	colGap = 2
	// minHeader is how narrow a wrapped column header may get before
	// its words are put two to a line: headers are policy names with a
	// variant in parentheses ("pickwise_p2c (weights)").
	minHeader = 20
	// maxLabel is how wide the row labels may stay once a table has to
	// be split into column groups: each group repeats them.
	maxLabel = 40
)

// cell is row r's cell in column i; rows may be shorter than the columns.
func (r Row) cell(i int) string {
	if i < len(r.Cells) {
		return r.Cells[i]
	}
	return ""
}

// writeGrid writes the header and rows, in as many column groups as it
// takes to stay within LineWidth.
func (t *Table) writeGrid(b *strings.Builder) {
	n := len(t.Columns)
	labelW := 0
	for _, r := range t.Rows {
		labelW = max(labelW, runes(r.Label))
	}
	cellW := make([]int, n) // the widest cell of each column
	for i := range cellW {
		for _, r := range t.Rows {
			cellW[i] = max(cellW[i], runes(r.cell(i)))
		}
	}
	heads := make([][]string, n)
	widths := make([]int, n)
	for i, c := range t.Columns {
		heads[i] = []string{c}
		widths[i] = max(cellW[i], runes(c))
	}
	if labelW+total(widths) > LineWidth {
		// Wrap the headers, each to its cells' width but not narrower
		// than its longest word or minHeader.
		for i, c := range t.Columns {
			var w int
			heads[i], w = headerLines(c, max(cellW[i], longestWord(c), min(runes(c), minHeader)))
			widths[i] = max(w, cellW[i])
		}
	}
	if labelW+total(widths) > LineWidth {
		labelW = min(labelW, maxLabel)
		// No column wider than what is left beside the labels.
		room := max(LineWidth-labelW-colGap, 1)
		for i, c := range t.Columns {
			if widths[i] > room {
				heads[i], _ = headerLines(c, room)
				widths[i] = room
			}
		}
	}
	if n == 0 {
		t.writeBlock(b, 0, 0, labelW, heads, widths)
		return
	}
	for g, group := range groups(labelW, widths) {
		if g > 0 {
			b.WriteString("\n")
		}
		t.writeBlock(b, group[0], group[1], labelW, heads, widths)
	}
}

// groups splits columns of widths into as few consecutive groups as fit
// beside labels labelW wide, as even in size as that allows, and returns
// each group's [from, to).
func groups(labelW int, widths []int) [][2]int {
	pack := func(most int) [][2]int {
		var out [][2]int
		for start := 0; start < len(widths); {
			end, used := start+1, labelW+colGap+widths[start]
			for end < len(widths) && end-start < most && used+colGap+widths[end] <= LineWidth {
				used += colGap + widths[end]
				end++
			}
			out = append(out, [2]int{start, end})
			start = end
		}
		return out
	}
	greedy := pack(len(widths))
	// Greedy packing can leave a last group of one; as many groups with
	// at most an even share of the columns each read better.
	if even := pack((len(widths) + len(greedy) - 1) / len(greedy)); len(even) == len(greedy) {
		return even
	}
	return greedy
}

// writeBlock writes columns [from, to) with the row labels: the headers
// bottom-aligned above right-aligned cells, a label or cell that is too
// wide wrapped onto the row's next lines.
func (t *Table) writeBlock(b *strings.Builder, from, to, labelW int, heads [][]string, widths []int) {
	line := func(label string, cells func(i int) string) {
		var l strings.Builder
		l.WriteString(pad(label, labelW, false))
		for i := from; i < to; i++ {
			l.WriteString(strings.Repeat(" ", colGap))
			l.WriteString(pad(cells(i), widths[i], true))
		}
		b.WriteString(strings.TrimRight(l.String(), " "))
		b.WriteString("\n")
	}
	h := 0
	for i := from; i < to; i++ {
		h = max(h, len(heads[i]))
	}
	for j := 0; j < h; j++ {
		line("", func(i int) string {
			if k := j - (h - len(heads[i])); k >= 0 {
				return heads[i][k]
			}
			return ""
		})
	}
	for _, r := range t.Rows {
		indent := strings.Repeat(" ", len(r.Label)-len(strings.TrimLeft(r.Label, " ")))
		labels := []string{r.Label}
		if runes(r.Label) > labelW {
			labels = wrap(r.Label, labelW, "", indent+"  ")
		}
		cells := make([][]string, to)
		rowH := len(labels)
		for i := from; i < to; i++ {
			cells[i] = []string{r.cell(i)}
			if runes(r.cell(i)) > widths[i] {
				cells[i] = wrap(r.cell(i), widths[i], "", "")
			}
			rowH = max(rowH, len(cells[i]))
		}
		for j := 0; j < rowH; j++ {
			label := ""
			if j < len(labels) {
				label = labels[j]
			}
			line(label, func(i int) string {
				if j < len(cells[i]) {
					return cells[i][j]
				}
				return ""
			})
		}
	}
}

// headerLines wraps column header c to at most w columns, starting a new
// line at a parenthesised variant ("least-conn (full scan)"), and returns
// its lines and their width.
func headerLines(c string, w int) ([]string, int) {
	if runes(c) > w {
		if i := strings.Index(c, " ("); i > 0 {
			name, nw := fit(c[:i], w)
			variant, vw := fit(c[i+1:], w)
			return append(name, variant...), max(nw, vw)
		}
	}
	return fit(c, w)
}

// fit wraps s to at most w columns and returns its lines and their width.
func fit(s string, w int) ([]string, int) {
	lines := wrap(s, w, "", "")
	width := 0
	for _, l := range lines {
		width = max(width, runes(l))
	}
	return lines, width
}

// total is the width of columns of widths, each after a gap.
func total(widths []int) int {
	n := 0
	for _, w := range widths {
		n += colGap + w
	}
	return n
}

// wrap breaks s at spaces into lines of at most width runes, the first
// prefixed with first and the rest with rest. A leading indent of s is
// kept on its first line; a word longer than a line is cut.
func wrap(s string, width int, first, rest string) []string {
	if runes(first)+runes(s) <= width {
		return []string{first + s}
	}
	trimmed := strings.TrimLeft(s, " ")
	first += s[:len(s)-len(trimmed)]
	var lines []string
	prefix := first
	var cur strings.Builder
	curLen := 0 // runes in cur
	flush := func() {
		lines = append(lines, prefix+cur.String())
		prefix = rest
		cur.Reset()
		curLen = 0
	}
	for _, w := range strings.Fields(trimmed) {
		room := max(width-runes(prefix), 1)
		if curLen > 0 && curLen+1+runes(w) > room {
			flush()
			room = max(width-runes(prefix), 1)
		}
		for curLen == 0 && runes(w) > room {
			// A word wider than a whole line: cut it.
			head, tail := splitRunes(w, room)
			cur.WriteString(head)
			curLen = room
			flush()
			room = max(width-runes(prefix), 1)
			w = tail
		}
		if curLen > 0 {
			cur.WriteByte(' ')
			curLen++
		}
		cur.WriteString(w)
		curLen += runes(w)
	}
	if curLen > 0 || len(lines) == 0 {
		flush()
	}
	return lines
}

// splitRunes splits s after its first n runes.
func splitRunes(s string, n int) (string, string) {
	i := 0
	for j := range s {
		if i == n {
			return s[:j], s[j:]
		}
		i++
	}
	return s, ""
}

// longestWord is the width of s's widest space-separated word.
func longestWord(s string) int {
	n := 0
	for _, w := range strings.Fields(s) {
		n = max(n, runes(w))
	}
	return n
}

func runes(s string) int { return utf8.RuneCountInString(s) }

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

// pctCells formats shares as percentages, one cell each.
func pctCells(xs []float64) []string { return cells(xs, Pct) }

// msCells formats durations in milliseconds, one cell each.
func msCells(ds []time.Duration) []string {
	return cells(ds, func(d time.Duration) string { return Ms(d) })
}

// cells formats each of xs with f.
func cells[T any](xs []T, f func(T) string) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = f(x)
	}
	return out
}

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
