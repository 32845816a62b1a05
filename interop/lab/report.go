package main

import (
	"fmt"
	"html/template"
	"io"
	"math"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/pickwise/pickwise/sim"
)

// section is one scenario's part of the report: its table and, for
// real-gRPC scenarios, its charts.
type section struct {
	Name  string
	Table *sim.Table
	// Order is the policies in column order.
	Order []string
	// Charts are drawn in order, the one that shows the scenario's result
	// first.
	Charts []chart
}

// chartKind is what a chart plots.
type chartKind int

const (
	// latencyCDF plots each policy's successful-call latencies
	// (chart.Latencies) as a distribution.
	latencyCDF chartKind = iota
	// backendShares draws, per backend, one bar per policy: its share of
	// calls (chart.Shares, chart.Backends).
	backendShares
	// policyValues draws one horizontal bar per policy (chart.Values).
	policyValues
)

// chart is one plot of a section.
type chart struct {
	Kind  chartKind
	Title string
	// Reading is the line under the title that says which way is better.
	Reading string

	// Latencies are each policy's successful-call latencies, sorted
	// (latencyCDF).
	Latencies map[string][]time.Duration
	// Shares are each policy's per-backend shares of calls, in Backends
	// order (backendShares).
	Shares   map[string][]float64
	Backends []string
	// Values are each policy's bar (policyValues), a fraction shown as a
	// percentage if Percent.
	Values  map[string]float64
	Percent bool
	// Axis names the value axis of a policyValues chart.
	Axis string

	// Target marks the good value with a dashed line, named TargetLabel in
	// the legend: one value for every backend or policy, or, for
	// backendShares, one per backend (shares by capacity). Empty: none.
	Target      []float64
	TargetLabel string
}

// policies are the chart's policies that have data, in order.
func (c chart) policies(order []string) []string {
	var out []string
	for _, p := range order {
		var ok bool
		switch c.Kind {
		case latencyCDF:
			ok = len(c.Latencies[p]) > 0
		case backendShares:
			_, ok = c.Shares[p]
		case policyValues:
			_, ok = c.Values[p]
		}
		if ok {
			out = append(out, p)
		}
	}
	return out
}

// palette is a set of hues told apart with any common colour-vision
// deficiency: the Okabe-Ito set without its yellow (too pale on white),
// and Paul Tol's muted ones for the policies past seven. A policy takes
// the next one the first time the report charts it and keeps it on every
// chart. The order keeps two blues from the first ten, which the lab's
// charts fill: a light (grpc-go) bar in blue and one in sky blue would be
// hard to tell apart.
var palette = []string{
	"#0072B2", // blue
	"#E69F00", // orange
	"#009E73", // bluish green
	"#CC79A7", // reddish purple
	"#D55E00", // vermillion
	"#000000", // black
	"#882255", // wine
	"#999933", // olive
	"#332288", // indigo
	"#44AA99", // teal
	"#56B4E9", // sky blue
	"#AA4499", // purple
	"#661100", // brown
	"#888888", // grey
}

// styles maps a policy to its colour across the report.
type styles map[string]string

// assignColours gives each charted policy a colour of its own, in order of
// first appearance across sections; past the palette's length colours
// repeat.
func assignColours(sections []section) styles {
	st := styles{}
	for _, s := range sections {
		for _, c := range s.Charts {
			for _, p := range c.policies(s.Order) {
				if _, ok := st[p]; !ok {
					st[p] = palette[len(st)%len(palette)]
				}
			}
		}
	}
	return st
}

// builtin reports whether a policy is grpc-go's rather than pickwise's:
// its lines are dashed and its bars light, so that each of our policies
// stands out from its grpc-go peer.
func builtin(policy string) bool { return !strings.HasPrefix(policy, "pickwise_") }

