package admin

import (
	"bufio"
	"html"
	"io"
	"strconv"
	"time"

	"github.com/pickwise/pickwise/internal/engine"
)

// The page is written by hand rather than through html/template: a fleet
// of ten thousand endpoints is a table of a hundred and fifty thousand
// cells, and only addresses, targets and configs need escaping.

// refreshRows is the table size above which the page refreshes every
// slowRefresh rather than every second: a browser takes a while to lay
// out a large table.
const (
	refreshRows = 2000
	slowRefresh = 5 * time.Second
)

func writeHTML(out io.Writer, p *page, fragment bool) {
	w := bufio.NewWriterSize(out, 64<<10)
	defer w.Flush()
	if !fragment {
		rows := 0
		for i := range p.Balancers {
			rows += len(p.Balancers[i].Endpoints)
		}
		every := time.Second
		if rows > refreshRows {
			every = slowRefresh
		}
		w.WriteString(head)
		w.WriteString(`<header><b>pickwise</b> balancers <span id=t>`)
		w.WriteString(p.Time.Format(time.TimeOnly))
		w.WriteString(`</span> <label><input type=checkbox id=live checked> refresh every `)
		w.WriteString(every.String())
		w.WriteString(`</label> <a href="?format=json">JSON</a></header><main id=m>`)
		defer func() {
			w.WriteString(`</main><script>const every=`)
			w.WriteString(strconv.FormatInt(every.Milliseconds(), 10))
			w.WriteString(";")
			w.WriteString(script)
			w.WriteString("</script></body></html>\n")
		}()
	}
	if len(p.Balancers) == 0 {
		w.WriteString(`<p class=none>No pickwise balancer is running in this process.</p>`)
	}
	for i := range p.Balancers {
		writeBalancer(w, &p.Balancers[i], p.Time)
	}
}

func writeBalancer(w *bufio.Writer, b *engine.BalancerInfo, now time.Time) {
	w.WriteString(`<section><h2>`)
	w.WriteString(html.EscapeString(b.Target))
	w.WriteString(` <span class=pol>`)
	w.WriteString(html.EscapeString(b.Policy))
	w.WriteString(`</span> <span class="st `)
	w.WriteString(b.State)
	w.WriteString(`">`)
	w.WriteString(b.State)
	w.WriteString(`</span></h2><p class=meta>membership <b>`)
	w.WriteString(b.Membership.Fingerprint)
	w.WriteString(`</b> revision `)
	w.WriteString(strconv.FormatUint(b.Membership.Revision, 10))
	w.WriteString(`, `)
	w.WriteString(strconv.Itoa(b.Membership.Endpoints))
	w.WriteString(` endpoints, changed `)
	w.WriteString(b.Membership.Changed.Format(time.TimeOnly))
	w.WriteString(` · config <b>`)
	w.WriteString(b.ConfigFingerprint)
	w.WriteString(`</b> · `)
	w.WriteString(strconv.FormatUint(b.Picks, 10))
	w.WriteString(` picks in the last `)
	w.WriteString(strconv.FormatFloat(b.ShareWindowSeconds, 'f', 1, 64))
	w.WriteString(` s`)
	if b.ShareFrom == "schedule" {
		w.WriteString(` (share: the schedule's)`)
	}
	if r := b.Retries; r[0]+r[1]+r[2] > 0 {
		w.WriteString(` · retried attempts since start: `)
		for i, n := range r {
			if i > 0 {
				w.WriteString(`, `)
			}
			w.WriteString([...]string{"2nd ", "3rd ", "4th+ "}[i])
			w.WriteString(strconv.FormatUint(n, 10))
		}
	}
	if b.Ejected > 0 {
		w.WriteString(` · <span class=bad>`)
		w.WriteString(strconv.Itoa(b.Ejected))
		w.WriteString(` ejected</span>`)
	}
	w.WriteString(`</p><details><summary>config</summary><pre>`)
	w.WriteString(html.EscapeString(string(b.Config)))
	w.WriteString(`</pre></details>`)

	// Columns no endpoint has a value for are left out, so that the table
	// fits a narrow window.
	var c columns
	c.now = now
	for i := range b.Endpoints {
		e := &b.Endpoints[i]
		c.scale = max(c.scale, e.Share, e.FairShare)
		c.reported = c.reported || e.ReportedWeight != nil
		c.cost = c.cost || e.Cost != nil
		c.ramp = c.ramp || e.Ramp != nil
		c.latency = c.latency || e.LatencyMs != nil
		c.load = c.load || e.Load != nil
	}
	w.WriteString(`<div class=wrap><table><thead><tr><th>endpoint<th>state<th>weight`)
	if c.reported {
		w.WriteString(`<th>reported`)
	}
	w.WriteString(`<th title="what placement follows: weight, slow start, failure avoidance">effective<th>in flight`)
	if c.cost {
		w.WriteString(`<th title="what the picker compares">cost`)
	}
	w.WriteString(`<th title="of recent outcomes (decayed counts)">failures<th title="share of picks that pass it over">avoid<th>ejection`)
	if c.ramp {
		w.WriteString(`<th>ramp`)
	}
	w.WriteString(`<th>picks<th class=share>share (bar) / fair share (mark)`)
	if c.latency {
		w.WriteString(`<th>latency`)
	}
	if c.load {
		w.WriteString(`<th title="the server's answer: requests in flight, latency, age">load`)
	}
	w.WriteString(`</tr></thead><tbody>`)
	for i := range b.Endpoints {
		writeEndpoint(w, &b.Endpoints[i], &c)
	}
	w.WriteString(`</tbody></table></div></section>`)
}

