package sim

import (
	"fmt"
	"math/rand/v2"
	"time"

	"google.golang.org/grpc/codes"
)

// The failure model's scenarios: how much evidence moves traffic, and
// what a policy does once the evidence is in. Each one names the
// behaviour to avoid in both directions: starving a healthy
// backend over one blip, and feeding a broken one.

func init() {
	for _, s := range []struct {
		name string
		run  func(Scale) (*Table, error)
	}{
		{"transient-failure", TransientFailure},
		{"one-stall", OneStall},
		{"flapping-backend", FlappingBackend},
		{"hash-black-hole", HashBlackHole},
		{"retry-storm", RetryStorm},
	} {
		register(Scenario{Name: s.name, Run: s.run})
	}
}

// outcomePolicies are the load-aware columns of the failure scenarios:
// grpc-go's two built-ins and the pickwise policies.
func outcomePolicies() []Policy {
	return []Policy{
		GRPC("round_robin", "round_robin", `{}`),
		GRPC("least_request", "least_request_experimental", `{}`),
		GRPC("pickwise_p2c", "pickwise_p2c", `{}`),
		GRPC("pickwise_peak_ewma", "pickwise_peak_ewma", `{}`),
		GRPC("pickwise_orca_wrr", "pickwise_orca_wrr", `{}`),
	}
}

// TransientFailure: four backends at 2 ms, 250 calls a second, so that
// there is rarely more than one call in flight and every candidate is
// idle at most picks: the setting where a cost step starves an endpoint.
// Backend 0 fails exactly one call, 10 s into the run. Its share in each
// of the next three seconds shows how much one failure moved.
func TransientFailure(Scale) (*Table, error) {
	const blip = 10 * time.Second
	backends := idleFleet()
	backends[0].FailOnce = []time.Duration{blip}
	backends[0].FailAfter = 200 * time.Microsecond
	return shareTable("One transient failure: 4 backends at 2 ms, 250 rps (idle candidates); backend-0 fails one call at 10 s",
		"the failure", backends, blip,
		"pickwise_p2c and pickwise_peak_ewma weigh the failure by its evidence: one failure among many successes makes the endpoint lose about one comparison in six for a few seconds, not every comparison; a cost step (the penalty before it was evidence-based) sent it nothing until wall-clock decay forgave it")
}

// idleFleet is the fleet of TransientFailure and OneStall: four backends
// at 2 ms, which at 250 calls a second are nearly always idle.
func idleFleet() []Backend {
	backends := make([]Backend, 4)
	for i := range backends {
		backends[i] = Backend{Service: LogNormal(2*time.Millisecond, 0.2), Cores: 1}
	}
	return backends
}

// shareTable is the table of backend 0's share in each of the three
// seconds after from (shareAfter) under each failure-model policy, after
// event, with note and the policies' own notes.
func shareTable(title, event string, backends []Backend, from time.Duration, note string) (*Table, error) {
	policies := outcomePolicies()
	t := &Table{Title: title, Columns: columns(policies)}
	rows, err := shareAfter(policies, backends, from)
	if err != nil {
		return nil, err
	}
	for s, cells := range rows {
		t.AddRow(fmt.Sprintf("backend-0's share, second %d after %s (fair 25%%)", s+1, event), cells...)
	}
	t.AddNote(note)
	notes(t, policies)
	return t, nil
}

// shareAfter runs each policy over backends at 250 calls a second until 3 s
// after from, and returns backend 0's share of the picks in each of those
// three seconds: a row per second, a cell per policy.
func shareAfter(policies []Policy, backends []Backend, from time.Duration) ([][]string, error) {
	rows := make([][]string, 3)
	for _, p := range policies {
		per := make([][2]int, 3) // [backend-0, all] per second after from
		run := Run{Seed: 1, Backends: backends, Rate: 250, Duration: from + 3*time.Second}
		run.OnPick = func(now time.Duration, _ *Request, backend int, _ time.Duration) {
			if now <= from {
				return
			}
			s := min(int((now-from)/time.Second), 2)
			per[s][1]++
			if backend == 0 {
				per[s][0]++
			}
		}
		if _, err := run.Execute(p); err != nil {
			return nil, err
		}
		for s := range rows {
			rows[s] = append(rows[s], Pct(float64(per[s][0])/float64(max(per[s][1], 1))))
		}
	}
	return rows, nil
}

