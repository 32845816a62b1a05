package sim

import (
	"fmt"
	"time"
)

// Slow start's two sides: a backend that comes back warm must get its
// share back at once, or the rest of the fleet carries it; one that is
// really cold must keep its ramp. A client cannot tell them apart by how
// they came back (a process restarted on the same address and a network
// blip look alike), only by how they answer.

func init() {
	register(Scenario{Name: "warm-rejoin", Run: func(s Scale) (*Table, error) {
		r, err := WarmRejoin(s)
		if err != nil {
			return nil, err
		}
		return r.Table, nil
	}})
	register(Scenario{Name: "cold-join-unary", Run: func(s Scale) (*Table, error) {
		r, err := ColdJoinUnary(s)
		if err != nil {
			return nil, err
		}
		return r.Table, nil
	}})
}

// The fleet both scenarios run on: backends serving 8 calls at once at a
// 10 ms median, 800 calls a second each, offered 75% of what the fleet
// serves.
const (
	rejoinServers = 8
	rejoinService = 10 * time.Millisecond
	rejoinLoad    = 0.75
)

func rejoinBackends(n int) []Backend {
	backends := make([]Backend, n)
	for i := range backends {
		backends[i] = Backend{Servers: rejoinServers, Service: LogNormal(rejoinService, 0.25)}
	}
	return backends
}

// rejoinRate is the offered rate for n backends: rejoinLoad of their
// capacity.
func rejoinRate(n int) float64 {
	return rejoinLoad * float64(n*rejoinServers) / rejoinService.Seconds()
}

// spanShares counts the calls placed in consecutive spans after from
// (the first up to ends[0] after it, the next up to ends[1], ...), all of
// them and those on the backends a scenario watches.
type spanShares struct {
	from            time.Duration
	ends            [3]time.Duration
	placed, watched [3]int
}

// pick counts a call placed at now, on a watched backend or not.
func (s *spanShares) pick(now time.Duration, watched bool) {
	since := now - s.from
	for k, end := range s.ends {
		if since >= 0 && since < end {
			s.placed[k]++
			if watched {
				s.watched[k]++
			}
			return
		}
	}
}

// appendTo appends each span's share of watched calls to shares.
func (s *spanShares) appendTo(shares *[3][]float64) {
	for k := range s.ends {
		shares[k] = append(shares[k], float64(s.watched[k])/float64(max(s.placed[k], 1)))
	}
}

// addShareRows adds a row per span to t: label's row of shares.
func addShareRows(t *Table, shares [3][]float64, labels [3]string) {
	for k, label := range labels {
		cells := make([]string, len(shares[k]))
		for i, sh := range shares[k] {
			cells[i] = Pct(sh)
		}
		t.AddRow(label, cells...)
	}
}

// RejoinResult holds the warm-rejoin scenario's numbers per policy, in
// column order.
type RejoinResult struct {
	Policies []string
	// Share are the returning backends' share of the calls placed in the
	// first half second after they came back, the 1.5 s after that, and
	// the 8 s after that.
	Share [3][]float64
	// P99 is the 99th-percentile latency of the calls that arrived in the
	// first 10 s after the return, and P99Later of those in the 20 s
	// after that.
	P99, P99Later []time.Duration
	// P99Clients is P99 with the same calls sent by rejoinClients
	// clients, each with a balancer of its own.
	P99Clients []time.Duration
	Table      *Table
}

// Warm-rejoin parameters.
const (
	rejoinFleet    = 12
	rejoinAway     = 4 // backends 0-3 leave and come back
	rejoinLeave    = 10 * time.Second
	rejoinBack     = 12 * time.Second
	rejoinMeasured = 30 * time.Second
	// rejoinClients is how many clients share the calls in the second
	// run: 144 calls a second each, of which a returning backend's ramped
	// share is about one a second, too few to prove it by.
	rejoinClients = 50
)