// writeReport writes one self-contained HTML page: no scripts, no external
// files, plots as inline SVG.
func writeReport(w io.Writer, title string, sections []section) error {
	st := assignColours(sections)
	type column struct {
		Name    template.HTML
		Colour  string
		Builtin bool
	}
	type row struct {
		Label string
		Cells []string
	}
	type table struct {
		Title   string
		Columns []column
		Rows    []row
		Notes   []string
	}
	type view struct {
		Name   string
		Tables []table
		Notes  []string
		Charts []template.HTML
	}
	var views []view
	for _, s := range sections {
		v := view{Name: s.Name}
		if t := s.Table; t != nil {
			v.Notes = t.Notes
			for g, cols := range tableGroups(t) {
				tv := table{}
				if g == 0 {
					tv.Title = t.Title
				}
				for _, c := range t.Columns[cols[0]:cols[1]] {
					tv.Columns = append(tv.Columns, column{Name: breakable(c), Colour: st[c], Builtin: builtin(c)})
				}
				for _, r := range t.Rows {
					cells := make([]string, cols[1]-cols[0])
					for i := range cells {
						if j := cols[0] + i; j < len(r.Cells) {
							cells[i] = r.Cells[j]
						}
					}
					tv.Rows = append(tv.Rows, row{Label: r.Label, Cells: cells})
				}
				v.Tables = append(v.Tables, tv)
			}
		}
		for _, c := range s.Charts {
			if svg := c.svg(s.Order, st); svg != "" {
				v.Charts = append(v.Charts, template.HTML(svg))
			}
		}
		views = append(views, v)
	}
	return reportTemplate.Execute(w, struct {
		Title    string
		Sections []view
		Made     string
		Charts   bool
	}{title, views, time.Now().UTC().Format(time.RFC3339), len(st) > 0})
}

// Table geometry, in px, at the report's table font size: wide tables are
// split into column groups, each repeating the row labels, so that each
// fits tableBudget, which leaves a 1000 px wide window its margins.
const (
	tableFont   = 12.5
	tableBudget = 900
	cellPadding = 14
	// labelMin is the row labels' narrowest column (CSS: 14em).
	labelMin = 14 * tableFont
)

// minColumnWidth estimates the narrowest a column of header name and
// cells can get: its widest piece that cannot break, a header word (the
// name breaks after underscores) or a cell word.
func minColumnWidth(name string, cells []string) float64 {
	w := 0.0
	for _, word := range strings.Fields(strings.ReplaceAll(name, "_", "_ ")) {
		w = math.Max(w, textWidth(word, tableFont, true))
	}
	for _, c := range cells {
		for _, word := range strings.Fields(c) {
			w = math.Max(w, textWidth(word, tableFont, false))
		}
	}
	return w + cellPadding
}

// tableGroups splits t's columns into as few consecutive groups as fit
// tableBudget beside the row labels, and returns each group's [from, to).
func tableGroups(t *sim.Table) [][2]int {
	label := labelMin
	for _, r := range t.Rows {
		for _, word := range strings.Fields(r.Label) {
			label = math.Max(label, textWidth(word, tableFont, false)+cellPadding)
		}
	}
	widths := make([]float64, len(t.Columns))
	for i, c := range t.Columns {
		var cells []string
		for _, r := range t.Rows {
			if i < len(r.Cells) {
				cells = append(cells, r.Cells[i])
			}
		}
		widths[i] = minColumnWidth(c, cells)
	}
	var out [][2]int
	for start := 0; start < len(widths) || start == 0; {
		end, used := start, label
		for end < len(widths) && (end == start || used+widths[end] <= tableBudget) {
			used += widths[end]
			end++
		}
		out = append(out, [2]int{start, end})
		if end == start {
			break
		}
		start = end
	}
	// As many groups, as even in size as the budget allows, read better
	// than full ones and a last one of a column or two.
	if len(out) > 1 {
		per := (len(widths) + len(out) - 1) / len(out)
		var even [][2]int
		ok := true
		for start := 0; start < len(widths); start += per {
			end := min(start+per, len(widths))
			used := label
			for _, w := range widths[start:end] {
				used += w
			}
			ok = ok && used <= tableBudget
			even = append(even, [2]int{start, end})
		}
		if ok && len(even) == len(out) {
			return even
		}
	}
	return out
}

// breakable escapes a policy name for a table header and lets it break
// after its underscores, so that a narrow column wraps it rather than
// widening the table.
func breakable(name string) template.HTML {
	return template.HTML(strings.ReplaceAll(template.HTMLEscapeString(name), "_", "_<wbr>"))
}