// OneStall: TransientFailure's fleet and traffic, where backend 0 answers
// one call, 10 s into the run, 40 ms late (twenty times its usual 2 ms)
// and is otherwise as fast as the others: a pause of the machine, not a
// slow backend. Its share in each of the next three seconds shows whether
// one late answer starved it.
func OneStall(Scale) (*Table, error) {
	const at = 10 * time.Second
	backends := idleFleet()
	backends[0].Pauses = []Pause{{At: at, Extra: 40 * time.Millisecond}}
	return shareTable("One stall: 4 backends at 2 ms, 250 rps (idle candidates); one call to backend-0 at 10 s takes 40 ms more",
		"the late answer", backends, at,
		"pickwise_peak_ewma holds a lone answer over three times its latency average until the endpoint's next answer, which forgives it if it succeeds in time; taken as the peak at once, as Finagle's rule takes it, the late answer priced backend-0 out of every comparison with its idle peers until the peak decayed, and it got next to nothing for seconds")
}

// FlappingBackend: ten backends at 50 ms, 1,000 calls a second; backend 0
// fails every call in 1 ms for 2 s in every 10, for a minute. Its share
// while failing and while healthy, and the calls clients saw fail.
func FlappingBackend(scale Scale) (*Table, error) {
	minute := 60 * time.Second
	if scale == Reduced {
		minute = 30 * time.Second
	}
	backends := make([]Backend, 10)
	for i := range backends {
		backends[i] = Backend{Service: LogNormal(50*time.Millisecond, 0.2), Cores: 10}
	}
	var down []Window
	for at := 5 * time.Second; at < minute; at += 10 * time.Second {
		down = append(down, Window{From: at, To: at + 2*time.Second, Factor: 1})
	}
	backends[0].Failing = down
	backends[0].FailAfter = time.Millisecond
	backends[0].FailCode = codes.Unavailable
	failing := func(now time.Duration) bool {
		for _, w := range down {
			if now >= w.From && now < w.To {
				return true
			}
		}
		return false
	}
	policies := outcomePolicies()
	t := &Table{Title: fmt.Sprintf("Flapping backend: 10 backends, 1,000 rps, 50 ms; backend-0 fails every call in 1 ms for 2 s in every 10, for %.0f s", minute.Seconds()), Columns: columns(policies)}
	var shareDown, shareUp, errs []string
	for _, p := range policies {
		var d, dAll, u, uAll int
		run := Run{Seed: 1, Backends: backends, Rate: 1000, Duration: minute}
		run.OnPick = func(now time.Duration, _ *Request, backend int, _ time.Duration) {
			if failing(now) {
				dAll++
				if backend == 0 {
					d++
				}
				return
			}
			uAll++
			if backend == 0 {
				u++
			}
		}
		res, err := run.Execute(p)
		if err != nil {
			return nil, err
		}
		shareDown = append(shareDown, Pct(float64(d)/float64(max(dAll, 1))))
		shareUp = append(shareUp, Pct(float64(u)/float64(max(uAll, 1))))
		errs = append(errs, Pct(res.ErrorRate()))
	}
	t.AddRow("backend-0's share while it fails", shareDown...)
	t.AddRow("backend-0's share while it is healthy (fair 10%)", shareUp...)
	t.AddRow("errors seen by clients", errs...)
	t.AddNote("pickwise policies eject backend-0 within a few of its failures and readmit it after two probe calls succeed once it is healthy again. Its ejection count grows by one with each ejection and shrinks by one per 10 s it stays in, so with 8 s in between flaps each ejection lasts a second longer than the last (1 s, 2 s, 3 s ...) and the later ones reach into its healthy time: the price of not trusting a node that keeps failing")
	notes(t, policies)
	addWallClockColumn(t)
	return t, nil
}

