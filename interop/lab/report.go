package main

import (
	"fmt"
	"html/template"
	"io"
	"math"
	"strings"
	"time"

	"github.com/pickwise/pickwise/sim"
)

// section is one scenario's part of the report: its table and, for
// real-gRPC scenarios, what the plots need.
type section struct {
	Name  string
	Table *sim.Table
	// Latencies are each policy's successful-call latencies, for the CDF.
	Latencies map[string][]time.Duration
	// Shares are each policy's per-backend shares of calls, in Backends
	// order, for the bars.
	Shares   map[string][]float64
	Backends []string
	// Order is the policies in column order.
	Order []string
}

// palette gives each policy a stable colour across plots.
var palette = []string{"#1b9e77", "#d95f02", "#7570b3", "#e7298a", "#66a61e", "#e6ab02", "#a6761d", "#666666"}

// writeReport writes one self-contained HTML page: no scripts, no external
// files, plots as inline SVG.
func writeReport(w io.Writer, title string, sections []section) error {
	type view struct {
		Name  string
		Text  string
		CDF   template.HTML
		Bars  template.HTML
		Notes []string
	}
	var views []view
	for _, s := range sections {
		v := view{Name: s.Name, Text: s.Table.String()}
		if len(s.Latencies) > 0 {
			v.CDF = template.HTML(cdfSVG(s))
		}
		if len(s.Shares) > 0 {
			v.Bars = template.HTML(barsSVG(s))
		}
		views = append(views, v)
	}
	return reportTemplate.Execute(w, struct {
		Title    string
		Sections []view
		Made     string
	}{title, views, time.Now().UTC().Format(time.RFC3339)})
}

