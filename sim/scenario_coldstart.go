package sim

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"time"
)

func init() {
	register(Scenario{Name: "cold-start", Run: func(s Scale) (*Table, error) {
		r, err := ColdStart(s)
		if err != nil {
			return nil, err
		}
		return r.Table, nil
	}})
}

// ColdStartResult holds the cold-start scenario's numbers per policy, in
// column order.
type ColdStartResult struct {
	Policies []string
	// Share2s, Share10s and Share30s are the new backend's share of the
	// streams opened in the first 2 s, 10 s and 30 s after it joined (30 s
	// is the slow-start window).
	Share2s, Share10s, Share30s []float64
	// Newcomer is how many streams the new backend holds 10 s after it
	// joined; NewcomerP99 is the 99th-percentile first-message latency of
	// those streams, and FleetP99 of every stream opened in those 10 s.
	Newcomer              []int
	NewcomerP99, FleetP99 []time.Duration
	Table                 *Table
}

// Cold-start parameters.
const (
	coldOld        = 8   // backends at the start
	coldPerBackend = 400 // streams each holds when the 9th joins
	coldRate       = 150 // new streams per second, throughout
	// coldWorkers is how many streams a backend serves at once: with 400
	// streams on 100 workers, a first message waits for 4 service times.
	coldWorkers = 100
	// coldSpan is how long after the join new streams keep arriving.
	coldSpan = 30 * time.Second
)

