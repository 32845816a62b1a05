package main

import (
	"bytes"
	"context"
	"fmt"
	"html"
	"io"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pickwise/pickwise/sim"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// TestLabScenarios runs every real-gRPC scenario but drain (TestDrain) at
// a quarter of its size against a loopback fleet and checks each produced
// its table, plots and the direction of its headline result.
func TestLabScenarios(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	fleet, err := startFleet(12)
	if err != nil {
		t.Fatal(err)
	}
	defer fleet.close()
	l := &lab{fleet: fleet, progress: &progress{w: io.Discard}, scale: testScale(), seed: 1}
	// drain has a test of its own, TestDrain.
	scenarios := slices.DeleteFunc(slices.Clone(labScenarios), func(s labScenario) bool { return s.name == "drain" })
	if testing.Short() {
		// The scenarios run only the columns checked below.
		l.only = map[string][]string{
			"black-hole":           {"pickwise_p2c", "pickwise_peak_ewma", "pickwise_orca_wrr", "weighted_round_robin"},
			"transient-failure":    {"pickwise_p2c"},
			"flapping-backend":     {"round_robin", "pickwise_p2c", "pickwise_peak_ewma"},
			"retry-storm":          {"pickwise_p2c + attempts", "pickwise_ring_hash + attempts"},
			"slow-backend":         {"pickwise_peak_ewma"},
			"hardware-generations": {"pickwise_orca_wrr", "weighted_round_robin"},
			"hash-black-hole":      {"pickwise_ring_hash", "pickwise_ring_hash (maglev, bounded 1.25)"},
			"flapping-cache":       {"pickwise_ring_hash (no hold)", "pickwise_ring_hash (hold 6s, ramp 2s)"},
			"rollout":              {"shadow, sampleRate 1", "pickwise_p2c"},
			"warm-rejoin":          {"pickwise_p2c", "pickwise_p2c (timeOnly)"},
		}
	}
	// Every scale runs noisy-neighbours' checked columns only, whose
	// columns are timed, seconds each at any scale: pickwise_prequal and
	// the best of grpc-go's and of the other pickwise policies by p99 in
	// the lab's full run (docs/lab-and-simulator.md). A column run while the
	// machine was too busy to keep the lab's timers runs again, twice at
	// most. The race detector's run checks what does not depend on the
	// machine's speed, so pickwise_prequal's column alone.
	if l.only == nil {
		l.only = map[string][]string{}
	}
	l.only["noisy-neighbours"] = []string{"least_request", "pickwise_peak_ewma", "pickwise_prequal"}
	l.calm, l.calmRetries = nnCalm, 2
	if raceEnabled {
		l.only["noisy-neighbours"] = []string{"pickwise_prequal"}
		l.calmRetries = 0
	}
	// Under -short, three scenarios run beside the others, one after the
	// other on a fleet of their own: flapping-backend, whose phases are
	// timed (8 s a column at any scale, for two flaps), and black-hole and
	// hardware-generations. All three send light open-loop traffic at a
	// fixed rate, and what they check is calls counted (shares and
	// errors), which a slower machine does not move. The full run keeps
	// every scenario to itself, and so does the race detector's, under
	// which the traffic is no longer light: every call costs several times
	// the CPU, and the scenarios beside would be part of what warm-rejoin's
	// latencies measure.
	runs := make([]labRun, len(scenarios))
	// noisy-neighbours runs last, alone, at every scale: its traffic takes
	// a good part of a core, and beside the scenarios that run aside, or
	// the hash scenarios' closed loops, the lab's one process runs out of
	// CPU, every backend's timers fire late, and the fleet, at 70% of its
	// capacity, queues whatever the policy.
	const last = "noisy-neighbours"
	aside := map[string]bool{last: true}
	var wg sync.WaitGroup
	if testing.Short() && !raceEnabled {
		var idx []int
		need := 0
		for i, s := range scenarios {
			if slices.Contains([]string{"flapping-backend", "black-hole", "hardware-generations"}, s.name) {
				idx = append(idx, i)
				aside[s.name] = true
				need = max(need, s.backends)
			}
		}
		own, err := startFleet(need)
		if err != nil {
			t.Fatal(err)
		}
		defer own.close()
		lo := &lab{fleet: own, progress: l.progress, scale: l.scale, seed: l.seed, only: l.only}
		wg.Go(func() {
			for _, i := range idx {
				if runs[i].sec, runs[i].err = scenarios[i].run(ctx, lo); runs[i].err != nil {
					return
				}
			}
		})
		// Before their fleet closes, if the test ends early.
		defer func() {
			cancel()
			wg.Wait()
		}()
	}
	for i, s := range scenarios {
		if aside[s.name] {
			continue
		}
		if runs[i].sec, runs[i].err = s.run(ctx, l); runs[i].err != nil {
			t.Fatalf("%s: %v", s.name, runs[i].err)
		}
	}
	wg.Wait()
	i := slices.IndexFunc(scenarios, func(s labScenario) bool { return s.name == last })
	if runs[i].sec, runs[i].err = scenarios[i].run(ctx, l); runs[i].err != nil {
		t.Fatalf("%s: %v", last, runs[i].err)
	}
	var sections []section
	for i, s := range scenarios {
		sec, err := runs[i].sec, runs[i].err
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		t.Log("\n" + sec.Table.String())
		if len(sec.Table.Rows) == 0 {
			t.Errorf("%s: empty table", s.name)
		}
		sections = append(sections, sec)
	}

	// The black hole's share under pickwise's policies is far below round
	// robin's fair 10%: both make failures expensive. So it is under the
	// ORCA policies, whose weights charge its reported errors per second
	// as utilization.
	bh := named(t, sections, "black-hole").Table
	for _, p := range []string{"pickwise_p2c", "pickwise_peak_ewma", "pickwise_orca_wrr", "weighted_round_robin"} {
		if share := pct(t, cell(t, bh, 0, p)); share > 5 {
			t.Errorf("%s black-hole share %.1f%%, want below 5%%", p, share)
		}
	}
	// The evidence-weighted policies eject it within a few failures: the
	// five ejection needs and a probe or two. The quarter-scale run is 375
	// calls, where those few are about 2% (bound 3%); the -short run is 150,
	// where seven are 4.7%.
	bhCalls := float64(l.calls(1500))
	bound := 100 * max(0.03, 7/bhCalls)
	for _, p := range []string{"pickwise_p2c", "pickwise_peak_ewma"} {
		if share := pct(t, cell(t, bh, 0, p)); share > bound {
			t.Errorf("%s black-hole share %.1f%%, want below %.1f%% of %.0f calls", p, share, bound, bhCalls)
		}
	}
	// Two hardware generations: weights from the backends' reports give
	// each generation calls in proportion to its capacity, so both run at
	// 900/1080 = 83% of it (round robin: 75% and 125%). Rows 0 and 1 are
	// the new and old generation's load.
	hw := named(t, sections, "hardware-generations").Table
	for _, p := range []string{"pickwise_orca_wrr", "weighted_round_robin"} {
		for r, gen := range []string{"new", "old"} {
			if load := pct(t, cell(t, hw, r, p)); load < 73 || load > 93 {
				t.Errorf("%s: %s generation's load %.1f%%, want 83%% ± 10", p, gen, load)
			}
		}
	}
	// One slow backend of ten: pickwise_peak_ewma drops it after its first
	// slow answers, so it gets well under half its fair 10%.
	slow := named(t, sections, "slow-backend").Table
	if share := pct(t, cell(t, slow, 0, "pickwise_peak_ewma")); share > 5 {
		t.Errorf("pickwise_peak_ewma slow-backend share %.1f%%, want below 5%%", share)
	}

	// Warm rejoin: the four backends back from a blip answer as fast as
	// ever, which ends their ramp, and get their fair third back within
	// half a second (a ramp by time holds them near a tenth of their
	// weight, a share under 5%), so the other eight do not queue for the
	// rest of the run as they do under a ramp by time.
	wr := named(t, sections, "warm-rejoin").Table
	if s, ramped := pct(t, cell(t, wr, 1, "pickwise_p2c")), pct(t, cell(t, wr, 1, "pickwise_p2c (timeOnly)")); s < 25 || ramped > 15 {
		t.Errorf("warm-rejoin: returning backends' share after their first 0.5 s back %.1f%% (want >= 25%%), with timeOnly %.1f%% (want <= 15%%)", s, ramped)
	}
	if p99, ramped := cell(t, wr, 2, "pickwise_p2c"), cell(t, wr, 2, "pickwise_p2c (timeOnly)"); millis(t, p99) >= millis(t, ramped) {
		t.Errorf("warm-rejoin: p99 %s, with timeOnly %s; want the evidence's lower", p99, ramped)
	}

	checkNoisyNeighbours(t, named(t, sections, "noisy-neighbours").Table)

	// Rollout: the shadow's prediction moves load off the old generation,
	// as pickwise_p2c does live, while round_robin still places it evenly.
	ro := named(t, sections, "rollout").Table
	if placed, pred := pct(t, cell(t, ro, 1, "shadow, sampleRate 1")), pct(t, cell(t, ro, 2, "shadow, sampleRate 1")); pred >= placed {
		t.Errorf("rollout: predicted old-gen share %.1f%%, placed %.1f%%: the prediction does not see the slower backends", pred, placed)
	}
	if e, err := strconv.ParseFloat(cell(t, ro, 3, "shadow, sampleRate 1"), 64); err != nil || e > 5 {
		t.Errorf("rollout: prediction off p2c live by %q points, want <= 5", cell(t, ro, 3, "shadow, sampleRate 1"))
	}

	// Flapping cache node: with the hold, the node's keys move away once
	// and stay, where without it every flap moves them away and back.
	fc := named(t, sections, "flapping-cache").Table
	noHold, withHold := pct(t, cell(t, fc, 0, "pickwise_ring_hash (no hold)")), pct(t, cell(t, fc, 0, "pickwise_ring_hash (hold 6s, ramp 2s)"))
	if withHold*2 > noHold {
		t.Errorf("flapping cache: %.1f%% of keys moved with the hold, %.1f%% without: want under half", withHold, noHold)
	}

	// Hot key: both ring hashes send every call of a key to one backend,
	// so the backend with the hottest key (~15% of calls) carries well
	// above the mean (measured 2.4-2.8 times). Bounded load at 1.25 caps
	// in-flight calls per backend, so the busiest backend's calls stay
	// near 1.25 times the mean (measured 1.14; the slack covers the
	// quarter-scale run's 750 calls and the cap's rounding at 16 in
	// flight). Row 0 is max / mean, row 1 the keys always on one backend.
	hk := named(t, sections, "hot-key").Table
	var unbounded float64
	for _, p := range []string{"ring_hash", "pickwise_ring_hash"} {
		if k := pct(t, cell(t, hk, 1, p)); k != 100 {
			t.Errorf("%s: %.1f%% of keys always on one backend, want all", p, k)
		}
		unbounded = ratio(t, cell(t, hk, 0, p))
		if unbounded < 1.5 {
			t.Errorf("%s: busiest backend at %.2f times the mean, want > 1.5 with a hot key", p, unbounded)
		}
	}
	if b := ratio(t, cell(t, hk, 0, "pickwise_ring_hash (bounded 1.25)")); b > 1.5 || b >= unbounded {
		t.Errorf("pickwise_ring_hash (bounded 1.25): busiest backend at %.2f times the mean, want <= 1.5 and below the unbounded %.2f", b, unbounded)
	}
	// Remap storm: pickwise_ring_hash's ring moves only the keys the
	// newcomer takes (row 1: all moved keys went to it), which is exact
	// whatever the fleet's ports, and about its 1/11 of them (measured
	// 6-10% of 500 keys; ring_hash: 13-17%, modulo: 91%). How many keys
	// land on the newcomer's 128 arcs is a draw: the bound is 1/11 plus
	// four standard deviations of that many keys, plus 3 points for the
	// arcs' share itself (the -short run has 50 keys, where 11 moved once;
	// the quarter-scale run 125).
	rs := named(t, sections, "remap-storm").Table
	nKeys := float64(l.calls(500))
	moveBound := 100 * (1.0/11 + 4*math.Sqrt(1.0/11*10/11/nKeys) + 0.03)
	for _, p := range []string{"pickwise_ring_hash", "pickwise_ring_hash (bounded 1.25)"} {
		if m := pct(t, cell(t, rs, 0, p)); m > moveBound {
			t.Errorf("%s: %.1f%% of %.0f keys moved, want about 9%% (<= %.1f%%)", p, m, nKeys, moveBound)
		}
		// With no key moved (the newcomer's arcs hold none of the -short
		// run's 50 keys about one run in a hundred; a key whose endpoint
		// is still connecting waits for it rather than staying home), the
		// share that went to it is 0 of 0: nothing moved elsewhere.
		// From 125 keys up, none moving is a newcomer left without
		// traffic (its arcs miss all 125 keys once in 10^5 runs).
		moved := pct(t, cell(t, rs, 0, p))
		if moved == 0 && !testing.Short() {
			t.Errorf("%s: no key of %.0f moved to the newcomer, want about 9%%", p, nKeys)
		}
		if m := pct(t, cell(t, rs, 1, p)); m != 100 && moved > 0 {
			t.Errorf("%s: %.1f%% of the moved keys went to the newcomer, want all", p, m)
		}
	}

	// The failure model. One transient failure: backend-0 keeps most of
	// its 25% under pickwise_p2c in each of rows 1-3, the seconds after the
	// failure (the end-to-end tests hold it to 15%; the lab's margin is
	// for a loaded CI machine). Its calls find every backend idle, so its
	// choices are even but for the failure. pickwise_peak_ewma's column is not checked
	// here: at one caller its choices follow each backend's latency
	// average. A lone stall of the machine is forgiven, but two on one
	// backend within the decay time, which a CI machine running other
	// tests' packages beside this one can give, read as a slowdown and
	// cost that backend share for seconds, failure or not.
	// TestOneTransientFailure in internal/e2e holds it, with a second run.
	tf := named(t, sections, "transient-failure").Table
	for r := 1; r <= 3; r++ {
		if s := pct(t, cell(t, tf, r, "pickwise_p2c")); s < 12 {
			t.Errorf("pickwise_p2c: backend-0's share in second %d after one failure %.1f%%, want most of its 25%%", r, s)
		}
	}
	// Flapping: far fewer client-visible errors than round robin's, and
	// most of its share while it is healthy.
	fl := named(t, sections, "flapping-backend").Table
	rrErrs := pct(t, cell(t, fl, 2, "round_robin"))
	for _, p := range []string{"pickwise_p2c", "pickwise_peak_ewma"} {
		if e := pct(t, cell(t, fl, 2, p)); e > rrErrs/2 {
			t.Errorf("%s: %.1f%% of calls failed with a flapping backend, want under half round robin's %.1f%%", p, e, rrErrs)
		}
		if s := pct(t, cell(t, fl, 1, p)); s < 5 {
			t.Errorf("%s: flapping backend's share while healthy %.1f%%, want at least half its fair 10%%", p, s)
		}
	}
	// Hash black hole: pickwise_ring_hash moves the broken backend's keys
	// to their next candidate (<= 2% of calls fail; ring_hash fails all of
	// the broken backend's keys' calls) and gives them back.
	hb := named(t, sections, "hash-black-hole").Table
	for _, p := range []string{"pickwise_ring_hash", "pickwise_ring_hash (maglev, bounded 1.25)"} {
		if e := pct(t, cell(t, hb, 1, p)); e > 2 {
			t.Errorf("%s: %.1f%% of calls failed while a backend was broken, want <= 2%%", p, e)
		}
		if b := pct(t, cell(t, hb, 2, p)); b < 90 {
			t.Errorf("%s: %.1f%% of the healed backend's keys back, want >= 90%%", p, b)
		}
	}
	// Retry storm: with the attempts interceptor no call fails.
	rt := named(t, sections, "retry-storm").Table
	for _, p := range []string{"pickwise_p2c + attempts", "pickwise_ring_hash + attempts"} {
		if e := pct(t, cell(t, rt, 1, p)); e != 0 {
			t.Errorf("%s: %.1f%% of calls failed in the retry storm, want none", p, e)
		}
	}

	var buf bytes.Buffer
	if err := writeReport(&buf, "test", sections); err != nil {
		t.Fatal(err)
	}
	html := buf.String()
	for _, want := range []string{"<svg", "Latency of successful calls", "Share of calls per backend", "Calls that failed", "Keys that moved", "black-hole", "remap-storm"} {
		if !strings.Contains(html, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	checkReport(t, html, sections)
}

// labRun is a scenario's section, or why it has none.
type labRun struct {
	sec section
	err error
}

// syntheticSections are report sections shaped like the lab's, with the
// longest policy names it uses, no fleet needed.
func syntheticSections() []section {
	lat := func(base time.Duration, tail float64) []time.Duration {
		out := make([]time.Duration, 2000)
		for i := range out {
			q := float64(i) / float64(len(out))
			out[i] = base + time.Duration(float64(base)*tail*q*q*q)
		}
		return out
	}
	backends := make([]string, 10)
	for i := range backends {
		backends[i] = fmt.Sprint("backend-", i)
	}
	even := func(broken float64) []float64 {
		sh := make([]float64, len(backends))
		sh[0] = broken
		for i := 1; i < len(sh); i++ {
			sh[i] = (1 - broken) / float64(len(sh)-1)
		}
		return sh
	}
	loadAware := []string{"round_robin", "least_request", "pickwise_p2c", "pickwise_peak_ewma", "pickwise_orca_wrr", "weighted_round_robin"}
	table := func(title string, cols []string) *sim.Table {
		t := &sim.Table{Title: title, Columns: cols}
		cells := make([]string, len(cols))
		for i := range cells {
			cells[i] = fmt.Sprintf("%d.%d%%", i, i)
		}
		t.AddRow("share to the broken backend (fair: 10%)", cells...)
		t.AddRow("a row label long enough to need wrapping in a narrow table cell", cells...)
		t.AddNote("a note")
		return t
	}
	bh := section{Name: "black-hole", Order: loadAware, Table: table("Black hole", loadAware)}
	bhShares := chart{Kind: backendShares, Title: "Share of calls per backend", Reading: "backend-0 should get almost nothing",
		Shares: map[string][]float64{}, Backends: backends, Target: []float64{0.111}, TargetLabel: "goal"}
	bhErrors := chart{Kind: policyValues, Title: "Calls that failed", Reading: "shorter is better", Values: map[string]float64{}, Percent: true}
	for i, p := range loadAware {
		bhShares.Shares[p] = even(0.1 / float64(i+1))
		bhErrors.Values[p] = 0.1 / float64(i+1)
	}
	bh.Charts = []chart{bhShares, bhErrors}

	hwOrder := append(slices.Clone(loadAware), "pickwise_p2c (weights)")
	hw := section{Name: "hardware-generations", Order: hwOrder, Table: table("Hardware", hwOrder)}
	hwCDF := chart{Kind: latencyCDF, Title: "Latency of successful calls", Reading: "further left is faster", Latencies: map[string][]time.Duration{}}
	hwShares := chart{Kind: backendShares, Title: "Share of calls per backend", Reading: "best at the dashed marks",
		Shares: map[string][]float64{}, Backends: backends, Target: even(0.05), TargetLabel: "share by capacity"}
	for i, p := range hw.Order {
		hwCDF.Latencies[p] = lat(time.Duration(10+i)*time.Millisecond, float64(5*i+1))
		hwShares.Shares[p] = even(0.1 - 0.01*float64(i))
	}
	hw.Charts = []chart{hwShares, hwCDF}

	hashPolicies := []string{"round_robin", "ring_hash", "pickwise_ring_hash", "pickwise_ring_hash (maglev, bounded 1.25)"}
	hk := section{Name: "hot-key", Order: hashPolicies, Table: table("Hot key", hashPolicies)}
	hkShares := chart{Kind: backendShares, Title: "Share of calls per backend", Reading: "closer to the even share is better",
		Shares: map[string][]float64{}, Backends: backends, Target: []float64{0.1}, TargetLabel: "even share, 10.0%"}
	for i, p := range hashPolicies {
		hkShares.Shares[p] = even(0.3 / float64(i+1))
	}
	hk.Charts = []chart{hkShares}

	rm := section{Name: "remap-storm", Order: hashPolicies[1:], Table: table("Remap storm", hashPolicies[1:])}
	rm.Charts = []chart{{Kind: policyValues, Title: "Keys that moved", Reading: "shorter is better",
		Values: map[string]float64{"ring_hash": 0.16, "pickwise_ring_hash": 0.09, "pickwise_ring_hash (maglev, bounded 1.25)": 0.091}, Percent: true,
		Target: []float64{1.0 / 11}, TargetLabel: "ideal: 1/11"}}

	// A simulated scenario's table: many columns, no charts.
	var wide []string
	for i := range 12 {
		wide = append(wide, fmt.Sprintf("pickwise_orca_wrr (raw, reports only, variant %d)", i))
	}
	simSec := section{Name: "sim-wide", Table: table("Many columns", wide)}
	return []section{bh, hw, hk, rm, simSec}
}

// TestReportStructure checks a report built from synthetic sections: see
// checkReport.
func TestReportStructure(t *testing.T) {
	sections := syntheticSections()
	var buf bytes.Buffer
	if err := writeReport(&buf, "test", sections); err != nil {
		t.Fatal(err)
	}
	html := buf.String()
	if n := strings.Count(html, "<svg"); n != 6 {
		t.Errorf("%d charts, want 6", n)
	}
	checkReport(t, html, sections)
}

var (
	svgRE      = regexp.MustCompile(`(?s)<svg width="([0-9.]+)" height="([0-9.]+)".*?</svg>`)
	titleRE    = regexp.MustCompile(`<text class="chart-title"[^>]*>([^<]+)</text>`)
	readingRE  = regexp.MustCompile(`<text class="reading"[^>]*>([^<]+)</text>`)
	legendRE   = regexp.MustCompile(`<g class="legend-entry" data-policy="([^"]*)" data-colour="([^"]*)">(<line[^>]*stroke-dasharray|<rect[^>]*fill-opacity="0\.[0-8][0-9]"|)[^>]*>(?:<[^t][^>]*>)*<text x="([0-9.]+)" y="([0-9.]+)"[^>]*>([^<]*)</text></g>`)
	barLabelRE = regexp.MustCompile(`<g class="bar-label" data-policy="([^"]*)" data-colour="([^"]*)"><text x="([0-9.]+)"[^>]*text-anchor="end">([^<]*)</text></g>`)
	svgTextRE  = regexp.MustCompile(`<text x="([0-9.]+)"[^>]*>([^<]*)</text>`)
)

// checkReport checks the report's structure: every chart has a visible
// title and a reading line that fit its width; every policy has one colour
// on every chart, and no two policies share one; grpc-go's policies are
// dashed or light, ours solid; no legend entry or bar label runs past its
// chart's edge; every table is an HTML table with all its cells; and the
// page is self-contained.
func checkReport(t *testing.T, page string, sections []section) {
	t.Helper()
	if strings.Contains(page, "<script") || strings.Contains(page, "http://") || strings.Contains(page, "https://") {
		t.Error("report is not self-contained")
	}
	if strings.Contains(page, "<pre") {
		t.Error("report has a <pre> block; tables are HTML tables")
	}
	colourOf := map[string]string{}
	policyOf := map[string]string{}
	see := func(svgIndex int, policy, colour string) {
		if colour == targetColour {
			return
		}
		if c, ok := colourOf[policy]; ok && c != colour {
			t.Errorf("chart %d: %s drawn in %s, elsewhere in %s", svgIndex, policy, colour, c)
		}
		colourOf[policy] = colour
		if p, ok := policyOf[colour]; ok && p != policy {
			t.Errorf("chart %d: %s and %s share the colour %s", svgIndex, policy, p, colour)
		}
		policyOf[colour] = policy
	}
	svgs := svgRE.FindAllStringSubmatch(page, -1)
	if len(svgs) == 0 {
		t.Fatal("no charts")
	}
	for i, m := range svgs {
		svg := m[0]
		width, _ := strconv.ParseFloat(m[1], 64)
		titles, readings := titleRE.FindAllStringSubmatch(svg, -1), readingRE.FindAllStringSubmatch(svg, -1)
		if len(titles) == 0 || strings.TrimSpace(titles[0][1]) == "" {
			t.Errorf("chart %d has no visible title", i)
		}
		if len(readings) == 0 || strings.TrimSpace(readings[0][1]) == "" {
			t.Errorf("chart %d (%v) has no reading line", i, titles)
		}
		for _, l := range titles {
			if w := 12 + textWidth(html.UnescapeString(l[1]), titleSize, true); w > width {
				t.Errorf("chart %d: title line %q is about %.0f px wide, the chart %.0f", i, l[1], w, width)
			}
		}
		for _, l := range readings {
			if w := 12 + textWidth(html.UnescapeString(l[1]), readingSize, false); w > width {
				t.Errorf("chart %d: reading line %q is about %.0f px wide, the chart %.0f", i, l[1], w, width)
			}
		}
		type span struct{ from, to float64 } // a legend entry's swatch and text
		rows := map[string][]span{}
		for _, e := range legendRE.FindAllStringSubmatch(svg, -1) {
			name := html.UnescapeString(e[1])
			see(i, name, e[2])
			if e[2] != targetColour {
				if light := e[3] != ""; light != builtin(name) {
					t.Errorf("chart %d: %s drawn dashed or light: %v, want %v", i, name, light, builtin(name))
				}
			}
			x, _ := strconv.ParseFloat(e[4], 64)
			end := x + textWidth(html.UnescapeString(e[6]), textSize, false)
			if end > width {
				t.Errorf("chart %d: legend entry %q ends at about %.0f px, past the chart's %.0f", i, name, end, width)
			}
			rows[e[5]] = append(rows[e[5]], span{x - swatchW, end})
		}
		for _, row := range rows {
			slices.SortFunc(row, func(a, b span) int { return int(a.from - b.from) })
			for j := 1; j < len(row); j++ {
				if row[j-1].to > row[j].from {
					t.Errorf("chart %d: legend entries overlap: one ends at about %.0f px, the next starts at %.0f", i, row[j-1].to, row[j].from)
				}
			}
		}
		if !strings.Contains(svg, "legend-entry") && !strings.Contains(svg, "bar-label") {
			t.Errorf("chart %d (%v) names no policy", i, titles)
		}
		for _, e := range barLabelRE.FindAllStringSubmatch(svg, -1) {
			see(i, html.UnescapeString(e[1]), e[2])
			x, _ := strconv.ParseFloat(e[3], 64)
			if start := x - textWidth(html.UnescapeString(e[4]), textSize, false); start < 0 {
				t.Errorf("chart %d: bar label %q starts at about %.0f px, before the chart's edge", i, e[4], start)
			}
		}
		// Any other text that starts inside the chart and runs past it.
		for _, e := range svgTextRE.FindAllStringSubmatch(svg, -1) {
			x, _ := strconv.ParseFloat(e[1], 64)
			if strings.Contains(e[0], `text-anchor`) {
				continue
			}
			if end := x + textWidth(html.UnescapeString(e[2]), textSize, false); end > width {
				t.Errorf("chart %d: text %q ends at about %.0f px, past the chart's %.0f", i, e[2], end, width)
			}
		}
	}
	// Every charted policy was seen with its colour.
	for _, s := range sections {
		for _, c := range s.Charts {
			for _, p := range c.policies(s.Order) {
				if _, ok := colourOf[p]; !ok {
					t.Errorf("%s: %q is on a chart but in no legend or bar label", s.Name, p)
				}
			}
		}
	}
	tables := 0
	for _, s := range sections {
		if s.Table == nil {
			continue
		}
		tables += len(tableGroups(s.Table))
		for _, r := range s.Table.Rows {
			for _, c := range r.Cells {
				if !strings.Contains(page, "<td>"+html.EscapeString(c)+"</td>") {
					t.Errorf("%s: cell %q is not in a <td>", s.Name, c)
				}
			}
		}
	}
	if n := strings.Count(page, "<table>"); n != tables {
		t.Errorf("%d HTML tables, want %d", n, tables)
	}
}

// TestTableGroups checks that a table too wide for a 1000 px window is
// split into column groups that each fit, and one that fits is not.
func TestTableGroups(t *testing.T) {
	for _, s := range syntheticSections() {
		tb := s.Table
		gs := tableGroups(tb)
		next := 0
		for _, g := range gs {
			if g[0] != next || g[1] <= g[0] && len(tb.Columns) > 0 {
				t.Fatalf("%s: groups %v do not cover the columns in order", s.Name, gs)
			}
			next = g[1]
			w := labelMin
			for i := g[0]; i < g[1]; i++ {
				var cells []string
				for _, r := range tb.Rows {
					if i < len(r.Cells) {
						cells = append(cells, r.Cells[i])
					}
				}
				w += minColumnWidth(tb.Columns[i], cells)
			}
			if w > tableBudget && g[1]-g[0] > 1 {
				t.Errorf("%s: columns %v need about %.0f px, more than %d", s.Name, g, w, tableBudget)
			}
		}
		if next != len(tb.Columns) {
			t.Errorf("%s: groups %v miss columns", s.Name, gs)
		}
		if s.Name == "sim-wide" && len(gs) < 2 {
			t.Errorf("%s: %d columns in one group", s.Name, len(tb.Columns))
		}
		if s.Name == "black-hole" && len(gs) != 1 {
			t.Errorf("%s: split into %v", s.Name, gs)
		}
	}
}

func TestSimSections(t *testing.T) {
	secs, err := runSim("black-hole")
	if err != nil {
		t.Fatal(err)
	}
	if len(secs) != 1 || secs[0].Table == nil || len(secs[0].Table.Rows) == 0 {
		t.Fatalf("runSim(black-hole) = %+v", secs)
	}
}

func TestRunLabRejectsUnknownScenario(t *testing.T) {
	_, err := runLab(context.Background(), "no-such", "", 1, 1)
	if err == nil {
		t.Fatal("runLab accepted an unknown scenario")
	}
	// The error lists every scenario, the simulated-only ones too.
	for _, s := range sim.Scenarios() {
		if !strings.Contains(err.Error(), s.Name) {
			t.Errorf("runLab(no-such) = %v, does not name %s", err, s.Name)
		}
	}
	if _, err := runLab(context.Background(), "cold-start", "", 1, 1); err == nil || !strings.Contains(err.Error(), "-sim") {
		t.Errorf("runLab(cold-start) = %v, want a pointer to -sim", err)
	}
	_, err = runSim("no-such")
	if err == nil {
		t.Fatal("runSim accepted an unknown scenario")
	}
	for _, s := range sim.Scenarios() {
		if !strings.Contains(err.Error(), s.Name) {
			t.Errorf("runSim(no-such) = %v, does not name %s", err, s.Name)
		}
	}
}

// TestScenarioHelp checks that -scenario's and -target's usage are built
// from the scenario lists.
func TestScenarioHelp(t *testing.T) {
	help := scenarioHelp()
	for _, s := range sim.Scenarios() {
		if !strings.Contains(help, s.Name) {
			t.Errorf("scenario help %q lacks %s", help, s.Name)
		}
	}
	if slices.Contains(simOnly(), "black-hole") || !slices.Contains(simOnly(), "cold-start") {
		t.Errorf("simOnly() = %q", simOnly())
	}
	target := targetHelp()
	for _, s := range labScenarios {
		if want := fmt.Sprintf("%s %d", s.name, s.backends); !strings.Contains(target, want) {
			t.Errorf("target help %q lacks %q", target, want)
		}
	}
	if !strings.Contains(target, fmt.Sprint(backendsNeeded(labScenarios))) {
		t.Errorf("target help %q does not say how many servers all scenarios need", target)
	}
}

// TestTargetTooSmall: -target with fewer servers than any scenario needs
// fails before it dials them; with enough for some, the rest are skipped.
func TestTargetTooSmall(t *testing.T) {
	few := "127.0.0.1:1,127.0.0.1:2,127.0.0.1:3"
	if _, err := runLab(context.Background(), "", few, 1, 1); err == nil || !strings.Contains(err.Error(), "too few for any scenario") {
		t.Errorf("runLab with 3 servers = %v, want too few for any scenario", err)
	}
	if _, err := runLab(context.Background(), "black-hole", few, 1, 1); err == nil || !strings.Contains(err.Error(), "black-hole needs 10") {
		t.Errorf("runLab(black-hole) with 3 servers = %v, want black-hole needs 10", err)
	}
	if _, err := runLab(context.Background(), "", "127.0.0.1:1,127.0.0.1:1", 1, 1); err == nil || !strings.Contains(err.Error(), "twice") {
		t.Errorf("runLab with a server listed twice = %v", err)
	}
	got, err := runnable(labScenarios, 10, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range labScenarios {
		if ran := slices.ContainsFunc(got, func(g labScenario) bool { return g.name == s.name }); ran != (s.backends <= 10 && !s.local) {
			t.Errorf("with 10 servers, %s (needs %d, local %v) runs: %v", s.name, s.backends, s.local, ran)
		}
	}
	// A scenario that restarts servers runs only on the lab's own.
	if _, err := runLab(context.Background(), "drain", "127.0.0.1:1,127.0.0.1:2,127.0.0.1:3,127.0.0.1:4,127.0.0.1:5", 1, 1); err == nil || !strings.Contains(err.Error(), "without -target") {
		t.Errorf("runLab(drain) with -target = %v, want it refused", err)
	}
}

func TestCheckFlags(t *testing.T) {
	for _, c := range []struct {
		args  []string
		scale float64
		ok    bool
	}{
		{nil, 1, true},
		{nil, 0.25, true},
		{nil, 0, false},
		{nil, -1, false},
		{[]string{"black-hole"}, 1, false},
	} {
		if err := checkFlags(c.args, false, c.scale); (err == nil) != c.ok {
			t.Errorf("checkFlags(%q, scale %v) = %v, want ok: %v", c.args, c.scale, err, c.ok)
		}
	}
}

// named is the section of scenario name.
func named(t *testing.T, sections []section, name string) section {
	t.Helper()
	i := slices.IndexFunc(sections, func(s section) bool { return s.Name == name })
	if i < 0 {
		t.Fatalf("no section %q", name)
	}
	return sections[i]
}

// cell is table's cell in row and the column named column.
func cell(t *testing.T, table *sim.Table, row int, column string) string {
	t.Helper()
	j := slices.Index(table.Columns, column)
	if j < 0 || row >= len(table.Rows) || j >= len(table.Rows[row].Cells) {
		t.Fatalf("%q: no cell in row %d, column %q (columns %q)", table.Title, row, column, table.Columns)
	}
	return table.Rows[row].Cells[j]
}

func pct(t *testing.T, s string) float64 {
	t.Helper()
	var v float64
	if _, err := fmt.Sscanf(strings.TrimSuffix(s, "%"), "%g", &v); err != nil {
		t.Fatalf("not a percentage: %q", s)
	}
	return v
}

// millis parses a table's latency cell, such as "18ms".
func millis(t *testing.T, s string) float64 {
	t.Helper()
	var v float64
	if _, err := fmt.Sscanf(strings.TrimSuffix(s, "ms"), "%g", &v); err != nil {
		t.Fatalf("not a latency in ms: %q", s)
	}
	return v
}

// ratio parses a table's ratio cell, such as "1.25".
func ratio(t *testing.T, s string) float64 {
	t.Helper()
	var v float64
	if _, err := fmt.Sscanf(s, "%g", &v); err != nil {
		t.Fatalf("not a ratio: %q", s)
	}
	return v
}

// testScale is the share of each scenario's calls TestLabScenarios runs:
// a quarter, or a tenth under -short. Scenarios whose phases are timed keep
// their minimum durations either way (lab.seconds).
func testScale() float64 {
	if testing.Short() {
		return 0.1
	}
	return 0.25
}

// nnCalm is the timers' p99 lateness above which a noisy-neighbours
// column runs again, and is not checked if it stays so.
const nnCalm = 5 * time.Millisecond

// checkNoisyNeighbours checks the noisy-neighbours table (rows: p50, p99,
// p99.9, failed calls, calls on a slowed backend, probes per call, TCP
// connections per backend, timers' lateness).
func checkNoisyNeighbours(t *testing.T, nn *sim.Table) {
	t.Helper()
	// Probes go over the connections the calls use: every backend accepts
	// one per channel, under every policy.
	const pq = "pickwise_prequal"
	for _, c := range nn.Columns {
		if got, want := cell(t, nn, 6, c), fmt.Sprint(nnChannels); got != want {
			t.Errorf("noisy-neighbours: %s: each backend accepted %s TCP connections, want %s, one per channel", c, got, want)
		}
		probes, err := strconv.ParseFloat(cell(t, nn, 5, c), 64)
		if err != nil {
			t.Fatalf("noisy-neighbours: probes per call of %s: %v", c, err)
		}
		if c != pq && probes != 0 {
			t.Errorf("noisy-neighbours: %s sent %.2f load probes per call, want none", c, probes)
		}
		if c == pq && !(probes > 0 && probes <= 1) {
			t.Errorf("noisy-neighbours: %s sent %.2f load probes per call, want some and at most one", c, probes)
		}
	}
	if raceEnabled {
		return // its latencies are the race detector's
	}
	// A column run while the machine was too busy to keep timers measures
	// the machine: every backend's service is late, and the fleet queues.
	for _, c := range nn.Columns {
		if late := millis(t, cell(t, nn, 7, c)); late > float64(nnCalm/time.Millisecond) {
			t.Logf("noisy-neighbours: %s's timers fired up to %.1fms late (p99), over %v: the machine is too busy for its latencies to say anything; not checked", c, late, nnCalm)
			return
		}
	}
	p99 := func(col string) float64 { return millis(t, cell(t, nn, 1, col)) }
	failed := func(col string) int {
		n, err := strconv.Atoi(cell(t, nn, 3, col))
		if err != nil {
			t.Fatalf("noisy-neighbours: failed calls of %s: %v", col, err)
		}
		return n
	}
	// best is the column of cols with the lowest p99, of those that ran.
	best := func(cols ...string) string {
		b := ""
		for _, c := range cols {
			if slices.Contains(nn.Columns, c) && (b == "" || p99(c) < p99(b)) {
				b = c
			}
		}
		if b == "" {
			t.Fatalf("noisy-neighbours: none of %q ran", cols)
		}
		return b
	}
	builtin := best("round_robin", "least_request", "weighted_round_robin")
	other := best("pickwise_p2c", "pickwise_peak_ewma", "pickwise_orca_wrr")
	t.Logf("noisy-neighbours: %s p99 %.0fms, %.2fx %s's, %.2fx %s's", pq, p99(pq), p99(pq)/p99(builtin), builtin, p99(pq)/p99(other), other)
	if r := p99(pq) / p99(builtin); r > 0.5 {
		t.Errorf("noisy-neighbours: %s's p99 %.2fx %s's, want <= 0.5x", pq, r, builtin)
	}
	// The target is 0.7x; the bound leaves room for the other policy's
	// p99, which moves with the machine's load more than
	// pickwise_prequal's does.
	if r := p99(pq) / p99(other); r > 0.8 {
		t.Errorf("noisy-neighbours: %s's p99 %.2fx %s's, want <= 0.8x", pq, r, other)
	}
	if f := failed(pq); f > failed(builtin) || f > failed(other) {
		t.Errorf("noisy-neighbours: %s failed %d calls, %s %d, %s %d; want no more", pq, f, builtin, failed(builtin), other, failed(other))
	}
}