// HashBlackHole: ten backends, 300 keys, 1,000 calls a second at 2 ms;
// backend 3 fails every call for 20 s, then heals. Client-visible
// failures while it fails, once the policy has seen the first second of
// them, and the share of its own keys' calls it serves again in the
// second after it heals.
func HashBlackHole(Scale) (*Table, error) {
	const (
		breakAt, healAt = 5 * time.Second, 25 * time.Second
		broken          = 3
	)
	backends := make([]Backend, 10)
	for i := range backends {
		backends[i] = Backend{Service: LogNormal(2*time.Millisecond, 0.2)}
	}
	backends[broken].Failing = []Window{{From: breakAt, To: healAt, Factor: 1}}
	backends[broken].FailAfter = 200 * time.Microsecond
	backends[broken].FailCode = codes.Unavailable
	keys := func(r *rand.Rand) uint64 { return uint64(r.IntN(300)) }
	policies := []Policy{hashPolicies()[1], hashPolicies()[2], hashPolicies()[3],
		GRPC("pickwise_ring_hash (ring, strictAffinity)", "pickwise_ring_hash", `{"requestHashHeader":"`+HashHeader+`","strictAffinity":true}`)}
	t := &Table{Title: "Hash black hole: 10 backends, 300 keys, 1,000 rps at 2 ms; backend-3 fails every call from 5 s to 25 s", Columns: columns(policies)}
	var errs, before, back []string
	for _, p := range policies {
		home := map[uint64]bool{}
		var failed, all, homeBack, homeAll int
		run := Run{Seed: 1, Backends: backends, Rate: 1000, Duration: healAt + 2*time.Second, Key: keys}
		run.OnPick = func(now time.Duration, req *Request, backend int, _ time.Duration) {
			switch {
			case now < breakAt:
				if backend == broken {
					home[req.Key] = true
				}
			case now >= healAt+time.Second && home[req.Key]:
				homeAll++
				if backend == broken {
					homeBack++
				}
			}
		}
		run.OnDone = func(now time.Duration, req *Request, _ int, _ time.Duration, err error) {
			if req.Arrived >= breakAt+time.Second && req.Arrived < healAt {
				all++
				if err != nil {
					failed++
				}
			}
		}
		if _, err := run.Execute(p); err != nil {
			return nil, err
		}
		errs = append(errs, Pct(float64(failed)/float64(max(all, 1))))
		before = append(before, fmt.Sprint(len(home)))
		back = append(back, Pct(float64(homeBack)/float64(max(homeAll, 1))))
	}
	t.AddRow("backend-3's keys before it fails", before...)
	t.AddRow("errors seen by clients while it fails, after its first second", errs...)
	t.AddRow("its keys' calls it serves again 1-2 s after healing", back...)
	t.AddNote("pickwise_ring_hash ejects the failing backend locally: its keys go to their next candidate on the table while the resolver's membership stays as it is, a probe call now and then goes home, and two successful probes after it heals give its keys back. strictAffinity keeps every key home, failing or not, as ring_hash does")
	return t, nil
}

// RetryStorm: ten backends at 10 ms, 1,000 calls a second; backend 0
// fails every call in 1 ms; clients retry UNAVAILABLE up to 3 attempts,
// 5 ms apart. Attempts per successful call is what the black hole costs
// the fleet; client-visible failures are the calls whose every attempt
// failed.
func RetryStorm(Scale) (*Table, error) {
	backends := make([]Backend, 10)
	for i := range backends {
		backends[i] = Backend{Service: LogNormal(10*time.Millisecond, 0.2), Cores: 10}
	}
	backends[0].FailRate, backends[0].FailAfter, backends[0].FailCode = 1, time.Millisecond, codes.Unavailable
	keys := func(r *rand.Rand) uint64 { return uint64(r.IntN(300)) }
	type column struct {
		p        Policy
		keyed    bool
		attempts bool
	}
	cols := []column{
		{GRPC("round_robin", "round_robin", `{}`), false, false},
		{GRPC("least_request", "least_request_experimental", `{}`), false, false},
		{GRPC("pickwise_p2c", "pickwise_p2c", `{}`), false, false},
		{GRPC("pickwise_p2c + attempts", "pickwise_p2c", `{}`), false, true},
		{hashPolicies()[1], true, false},
		{GRPC("pickwise_ring_hash", "pickwise_ring_hash", `{"requestHashHeader":"`+HashHeader+`"}`), true, false},
		{GRPC("pickwise_ring_hash + attempts", "pickwise_ring_hash", `{"requestHashHeader":"`+HashHeader+`"}`), true, true},
	}
	names := make([]string, len(cols))
	for i, c := range cols {
		names[i] = c.p.Name
	}
	t := &Table{Title: "Retry storm: 10 backends at 10 ms, 1,000 rps; backend-0 fails every call in 1 ms; retryPolicy: 3 attempts on UNAVAILABLE, 5 ms apart; 20 s", Columns: names}
	var perSuccess, errs []string
	for _, c := range cols {
		run := Run{Seed: 1, Backends: backends, Rate: 1000, Duration: 20 * time.Second,
			Retry: &Retry{MaxAttempts: 3, Backoff: 5 * time.Millisecond, Attempts: c.attempts}}
		if c.keyed {
			run.Key = keys
		}
		res, err := run.Execute(c.p)
		if err != nil {
			return nil, err
		}
		perSuccess = append(perSuccess, fmt.Sprintf("%.3f", float64(res.Attempts)/float64(max(res.Total-res.Failed, 1))))
		errs = append(errs, Pct(res.ErrorRate()))
	}
	t.AddRow("attempts per successful call", perSuccess...)
	t.AddRow("errors seen by clients (every attempt failed)", errs...)
	t.AddNote("measured from the start, so the moments before a policy has seen the failures count; + attempts: the channel has the attempts package's interceptor, so a retry is placed away from the endpoints its call's earlier attempts used (for ring hash, the key's next candidate)")
	t.AddNote("ring_hash, and pickwise_ring_hash before it ejects the black hole: every attempt of a key whose home fails goes home again, so its calls fail whatever the retry policy")
	for _, c := range cols {
		t.AddNote(c.p.Note)
	}
	return t, nil
}