// ColdStart: 8 backends each hold about 400 long-lived streams, opened at
// 150 per second from the start; then a 9th backend joins, cold (its first
// requests take 10 times longer, easing linearly over 30 s), and streams
// keep arriving. A stream's latency is its first message's: a 20 ms
// service time, times the cold factor, times max(1, streams/100) for a
// backend whose 100 workers share its streams (4 for a warm backend at 400).
//
// A full-scan least-connections balancer sees the newcomer's zero and sends
// it every new stream until it has caught up, 400 streams later (herding);
// two random choices give it a stream only when it is one of the two
// sampled, about 2/9 of them; slow start, on by default in pickwise's
// load-aware policies, holds it to its ramped share while it warms.
//
// The run is small (about 7,700 streams per policy), so both scales run it
// whole.
func ColdStart(Scale) (*ColdStartResult, error) {
	const n = coldOld + 1
	backends := make([]Backend, n)
	for i := range backends {
		backends[i] = Backend{Servers: coldWorkers, Service: LogNormal(20*time.Millisecond, 0.25)}
	}
	newcomer := n - 1
	backends[newcomer].ColdFor, backends[newcomer].ColdFactor = 30*time.Second, 10
	// The newcomer joins when, on average, the old backends hold 400
	// streams each.
	join := coldOld * coldPerBackend * time.Second / coldRate
	run := Run{
		Seed:     3,
		Backends: backends,
		Initial:  backendIDs(coldOld),
		Rate:     coldRate,
		Duration: join + coldSpan,
		// Streams outlive the run, so the old backends keep their load and
		// only new streams can even it out.
		StreamLife: func(*rand.Rand) time.Duration { return time.Hour },
		Changes:    []Change{{At: join, Backends: backendIDs(n)}},
	}
	policies := append(loadAwarePolicies(),
		GRPC("pickwise_p2c (no slow start)", "pickwise_p2c", `{"slowStart":{"enabled":false}}`),
		GRPC("pickwise_orca_wrr (no slow start)", "pickwise_orca_wrr", `{"slowStart":{"enabled":false}}`))
	out := &ColdStartResult{Policies: columns(policies)}
	for _, p := range policies {
		var opened2, opened10, opened30, to2, to10, to30 int
		var fleet, fresh []time.Duration
		r := run
		r.OnPick = func(now time.Duration, _ *Request, backend int, first time.Duration) {
			since := now - join
			if since < 0 {
				return
			}
			opened30++
			if backend == newcomer {
				to30++
			}
			if since >= 10*time.Second {
				return
			}
			opened10++
			fleet = append(fleet, first)
			if backend == newcomer {
				to10++
				fresh = append(fresh, first)
			}
			if since < 2*time.Second {
				opened2++
				if backend == newcomer {
					to2++
				}
			}
		}
		if _, err := r.Execute(p); err != nil {
			return nil, err
		}
		out.Share2s = append(out.Share2s, float64(to2)/float64(max(opened2, 1)))
		out.Share10s = append(out.Share10s, float64(to10)/float64(max(opened10, 1)))
		out.Share30s = append(out.Share30s, float64(to30)/float64(max(opened30, 1)))
		out.Newcomer = append(out.Newcomer, to10)
		out.NewcomerP99 = append(out.NewcomerP99, durationQuantile(fresh, 0.99))
		out.FleetP99 = append(out.FleetP99, durationQuantile(fleet, 0.99))
	}

	t := &Table{
		Title: fmt.Sprintf("Cold start: %d backends hold ~%d streams each; a 9th joins cold (10x slower, easing over 30 s); %d new streams/s",
			coldOld, coldPerBackend, coldRate),
		Columns: out.Policies,
	}
	share2, share10, share30 := make([]string, len(policies)), make([]string, len(policies)), make([]string, len(policies))
	held := make([]string, len(policies))
	p99, fleetP99 := make([]string, len(policies)), make([]string, len(policies))
	for i := range policies {
		share2[i], share10[i], share30[i] = Pct(out.Share2s[i]), Pct(out.Share10s[i]), Pct(out.Share30s[i])
		held[i] = fmt.Sprint(out.Newcomer[i])
		p99[i], fleetP99[i] = Ms(out.NewcomerP99[i]), Ms(out.FleetP99[i])
	}
	t.AddRow("newcomer's share of new streams, first 2 s (fair: 11%)", share2...)
	t.AddRow("newcomer's share of new streams, first 10 s", share10...)
	t.AddRow("newcomer's share of new streams, first 30 s", share30...)
	t.AddRow("streams on the newcomer after 10 s", held...)
	t.AddRow("newcomer's p99 first-message latency, first 10 s", p99...)
	t.AddRow("fleet's p99 first-message latency, first 10 s", fleetP99...)
	t.AddNote("latency: a stream's first message, 20 ms x cold factor x streams/100 workers; a warm backend with 400 streams answers in about 80 ms")
	t.AddNote("pickwise_p2c: slow start is on by default (window 30 s, 10% of the weight at first): the newcomer competes at its full weight but is passed over while it has taken its ramped share of the picks, 0.1/8.1 at first, earned draw by draw at the factor of the moment; with streams that outlive the run it is the cheapest candidate whenever it is drawn, so it takes that share and no more, as a weighted schedule's ramp gives it. When its cost was divided by the ramp factor instead, as Envoy's least request does, it still won most pairs it was drawn into: 15.1% of the first 2 s")
	t.AddNote("pickwise_p2c (no slow start): slowStart {\"enabled\": false}: the power of two choices alone, which gives the newcomer every pair it is drawn into, about 2/9, as least_request does")
	t.AddNote("pickwise_peak_ewma repeats pickwise_p2c's column: a call's latency reaches the policy when the call ends, and these streams outlive the run, so no backend ever has a latency sample; its cost is then the pending penalty plus the streams in flight, which orders backends as pickwise_p2c's in-flight count does, and with the same seed it makes the same picks. Its newcomer rule (one call at a time until the first answer) needs an answer, which a stream gives only when it closes")
	t.AddNote("pickwise_orca_wrr receives no load report here: a per-call report travels in the trailer that ends a call, and these streams outlive the run (long-lived streams need enableOobLoadReport, an ORCA stream per connection, which the simulator's fake connections answer with Unimplemented). With no usable weight anywhere it falls back to equal weights, a smooth round robin, which without slow start gives the newcomer its fair share: what blackout and the median give a newcomer in a fleet that does report, whose first 10 s of reports are ignored and whose weight meanwhile is the median of the others'. It never herds, and never learns that the newcomer is cold either")
	t.AddNote("pickwise_orca_wrr: the same fallback weights, the newcomer's scaled by slow start's ramp (on by default: 10% of its weight at first, full after 30 s), which advances each time the weights are republished, every second; (no slow start) gives it its fair share from the start")
	notes(t, policies)
	addWallClockColumn(t)
	out.Table = t
	return out, nil
}

// durationQuantile returns the q-quantile of ds (0 when empty), as
// Result.Quantile does; it sorts ds.
func durationQuantile(ds []time.Duration, q float64) time.Duration {
	slices.Sort(ds)
	r := Result{Latency: ds}
	return r.Quantile(q)
}