// columns are the optional columns a balancer's table has, and the
// share bars' scale.
type columns struct {
	now                                 time.Time
	scale                               float64
	reported, cost, ramp, latency, load bool
}

func writeEndpoint(w *bufio.Writer, e *engine.EndpointInfo, c *columns) {
	switch {
	case e.Ejected:
		w.WriteString(`<tr class=ej>`)
	case !e.InPicker:
		w.WriteString(`<tr class=out>`)
	default:
		w.WriteString(`<tr>`)
	}
	w.WriteString(`<td class=addr>`)
	w.WriteString(html.EscapeString(e.Address))
	w.WriteString(`<td>`)
	w.WriteString(e.State)
	w.WriteString(`<td>`)
	num(w, e.Weight, 2)
	if c.reported {
		w.WriteString(`<td>`)
		if e.ReportedWeight != nil {
			num(w, *e.ReportedWeight, 3)
			w.WriteString(` <small>`)
			w.WriteString(e.WeightStatus)
			w.WriteString(`</small>`)
		}
	}
	w.WriteString(`<td>`)
	num(w, e.EffectiveWeight, 3)
	w.WriteString(`<td>`)
	w.WriteString(strconv.FormatInt(e.InFlight, 10))
	if c.cost {
		w.WriteString(`<td>`)
		if e.Cost != nil {
			num(w, *e.Cost, 4)
		}
	}
	w.WriteString(`<td>`)
	pct(w, e.FailureRate)
	w.WriteString(` <small>of `)
	num(w, e.Outcomes, 0)
	w.WriteString(`</small><td>`)
	pct(w, e.Avoidance)
	w.WriteString(`<td class=ejection>`)
	if e.Ejected {
		w.WriteString(`<b class=bad>ejected</b>`)
		switch {
		case e.EjectedUntil != nil && e.EjectedUntil.After(c.now):
			w.WriteString(` until `)
			w.WriteString(e.EjectedUntil.Format(time.TimeOnly))
		default:
			w.WriteString(` <small>readmitted after good probes</small>`)
		}
		if e.Probing {
			w.WriteString(` · probing`)
		}
	}
	if c.ramp {
		w.WriteString(`<td>`)
		if e.Ramp != nil {
			pct(w, *e.Ramp)
			if e.RampEnds != nil {
				w.WriteString(` <small>to `)
				w.WriteString(e.RampEnds.Format(time.TimeOnly))
				w.WriteString(`</small>`)
			}
		}
	}
	w.WriteString(`<td>`)
	w.WriteString(strconv.FormatUint(e.Picks, 10))
	w.WriteString(`<td class=share><div class=bar><i style="width:`)
	num(w, bar(e.Share, c.scale), 1)
	w.WriteString(`%"></i>`)
	if e.FairShare > 0 {
		w.WriteString(`<b style="left:`)
		num(w, bar(e.FairShare, c.scale), 1)
		w.WriteString(`%"></b>`)
	}
	w.WriteString(`</div>`)
	pct(w, e.Share)
	w.WriteString(` / `)
	pct(w, e.FairShare)
	if c.latency {
		w.WriteString(`<td>`)
		if e.LatencyMs != nil {
			num(w, *e.LatencyMs, 2)
			w.WriteString(` ms`)
		}
	}
	if c.load {
		w.WriteString(`<td>`)
	}
	if l := e.Load; l != nil {
		w.WriteString(strconv.FormatUint(uint64(l.RIF), 10))
		w.WriteString(` · `)
		num(w, l.LatencyMs, 2)
		w.WriteString(` ms · `)
		num(w, l.AgeSeconds, 1)
		w.WriteString(` s`)
		if l.Local {
			w.WriteString(` <small>local</small>`)
		}
		if l.Pooled {
			w.WriteString(` <small>pooled</small>`)
		}
	}
	w.WriteString("</tr>\n")
}