// WarmRejoin: twelve backends at 75% of their capacity; four of them
// (a zone, say) drop out of the endpoint list for 2 s and come back as
// they were, warm. Round robin gives them their share at once. A ramp by
// time alone holds them at a tenth of their weight at first and lets them
// back over its 30 s window, and the other eight carry their load
// meanwhile: at over 100% of capacity until the ramp is about a quarter
// through, and their queues take longer still to drain. The pickwise
// policies kept the four's connections while they were out
// (removalGrace), so they know them for the same processes and do not
// ramp them. Columns that closed those connections at the removal
// (reconnects) show the evidence instead: they time the returning
// backends' first answers, find them as fast as their peers', and end
// their ramps. The same calls sent by rejoinClients clients give each too
// few answers to go by, and there the peers' wait, which grows while the
// eight queue, ends the ramps.
func WarmRejoin(Scale) (*RejoinResult, error) {
	all := backendIDs(rejoinFleet)
	run := Run{
		Seed:     11,
		Backends: rejoinBackends(rejoinFleet),
		Rate:     rejoinRate(rejoinFleet),
		Duration: rejoinBack + rejoinMeasured,
		Changes:  []Change{{At: rejoinLeave, Backends: all[rejoinAway:]}, {At: rejoinBack, Backends: all}},
	}
	policies := append(outcomePolicies(),
		GRPC("pickwise_p2c (reconnects)", "pickwise_p2c", `{"removalGrace":"0s"}`),
		GRPC("pickwise_orca_wrr (reconnects)", "pickwise_orca_wrr", `{"removalGrace":"0s"}`),
		GRPC("pickwise_p2c (timeOnly)", "pickwise_p2c", `{"slowStart":{"timeOnly":true},"removalGrace":"0s"}`),
		GRPC("pickwise_orca_wrr (timeOnly)", "pickwise_orca_wrr", `{"slowStart":{"timeOnly":true},"removalGrace":"0s"}`))
	out := &RejoinResult{Policies: columns(policies)}
	for _, p := range policies {
		spans := spanShares{from: rejoinBack, ends: [3]time.Duration{500 * time.Millisecond, 2 * time.Second, 10 * time.Second}}
		var early, later []time.Duration
		r := run
		r.OnPick = func(now time.Duration, _ *Request, backend int, _ time.Duration) {
			spans.pick(now, backend < rejoinAway)
		}
		r.OnDone = func(_ time.Duration, req *Request, _ int, latency time.Duration, err error) {
			switch since := req.Arrived - rejoinBack; {
			case err != nil || since < 0:
			case since < 10*time.Second:
				early = append(early, latency)
			default:
				later = append(later, latency)
			}
		}
		if _, err := r.Execute(p); err != nil {
			return nil, err
		}
		spans.appendTo(&out.Share)
		out.P99 = append(out.P99, durationQuantile(early, 0.99))
		out.P99Later = append(out.P99Later, durationQuantile(later, 0.99))

		early = early[:0]
		r = run
		r.Clients, r.Duration = rejoinClients, rejoinBack+10*time.Second
		r.OnDone = func(_ time.Duration, req *Request, _ int, latency time.Duration, err error) {
			if since := req.Arrived - rejoinBack; err == nil && since >= 0 {
				early = append(early, latency)
			}
		}
		if _, err := r.Execute(p); err != nil {
			return nil, err
		}
		out.P99Clients = append(out.P99Clients, durationQuantile(early, 0.99))
	}

	t := &Table{
		Title: fmt.Sprintf("Warm rejoin: %d backends at %.0f%% of capacity, %s rps; %d leave the endpoint list at %.0f s and come back warm %.0f s later",
			rejoinFleet, 100*rejoinLoad, withCommas(int(run.Rate)), rejoinAway, rejoinLeave.Seconds(), (rejoinBack - rejoinLeave).Seconds()),
		Columns: out.Policies,
	}
	var labels [3]string
	for k, span := range []string{"first 0.5 s", "0.5-2 s", "2-10 s"} {
		labels[k] = fmt.Sprintf("returning backends' share, %s after (fair: %.0f%%)", span, 100*float64(rejoinAway)/rejoinFleet)
	}
	addShareRows(t, out.Share, labels)
	p99, p99Later, p99Clients := make([]string, len(policies)), make([]string, len(policies)), make([]string, len(policies))
	for i := range policies {
		p99[i], p99Later[i], p99Clients[i] = Ms(out.P99[i]), Ms(out.P99Later[i]), Ms(out.P99Clients[i])
	}
	t.AddRow("p99 latency, calls in the first 10 s after", p99...)
	t.AddRow("p99 latency, calls 10-30 s after", p99Later...)
	t.AddRow(fmt.Sprintf("p99 latency, first 10 s after, the calls sent by %d clients", rejoinClients), p99Clients...)
	t.AddNote("the first 10 s include draining the queues the 2 s without the four built on the other eight (at 112% of their capacity): every policy's p99 there is mostly that")
	t.AddNote("pickwise policies keep a removed endpoint's READY connection for removalGrace (10 s by default): the four come back on the connections they left with, the same processes, with their statistics, and are not ramped")
	t.AddNote("(reconnects): removalGrace \"0s\", connections closed at the removal, as grpc's policies close them: the four reconnect and join after the first picker, and slow start ramps them until their first timed answers show them warm (five none slower than 1.2 times their peers' average, or eight or more averaging at most 1.5 times it), or their peers twice as slow as their slowest answer (the fleet overloaded), here within tens of milliseconds")
	t.AddNote(fmt.Sprintf("%d clients: each with a balancer of its own and %s calls a second, of which a returning backend's ramped share is about one a second: too few answers to prove it warm by, so its peers' growing wait ends a ramp", rejoinClients, withCommas(int(run.Rate)/rejoinClients)))
	t.AddNote("(timeOnly): slowStart {\"timeOnly\": true} and removalGrace \"0s\", the ramp by time alone (Envoy's): the four stay at their ramped share for most of the 30 s window while the other eight queue")
	notes(t, policies)
	addWallClockColumn(t)
	out.Table = t
	return out, nil
}