var reportTemplate = template.Must(template.New("report").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{{.Title}}</title>
<style>
body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}
pre{background:#f6f6f6;padding:1em;overflow-x:auto;font-size:13px}
h2{border-bottom:1px solid #ddd;padding-bottom:.2em;margin-top:2em}
.plots{display:flex;flex-wrap:wrap;gap:1em}
svg{background:#fff;border:1px solid #eee}
</style></head><body>
<h1>{{.Title}}</h1>
<p>Generated {{.Made}}.</p>
{{range .Sections}}<h2>{{.Name}}</h2>
<pre>{{.Text}}</pre>
<div class="plots">{{.CDF}}{{.Bars}}</div>
{{end}}</body></html>
`))

const (
	plotW, plotH = 520, 300
	marginL      = 55
	marginB      = 40
	marginT      = 20
	marginR      = 20
)

// cdfSVG plots each policy's latency distribution: a logarithmic time axis,
// where a tail a hundred times the median still fits beside it, against a
// "nines" axis (0.9, 0.99, 0.999), where the tail a user feels takes as
// much room as the median.
func cdfSVG(s section) string {
	lo, hi := math.Inf(1), 0.0
	for _, lat := range s.Latencies {
		if len(lat) == 0 {
			continue
		}
		lo = math.Min(lo, ms(lat[0]))
		hi = math.Max(hi, ms(lat[len(lat)-1]))
	}
	if hi == 0 {
		return ""
	}
	lo = math.Max(lo, 0.1)
	llo, lhi := math.Log10(lo), math.Log10(math.Max(hi, lo*10))
	x := func(v float64) float64 {
		return marginL + (math.Log10(math.Max(v, lo))-llo)/(lhi-llo)*(plotW-marginL-marginR)
	}
	const nines = 3.0 // the axis tops out at 0.999
	y := func(q float64) float64 {
		v := nines
		if q < 1 {
			v = math.Min(-math.Log10(1-q), nines)
		}
		return plotH - marginB - v/nines*(plotH-marginB-marginT)
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg width="%d" height="%d" viewBox="0 0 %d %d" role="img"><title>latency CDF</title>`, plotW, plotH, plotW, plotH)
	axes(&b, "latency (ms, log scale)", "share of calls at or below")
	for dec := math.Floor(llo); dec <= math.Ceil(lhi); dec++ {
		for _, m := range []float64{1, 2, 5} {
			v := m * math.Pow(10, dec)
			if v < lo || v > math.Pow(10, lhi) {
				continue
			}
			fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#eee"/><text x="%.1f" y="%d" font-size="11" text-anchor="middle">%g</text>`,
				x(v), marginT, x(v), plotH-marginB, x(v), plotH-marginB+14, v)
		}
	}
	for _, q := range []float64{0, 0.5, 0.9, 0.99, 0.999} {
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" font-size="11" text-anchor="end">%g</text>`, marginL-4, y(q)+4, q)
	}
	for i, name := range s.Order {
		lat := s.Latencies[name]
		if len(lat) == 0 {
			continue
		}
		var pts []string
		// Evenly spaced in the nines, so the tail gets as many points as
		// the body.
		for _, j := range ninesIndexes(len(lat)) {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(ms(lat[j])), y(float64(j+1)/float64(len(lat)))))
		}
		pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(ms(lat[len(lat)-1])), y(1)))
		c := palette[i%len(palette)]
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>`, c, strings.Join(pts, " "))
		// Bottom right: the curves rise from the bottom left and flatten
		// along the top.
		legendAt(&b, plotW-170, plotH-marginB-10-14*(len(s.Order)-i), name, c)
	}
	b.WriteString(`</svg>`)
	return b.String()
}

// barsSVG draws, per backend, one bar per policy: its share of calls.
func barsSVG(s section) string {
	top := 0.0
	for _, sh := range s.Shares {
		for _, v := range sh {
			top = math.Max(top, v)
		}
	}
	if top == 0 || len(s.Backends) == 0 {
		return ""
	}
	top = math.Ceil(top*10) / 10
	groupW := float64(plotW-marginL-marginR) / float64(len(s.Backends))
	barW := groupW * 0.8 / float64(len(s.Order))
	// The legend gets a band of its own above the bars, which would
	// otherwise hide under it.
	barsTop := marginT + 14*len(s.Order)
	y := func(v float64) float64 { return float64(plotH-marginB) - v/top*float64(plotH-marginB-barsTop) }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg width="%d" height="%d" viewBox="0 0 %d %d" role="img"><title>share of calls per backend</title>`, plotW, plotH, plotW, plotH)
	axes(&b, "backend", "share of calls")
	for _, v := range []float64{0, top / 2, top} {
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" font-size="11" text-anchor="end">%.0f%%</text>`, marginL-4, y(v)+4, 100*v)
	}
	for g, backend := range s.Backends {
		gx := marginL + float64(g)*groupW
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" font-size="10" text-anchor="middle">%s</text>`, gx+groupW/2, plotH-marginB+14, template.HTMLEscapeString(shortName(backend)))
		for i, name := range s.Order {
			sh := s.Shares[name]
			if g >= len(sh) {
				continue
			}
			fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"><title>%s %s: %.1f%%</title></rect>`,
				gx+groupW*0.1+float64(i)*barW, y(sh[g]), barW, y(0)-y(sh[g]), palette[i%len(palette)],
				template.HTMLEscapeString(name), template.HTMLEscapeString(backend), 100*sh[g])
		}
	}
	for i, name := range s.Order {
		legendAt(&b, marginL+10, 4+i*14, name, palette[i%len(palette)])
	}
	b.WriteString(`</svg>`)
	return b.String()
}

func axes(b *strings.Builder, xLabel, yLabel string) {
	fmt.Fprintf(b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#333"/>`, marginL, plotH-marginB, plotW-marginR, plotH-marginB)
	fmt.Fprintf(b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#333"/>`, marginL, marginT, marginL, plotH-marginB)
	fmt.Fprintf(b, `<text x="%d" y="%d" font-size="12" text-anchor="middle">%s</text>`, (plotW+marginL)/2, plotH-6, xLabel)
	fmt.Fprintf(b, `<text x="12" y="%d" font-size="12" text-anchor="middle" transform="rotate(-90 12 %d)">%s</text>`, plotH/2, plotH/2, yLabel)
}

func legendAt(b *strings.Builder, x, y int, name, colour string) {
	fmt.Fprintf(b, `<rect x="%d" y="%d" width="10" height="10" fill="%s"/><text x="%d" y="%d" font-size="11">%s</text>`,
		x, y, colour, x+14, y+9, template.HTMLEscapeString(name))
}

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