var reportTemplate = template.Must(template.New("report").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><title>{{.Title}}</title>
<style>
body{font-family:system-ui,sans-serif;max-width:1200px;margin:2em auto;padding:0 1em;color:#222}
h2{border-bottom:1px solid #ddd;padding-bottom:.2em;margin-top:2em}
table{border-collapse:collapse;font-size:12.5px;font-variant-numeric:tabular-nums;margin:.5em 0}
caption{text-align:left;font-weight:600;font-size:14px;padding-bottom:.4em}
th,td{padding:3px 7px;border-bottom:1px solid #e6e6e6;vertical-align:bottom}
thead th{text-align:right;font-weight:600;border-bottom:2px solid #bbb;min-width:4em}
tbody th{text-align:left;font-weight:normal;min-width:14em}
tbody th div{max-width:32em}
.table{overflow-x:auto}
td{text-align:right}
.swatch{display:inline-block;width:.8em;height:.8em;margin-right:.3em;vertical-align:-.05em;border:1.5px solid}
ul.notes{font-size:12.5px;color:#444;padding-left:1.2em;max-width:75em}
ul.notes li{margin:.2em 0}
.plots{display:flex;flex-wrap:wrap;align-items:flex-start;gap:1em;margin-top:1em}
svg{background:#fff;border:1px solid #eee;max-width:100%;height:auto}
</style></head><body>
<h1>{{.Title}}</h1>
<p>Generated {{.Made}}.{{if .Charts}} On every chart a policy keeps one colour, also marked in the tables' column headers; pickwise's policies are drawn solid, grpc-go's built-in ones dashed (lines) or light (bars).{{end}}</p>
{{range .Sections}}<h2 id="{{.Name}}">{{.Name}}</h2>
{{range .Tables}}<div class="table"><table>
{{if .Title}}<caption>{{.Title}}</caption>{{end}}
<thead><tr><th></th>{{range .Columns}}<th scope="col">{{if .Colour}}<span class="swatch" style="border-color:{{.Colour}};background:{{if .Builtin}}#fff{{else}}{{.Colour}}{{end}}"></span>{{end}}{{.Name}}</th>{{end}}</tr></thead>
<tbody>{{range .Rows}}<tr><th scope="row"><div>{{.Label}}</div></th>{{range .Cells}}<td>{{.}}</td>{{end}}</tr>
{{end}}</tbody>
</table></div>
{{end}}{{if .Notes}}<ul class="notes">{{range .Notes}}<li>{{.}}</li>{{end}}</ul>{{end}}
{{if .Charts}}<div class="plots">{{range .Charts}}{{.}}{{end}}</div>{{end}}
{{end}}</body></html>
`))

// Chart geometry, in px.
const (
	plotW       = 560 // an SVG's width, unless its legend or labels need more
	innerH      = 210 // the plot area's height
	marginL     = 58  // room for the value axis' labels
	marginR     = 18
	titleSize   = 14
	readingSize = 12
	textSize    = 11
	legendLine  = 16 // a legend row's height
)

// textWidth estimates how wide s is set in sans-serif at size px. It errs
// wide: each character's advance is at least DejaVu Sans' (the widest of
// the common sans-serif faces, and Linux browsers' default), plus 5%, so a
// legend sized by it never clips a name.
func textWidth(s string, size float64, bold bool) float64 {
	em := 0.0
	for _, r := range s {
		switch {
		case strings.ContainsRune("il.,:;'|! ", r):
			em += 0.32
		case strings.ContainsRune("fjtr()[]-/", r):
			em += 0.42
		case strings.ContainsRune("_\"", r):
			em += 0.5
		case strings.ContainsRune("mwMW%@", r):
			em += 1.0
		case r >= 'A' && r <= 'Z':
			em += 0.78
		case r < utf8.RuneSelf:
			em += 0.64 // lower case, digits and the rest of ASCII
		default:
			em += 1.0
		}
	}
	if bold {
		em *= 1.12
	}
	return em * size * 1.05
}

// wrapText breaks s into lines no wider than width px at size.
func wrapText(s string, width, size float64, bold bool) []string {
	var lines []string
	cur := ""
	for _, w := range strings.Fields(s) {
		next := w
		if cur != "" {
			next = cur + " " + w
		}
		if cur != "" && textWidth(next, size, bold) > width {
			lines = append(lines, cur)
			next = w
		}
		cur = next
	}
	if cur != "" {
		lines = append(lines, cur)
	}
	return lines
}

// svgChart is a chart being drawn: its header, plot area and legend.
type svgChart struct {
	b             strings.Builder
	width, height float64
	// The plot area.
	left, right, top, bottom float64
	legend                   []legendEntry
	legendX, legendY         []float64 // each entry's position, set by layout
}

// legendEntry is one line of a legend.
type legendEntry struct {
	name, colour string
	dashed       bool // a grpc-go policy, or the target line
	target       bool
}

// swatchW is the legend's sample line or box, with the gap after it.
const swatchW = 26

// layout sizes a chart: width at least minWidth, a header for title and
// reading, a plot area innerH tall below it, and under the plot (after
// room for the axis labels) the legend in as many columns as fit, each as
// wide as its longest name.
func (c *svgChart) layout(title, reading string, minWidth, left float64) (titleLines, readingLines []string) {
	c.width = math.Max(plotW, minWidth)
	// Policies in a grid of equal columns; the target's line, which
	// explains itself at more length, on a row of its own below them.
	colW := 0.0
	for _, e := range c.legend {
		w := swatchW + textWidth(e.name, textSize, false) + 18
		if !e.target {
			colW = math.Max(colW, w)
		}
		c.width = math.Max(c.width, w+24)
	}
	titleLines = wrapText(title, c.width-24, titleSize, true)
	readingLines = wrapText(reading, c.width-24, readingSize, false)
	c.left, c.right = left, c.width-marginR
	c.top = 12 + float64(len(titleLines))*18 + float64(len(readingLines))*15 + 14
	c.bottom = c.top + innerH
	c.height = c.bottom + 44
	if len(c.legend) == 0 {
		return titleLines, readingLines
	}
	cols := 1
	if colW > 0 {
		cols = max(1, int((c.width-24)/colW))
	}
	row, col := 0, 0
	for _, e := range c.legend {
		if e.target && col > 0 {
			row, col = row+1, 0
		}
		c.legendX = append(c.legendX, 12+float64(col)*colW)
		c.legendY = append(c.legendY, c.height+float64(row)*legendLine)
		if col++; col == cols || e.target {
			row, col = row+1, 0
		}
	}
	if col > 0 {
		row++
	}
	c.height += float64(row)*legendLine + 8
	return titleLines, readingLines
}

// open writes the SVG element and the title and reading lines.
func (c *svgChart) open(title string, titleLines, readingLines []string) {
	fmt.Fprintf(&c.b, `<svg width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" role="img" font-family="system-ui,sans-serif"><title>%s</title>`,
		c.width, c.height, c.width, c.height, esc(title))
	y := 12.0
	for _, l := range titleLines {
		y += 18
		fmt.Fprintf(&c.b, `<text class="chart-title" x="12" y="%.0f" font-size="%d" font-weight="bold">%s</text>`, y-4, titleSize, esc(l))
	}
	for _, l := range readingLines {
		y += 15
		fmt.Fprintf(&c.b, `<text class="reading" x="12" y="%.0f" font-size="%d" fill="#555">%s</text>`, y, readingSize, esc(l))
	}
}

// close draws the legend and ends the SVG.
func (c *svgChart) close(boxes bool) string {
	for i, e := range c.legend {
		x, y := c.legendX[i], c.legendY[i]
		fmt.Fprintf(&c.b, `<g class="legend-entry" data-policy="%s" data-colour="%s">`, esc(e.name), e.colour)
		switch {
		case boxes && !e.target:
			fill, opacity := e.colour, 1.0
			if e.dashed {
				opacity = lightOpacity
			}
			fmt.Fprintf(&c.b, `<rect x="%.1f" y="%.1f" width="16" height="10" fill="%s" fill-opacity="%.2f" stroke="%s" stroke-width="1.5"/>`, x+2, y, fill, opacity, e.colour)
		default:
			fmt.Fprintf(&c.b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="2.5"%s/>`, x, y+5, x+20, y+5, e.colour, dash(e.dashed))
		}
		fmt.Fprintf(&c.b, `<text x="%.1f" y="%.1f" font-size="%d">%s</text>`, x+swatchW, y+9, textSize, esc(e.name))
		c.b.WriteString(`</g>`)
	}
	c.b.WriteString(`</svg>`)
	return c.b.String()
}

// axes draws the plot area's left and bottom edges and their labels.
func (c *svgChart) axes(xLabel, yLabel string) {
	fmt.Fprintf(&c.b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#333"/>`, c.left, c.bottom, c.right, c.bottom)
	fmt.Fprintf(&c.b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#333"/>`, c.left, c.top, c.left, c.bottom)
	fmt.Fprintf(&c.b, `<text x="%.1f" y="%.1f" font-size="12" text-anchor="middle">%s</text>`, (c.left+c.right)/2, c.bottom+34, esc(xLabel))
	if yLabel != "" {
		my := (c.top + c.bottom) / 2
		fmt.Fprintf(&c.b, `<text x="14" y="%.1f" font-size="12" text-anchor="middle" transform="rotate(-90 14 %.1f)">%s</text>`, my, my, esc(yLabel))
	}
}

func (c chart) entries(order []string, st styles) []legendEntry {
	var out []legendEntry
	for _, p := range c.policies(order) {
		out = append(out, legendEntry{name: p, colour: st[p], dashed: builtin(p)})
	}
	if len(c.Target) > 0 && c.TargetLabel != "" {
		out = append(out, legendEntry{name: c.TargetLabel, colour: targetColour, dashed: true, target: true})
	}
	return out
}

// lightOpacity fills grpc-go's bars: light, with an outline in full colour.
const lightOpacity = 0.4

// targetColour draws the good value's line: dark, but not a policy's.
const targetColour = "#555555"

func dash(dashed bool) string {
	if dashed {
		return ` stroke-dasharray="6 3"`
	}
	return ""
}

// svg draws the chart, or returns "" if it has nothing to show.
func (c chart) svg(order []string, st styles) string {
	switch c.Kind {
	case latencyCDF:
		return c.cdfSVG(order, st)
	case backendShares:
		return c.sharesSVG(order, st)
	case policyValues:
		return c.valuesSVG(order, st)
	}
	return ""
}

// cdfSVG plots each policy's latency distribution: a logarithmic time axis,
// where a tail a hundred times the median still fits beside it, against a
// "nines" axis (0.9, 0.99, 0.999), where the tail a user feels takes as
// much room as the median.
func (c chart) cdfSVG(order []string, st styles) string {
	ps := c.policies(order)
	lo, hi := math.Inf(1), 0.0
	for _, p := range ps {
		lat := c.Latencies[p]
		lo = math.Min(lo, ms(lat[0]))
		hi = math.Max(hi, ms(lat[len(lat)-1]))
	}
	if hi == 0 {
		return ""
	}
	lo = math.Max(lo, 0.1)
	llo, lhi := math.Log10(lo), math.Log10(math.Max(hi, lo*10))
	g := &svgChart{legend: c.entries(order, st)}
	tl, rl := g.layout(c.Title, c.Reading, 0, marginL)
	x := func(v float64) float64 {
		return g.left + (math.Log10(math.Max(v, lo))-llo)/(lhi-llo)*(g.right-g.left)
	}
	const nines = 3.0 // the axis tops out at 0.999
	y := func(q float64) float64 {
		v := nines
		if q < 1 {
			v = math.Min(-math.Log10(1-q), nines)
		}
		return g.bottom - v/nines*(g.bottom-g.top)
	}
	g.open(c.Title, tl, rl)
	g.axes("latency (ms, log scale)", "share of calls at or below")
	for dec := math.Floor(llo); dec <= math.Ceil(lhi); dec++ {
		for _, m := range []float64{1, 2, 5} {
			v := m * math.Pow(10, dec)
			if v < lo || v > math.Pow(10, lhi) {
				continue
			}
			fmt.Fprintf(&g.b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#eee"/><text x="%.1f" y="%.1f" font-size="%d" text-anchor="middle">%g</text>`,
				x(v), g.top, x(v), g.bottom, x(v), g.bottom+14, textSize, v)
		}
	}
	for _, q := range []float64{0, 0.5, 0.9, 0.99, 0.999} {
		fmt.Fprintf(&g.b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#f2f2f2"/><text x="%.1f" y="%.1f" font-size="%d" text-anchor="end">%g</text>`,
			g.left, y(q), g.right, y(q), g.left-4, y(q)+4, textSize, q)
	}
	for _, p := range ps {
		lat := c.Latencies[p]
		var pts []string
		// Evenly spaced in the nines, so the tail gets as many points as
		// the body.
		for _, j := range ninesIndexes(len(lat)) {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(ms(lat[j])), y(float64(j+1)/float64(len(lat)))))
		}
		pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(ms(lat[len(lat)-1])), y(1)))
		fmt.Fprintf(&g.b, `<polyline fill="none" stroke="%s" stroke-width="2"%s points="%s"><title>%s</title></polyline>`,
			st[p], dash(builtin(p)), strings.Join(pts, " "), esc(p))
	}
	return g.close(false)
}

// niceTop rounds v up to a round axis top and gives the step between its
// ticks: 1, 2 or 5 times a power of ten, four or five ticks.
func niceTop(v float64) (top, step float64) {
	if v <= 0 {
		return 1, 0.25
	}
	for _, m := range []float64{1, 2, 5} {
		step = m * math.Pow(10, math.Floor(math.Log10(v/5)))
		if math.Ceil(v/step) <= 5 {
			return math.Ceil(v/step) * step, step
		}
	}
	step = 10 * math.Pow(10, math.Floor(math.Log10(v/5)))
	return math.Ceil(v/step) * step, step
}

// pctLabel formats an axis tick: as many decimals as its step needs.
func pctLabel(v, step float64) string {
	if step >= 0.01 {
		return fmt.Sprintf("%.0f%%", 100*v)
	}
	return fmt.Sprintf("%.1f%%", 100*v)
}

// target is the chart's good value for backend or bar i, and whether it
// has one.
func (c chart) target(i int) (float64, bool) {
	switch {
	case len(c.Target) == 0:
		return 0, false
	case len(c.Target) == 1:
		return c.Target[0], true
	case i < len(c.Target):
		return c.Target[i], true
	}
	return 0, false
}

// sharesSVG draws, per backend, one bar per policy: its share of calls.
func (c chart) sharesSVG(order []string, st styles) string {
	ps := c.policies(order)
	top := 0.0
	for _, p := range ps {
		for _, v := range c.Shares[p] {
			top = math.Max(top, v)
		}
	}
	for _, t := range c.Target {
		top = math.Max(top, t)
	}
	if top == 0 || len(c.Backends) == 0 || len(ps) == 0 {
		return ""
	}
	top, step := niceTop(top)
	g := &svgChart{legend: c.entries(order, st)}
	// Bars at least minBarW wide: many backends and policies widen the
	// chart rather than thin the bars out of sight.
	const minBarW = 5.0
	tl, rl := g.layout(c.Title, c.Reading, marginL+marginR+float64(len(c.Backends)*len(ps))*minBarW/0.8, marginL)
	groupW := (g.right - g.left) / float64(len(c.Backends))
	barW := groupW * 0.8 / float64(len(ps))
	y := func(v float64) float64 { return g.bottom - v/top*(g.bottom-g.top) }
	g.open(c.Title, tl, rl)
	g.axes("backend", "share of calls")
	for v := 0.0; v <= top+step/2; v += step {
		fmt.Fprintf(&g.b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#f0f0f0"/><text x="%.1f" y="%.1f" font-size="%d" text-anchor="end">%s</text>`,
			g.left, y(v), g.right, y(v), g.left-4, y(v)+4, textSize, pctLabel(v, step))
	}
	for gi, backend := range c.Backends {
		gx := g.left + float64(gi)*groupW
		fmt.Fprintf(&g.b, `<text x="%.1f" y="%.1f" font-size="%d" text-anchor="middle">%s</text>`, gx+groupW/2, g.bottom+14, textSize, esc(shortName(backend)))
		for i, p := range ps {
			sh := c.Shares[p]
			if gi >= len(sh) {
				continue
			}
			opacity := 1.0
			if builtin(p) {
				opacity = lightOpacity
			}
			fmt.Fprintf(&g.b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s" fill-opacity="%.2f" stroke="%s" stroke-width="1"><title>%s, %s: %.1f%%</title></rect>`,
				gx+groupW*0.1+float64(i)*barW, y(sh[gi]), barW, y(0)-y(sh[gi]), st[p], opacity, st[p], esc(p), esc(backend), 100*sh[gi])
		}
	}
	// The targets over the bars, so that the bars can be read against them.
	for gi := range c.Backends {
		if t, ok := c.target(gi); ok {
			gx := g.left + float64(gi)*groupW
			x1, x2 := gx+groupW*0.04, gx+groupW*0.96
			if len(c.Target) == 1 {
				x1, x2 = gx, gx+groupW
			}
			fmt.Fprintf(&g.b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="1.5" stroke-dasharray="6 3"/>`, x1, y(t), x2, y(t), targetColour)
		}
	}
	return g.close(true)
}

// valuesSVG draws one horizontal bar per policy, named on the left, its
// value at its end.
func (c chart) valuesSVG(order []string, st styles) string {
	ps := c.policies(order)
	if len(ps) == 0 {
		return ""
	}
	top, nameW := 0.0, 0.0
	for _, p := range ps {
		top = math.Max(top, c.Values[p])
		nameW = math.Max(nameW, textWidth(p, textSize, false))
	}
	if t, ok := c.target(0); ok {
		top = math.Max(top, t)
	}
	top, step := niceTop(top)
	format := func(v float64) string {
		if c.Percent {
			return sim.Pct(v)
		}
		return fmt.Sprintf("%.3g", v)
	}
	const rowH, valueW = 22, 48
	left := nameW + 18
	g := &svgChart{}
	if _, ok := c.target(0); ok && c.TargetLabel != "" {
		g.legend = []legendEntry{{name: c.TargetLabel, colour: targetColour, dashed: true, target: true}}
	}
	// The bars need room of their own beside the names.
	tl, rl := g.layout(c.Title, c.Reading, left+200+valueW+marginR, left)
	g.right -= valueW
	// The plot is as tall as its bars.
	shift := innerH - float64(len(ps))*rowH - 8
	g.bottom -= shift
	g.height -= shift
	for i := range g.legendY {
		g.legendY[i] -= shift
	}
	x := func(v float64) float64 { return g.left + v/top*(g.right-g.left) }
	g.open(c.Title, tl, rl)
	g.axes(c.Axis, "")
	for v := 0.0; v <= top+step/2; v += step {
		label := fmt.Sprintf("%g", v)
		if c.Percent {
			label = pctLabel(v, step)
		}
		fmt.Fprintf(&g.b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#f0f0f0"/><text x="%.1f" y="%.1f" font-size="%d" text-anchor="middle">%s</text>`,
			x(v), g.top, x(v), g.bottom, x(v), g.bottom+14, textSize, label)
	}
	for i, p := range ps {
		v := c.Values[p]
		ry := g.top + 4 + float64(i)*rowH
		opacity := 1.0
		if builtin(p) {
			opacity = lightOpacity
		}
		fmt.Fprintf(&g.b, `<g class="bar-label" data-policy="%s" data-colour="%s"><text x="%.1f" y="%.1f" font-size="%d" text-anchor="end">%s</text></g>`,
			esc(p), st[p], g.left-6, ry+rowH/2+1, textSize, esc(p))
		fmt.Fprintf(&g.b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%d" fill="%s" fill-opacity="%.2f" stroke="%s" stroke-width="1.5"><title>%s: %s</title></rect>`,
			g.left, ry+2, math.Max(x(v)-g.left, 0.5), rowH-6, st[p], opacity, st[p], esc(p), format(v))
		fmt.Fprintf(&g.b, `<text x="%.1f" y="%.1f" font-size="%d">%s</text>`, x(v)+4, ry+rowH/2+1, textSize, format(v))
	}
	if t, ok := c.target(0); ok {
		fmt.Fprintf(&g.b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="1.5" stroke-dasharray="6 3"/>`, x(t), g.top, x(t), g.bottom, targetColour)
	}
	return g.close(false)
}

func esc(s string) string { return template.HTMLEscapeString(s) }

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// shortName keeps bar labels legible: "backend-3" becomes "3".
func shortName(s string) string {
	if i := strings.LastIndexByte(s, '-'); i >= 0 {
		return s[i+1:]
	}
	return s
}

// ninesIndexes picks about 400 indexes into n sorted samples, spaced evenly
// on the nines axis.
func ninesIndexes(n int) []int {
	var out []int
	last := -1
	for k := 0; k <= 400; k++ {
		q := 1 - math.Pow(10, -3*float64(k)/400)
		j := min(int(q*float64(n)), n-1)
		if j != last {
			out = append(out, j)
			last = j
		}
	}
	return out
}