// bar is v's bar length as a percentage of the widest, scale.
func bar(v, scale float64) float64 {
	if scale <= 0 {
		return 0
	}
	return 100 * v / scale
}

func num(w *bufio.Writer, v float64, prec int) {
	var buf [32]byte
	w.Write(strconv.AppendFloat(buf[:0], v, 'f', prec, 64))
}

func pct(w *bufio.Writer, v float64) {
	num(w, 100*v, 1)
	w.WriteByte('%')
}

const head = `<!doctype html><html lang=en><head><meta charset=utf-8><meta name=viewport content="width=device-width,initial-scale=1"><title>pickwise balancers</title><style>
body{font:13px/1.4 system-ui,sans-serif;margin:0;color:#1b1f24;background:#fff}
header{position:sticky;top:0;background:#f3f5f7;border-bottom:1px solid #d0d7de;padding:6px 12px;z-index:1}
header label,header a{margin-left:12px}
main{padding:0 12px 24px}
section{margin-top:16px}
h2{font-size:15px;margin:8px 0 2px;word-break:break-all}
.pol{font-weight:normal;color:#57606a}
.st{font-size:11px;padding:1px 6px;border-radius:8px;background:#dafbe1;color:#116329}
.st.TRANSIENT_FAILURE{background:#ffebe9;color:#a40e26}.st.CONNECTING,.st.IDLE{background:#fff8c5;color:#7d4e00}
.meta{margin:2px 0;color:#57606a}
details pre{background:#f6f8fa;padding:6px;overflow:auto;max-height:12em;margin:4px 0}
.wrap{overflow-x:auto}
table{border-collapse:collapse;width:100%;font-variant-numeric:tabular-nums}
th,td{padding:2px 6px;border-bottom:1px solid #eaeef2;text-align:right;white-space:nowrap}
th{background:#fff;font-weight:600;border-bottom:1px solid #d0d7de}
td.addr,th:first-child{text-align:left}
td.addr{font-family:ui-monospace,monospace}
td.share{text-align:left;min-width:220px}
td.ejection{white-space:normal;min-width:8em;text-align:left}
.bar{display:inline-block;position:relative;width:120px;height:10px;background:#eaeef2;margin-right:6px;vertical-align:middle}
.bar i{position:absolute;left:0;top:0;bottom:0;background:#0969da}
.bar b{position:absolute;top:-3px;bottom:-3px;width:2px;margin-left:-1px;background:#1b1f24}
tr.ej td{background:#ffebe9}tr.ej .bar i{background:#cf222e}
tr.out td{color:#8c959f}
.bad{color:#a40e26}
small{color:#57606a}
.none{color:#57606a;margin-top:16px}
@media (max-width:1100px){td,th{padding:2px 3px}.bar{width:70px}td.share{min-width:150px}}
</style></head><body>`

const script = `
const live=document.getElementById('live'),m=document.getElementById('m'),t=document.getElementById('t');
async function tick(){
  if(live.checked){
    try{
      const q=new URLSearchParams(location.search);q.set('fragment','1');
      const r=await fetch(location.pathname+'?'+q,{cache:'no-store'});
      if(r.ok){m.innerHTML=await r.text();m.dataset.refreshed=+(m.dataset.refreshed||0)+1;t.textContent=new Date().toLocaleTimeString();}
    }catch(e){t.textContent='not refreshed: '+e;}
  }
  setTimeout(tick,every);
}
setTimeout(tick,every);`