// ColdJoinResult holds the cold-join-unary scenario's numbers per policy,
// in column order.
type ColdJoinResult struct {
	Policies []string
	// Share are the newcomer's share of the calls placed in the first 2
	// s after it joined, the 8 s after that, and the 20 s after that.
	Share [3][]float64
	// NewcomerP99 is the 99th-percentile latency of the newcomer's calls
	// in its first 10 s, FleetP99 of every call in those 10 s.
	NewcomerP99, FleetP99 []time.Duration
	Table                 *Table
}

// Cold-join parameters.
const (
	coldJoinFleet = 9 // the last one joins cold
	coldJoinAt    = 10 * time.Second
	coldJoinFor   = 30 * time.Second
)

// ColdJoinUnary: eight backends at 75% of their capacity; a ninth joins
// cold, ten times slower at first and easing over 30 s, as the cold
// start's newcomer does, but serving short unary calls rather than
// streams, so that its answers come back within the run. They show it
// slower than its peers, so the evidence that ends a warm backend's ramp
// (warm-rejoin) keeps this one's: the pickwise columns match their ramp
// by time alone.
func ColdJoinUnary(Scale) (*ColdJoinResult, error) {
	backends := rejoinBackends(coldJoinFleet)
	newcomer := coldJoinFleet - 1
	backends[newcomer].ColdFor, backends[newcomer].ColdFactor = coldJoinFor, 10
	run := Run{
		Seed:     13,
		Backends: backends,
		Initial:  backendIDs(newcomer),
		// The load is the eight's: the newcomer adds capacity.
		Rate:     rejoinRate(newcomer),
		Duration: coldJoinAt + coldJoinFor,
		Changes:  []Change{{At: coldJoinAt, Backends: backendIDs(coldJoinFleet)}},
	}
	policies := append(outcomePolicies(),
		GRPC("pickwise_p2c (timeOnly)", "pickwise_p2c", `{"slowStart":{"timeOnly":true}}`),
		GRPC("pickwise_p2c (no slow start)", "pickwise_p2c", `{"slowStart":{"enabled":false}}`))
	out := &ColdJoinResult{Policies: columns(policies)}
	for _, p := range policies {
		spans := spanShares{from: coldJoinAt, ends: [3]time.Duration{2 * time.Second, 10 * time.Second, coldJoinFor}}
		var fleet, fresh []time.Duration
		r := run
		r.OnPick = func(now time.Duration, _ *Request, backend int, _ time.Duration) {
			spans.pick(now, backend == newcomer)
		}
		r.OnDone = func(_ time.Duration, req *Request, backend int, latency time.Duration, err error) {
			if since := req.Arrived - coldJoinAt; err == nil && since >= 0 && since < 10*time.Second {
				fleet = append(fleet, latency)
				if backend == newcomer {
					fresh = append(fresh, latency)
				}
			}
		}
		if _, err := r.Execute(p); err != nil {
			return nil, err
		}
		spans.appendTo(&out.Share)
		out.NewcomerP99 = append(out.NewcomerP99, durationQuantile(fresh, 0.99))
		out.FleetP99 = append(out.FleetP99, durationQuantile(fleet, 0.99))
	}

	t := &Table{
		Title: fmt.Sprintf("Cold join, unary calls: %d backends at %.0f%% of capacity, %s rps; a 9th joins cold (10x slower, easing over 30 s)",
			newcomer, 100*rejoinLoad, withCommas(int(run.Rate))),
		Columns: out.Policies,
	}
	addShareRows(t, out.Share, [3]string{"newcomer's share, first 2 s (fair: 11.1%)", "newcomer's share, 2-10 s (fair: 11.1%)", "newcomer's share, 10-30 s (fair: 11.1%)"})
	p99, fleetP99 := make([]string, len(policies)), make([]string, len(policies))
	for i := range policies {
		p99[i], fleetP99[i] = Ms(out.NewcomerP99[i]), Ms(out.FleetP99[i])
	}
	t.AddRow("newcomer's p99 latency, first 10 s", p99...)
	t.AddRow("fleet's p99 latency, first 10 s", fleetP99...)
	t.AddNote("the newcomer serves 80 calls a second at first against its peers' 800; its fair share of the offered load is 600, so a policy that gives it that share queues its calls for as long as it stays cold")
	t.AddNote("pickwise policies time the newcomer's first answers: they are several times slower than its peers', so its ramp goes on, as the (timeOnly) column's does; the power of two choices alone also keeps it below its share, as its calls pile up in flight")
	t.AddNote("pickwise_orca_wrr: for its first 10 s a newcomer's reports are ignored (blackout) and its weight is the median of its peers', scaled by the ramp, which by then outpaces this newcomer's warm-up; its reports then cut its weight")
	notes(t, policies)
	out.Table = t
	return out, nil
}
