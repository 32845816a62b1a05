package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/pickwise/pickwise/attempts"
	"github.com/pickwise/pickwise/interop/server"
	"github.com/pickwise/pickwise/sim"
	"google.golang.org/grpc"
)

// The failure model's scenarios over real gRPC: how much evidence moves
// traffic (one blip), and what a policy does once the evidence is in (a
// flapping backend, a hash black hole, a retry storm). Each runs the
// pickwise policies beside grpc-go's in the same fleet.

// windowShare is backend's share of the calls in windows ws.
func windowShare(ws []window, backend string) (share float64, calls int) {
	n, total := 0, 0
	for _, w := range ws {
		n += w.perBackend[backend]
		total += w.total
	}
	return float64(n) / float64(max(total, 1)), total
}

// seconds scales a scenario's duration with -scale, never below min.
func (l *lab) seconds(full, least time.Duration) time.Duration {
	return max(least, time.Duration(float64(full)*l.scale))
}

// transientFailure: four backends at 2 ms, one caller making sequential
// calls, so that every candidate is idle at each pick; backend 0 fails
// exactly one call. Its share in the second before, in each of the next
// three seconds, and over those three together.
func transientFailure(ctx context.Context, l *lab) (section, error) {
	const n = 4
	policies := l.keep("transient-failure", loadAware)
	t := &sim.Table{Title: "One transient failure (real gRPC): 4 backends at 2 ms, one sequential caller; backend-0 fails exactly one call", Columns: names(policyResults(policies))}
	// Row 0 is the second before the failure, rows 1-3 the seconds after
	// it, row 4 the three seconds after it together.
	rows := make([][]string, 5)
	share := func(ws []window) string {
		if len(ws) == 0 {
			return "-"
		}
		sh, _ := windowShare(ws, l.fleet.names[0])
		return sim.Pct(sh)
	}
	for _, p := range policies {
		ch, err := l.open(ctx, "transient-failure", n, p, `{"latency":"2ms"}`, nil, nil)
		if err != nil {
			return section{}, err
		}
		before := l.run(ctx, "transient-failure", p.name+" (history)", ch, traffic{workers: 1, duration: time.Second, window: time.Second})
		if err := l.set(ctx, 0, `{"failNext":1}`); err != nil {
			ch.conn.Close()
			return section{}, err
		}
		o := l.run(ctx, "transient-failure", p.name, ch, traffic{workers: 1, duration: 3 * time.Second, window: time.Second})
		ch.conn.Close()
		rows[0] = append(rows[0], share(before.windows[:min(1, len(before.windows))]))
		for s := 1; s <= 3; s++ {
			rows[s] = append(rows[s], share(o.windows[min(s-1, len(o.windows)):min(s, len(o.windows))]))
		}
		rows[4] = append(rows[4], share(o.windows[:min(3, len(o.windows))]))
	}
	t.AddRow("backend-0's share, the second before (fair 25%)", rows[0]...)
	for s := 1; s <= 3; s++ {
		t.AddRow(fmt.Sprintf("backend-0's share, second %d after", s), rows[s]...)
	}
	t.AddRow("backend-0's share, seconds 1-3 after", rows[4]...)
	t.AddNote("pickwise_p2c weighs a failure by its evidence, as pickwise_peak_ewma does: one failure among many successes costs the endpoint about one comparison in six for a few seconds, not all of them")
	t.AddNote("pickwise_peak_ewma places by latency: at one caller its seconds move with the machine's noise; a lone answer over three times the average (a stall of the machine, not the backend) waits for the next answer before it counts, and a normal one forgives it")
	return section{Name: "transient-failure", Table: t}, nil
}

// policyResults gives names() the policies' names.
func policyResults(ps []labPolicy) []result {
	out := make([]result, len(ps))
	for i, p := range ps {
		out[i].policy = p.name
	}
	return out
}

// flappingBackend: ten backends at 20 ms, 500 calls a second open loop;
// backend 0 fails every call at once for a fifth of every period (2 s in
// every 10 at full scale). Its share while failing and while healthy, and
// the calls clients saw fail.
func flappingBackend(ctx context.Context, l *lab) (section, error) {
	const n = 10
	policies := l.keep("flapping-backend", loadAware)
	total := l.seconds(20*time.Second, 8*time.Second)
	period := total / 2
	down := period / 5
	rate := 500.0
	failing := func(at time.Duration) bool {
		in := at % period
		return in >= period/2 && in < period/2+down
	}
	t := &sim.Table{Title: fmt.Sprintf("Flapping backend (real gRPC): 10 backends at 20 ms, 500 calls/s; backend-0 fails every call at once for %v in every %v, for %v", down, period, total),
		Columns: names(policyResults(policies))}
	var shareDown, shareUp, errs []string
	for _, p := range policies {
		ch, err := l.open(ctx, "flapping-backend", n, p, `{"latency":"20ms","latencySpread":0.2}`, nil, nil)
		if err != nil {
			return section{}, err
		}
		// The flaps, on the wall clock of the run.
		flapCtx, stop := context.WithCancel(ctx)
		flapped := make(chan error, 1)
		go func() {
			began := time.Now()
			broken := false
			var err error
			for flapCtx.Err() == nil && err == nil {
				if f := failing(time.Since(began)); f != broken {
					broken = f
					patch := `{"errorRate":0}`
					if f {
						patch = `{"errorRate":1,"errorCode":"UNAVAILABLE","errorLatency":"0s"}`
					}
					err = l.set(flapCtx, 0, patch)
				}
				time.Sleep(5 * time.Millisecond)
			}
			if flapCtx.Err() != nil {
				err = nil
			}
			flapped <- err
		}()
		const step = 100 * time.Millisecond
		o := l.run(ctx, "flapping-backend", p.name, ch, traffic{calls: int(rate * total.Seconds()), rate: rate, window: step})
		stop()
		ch.conn.Close()
		if err := <-flapped; err != nil {
			return section{}, err
		}
		var dn, up []window
		for i, w := range o.windows {
			// A window that straddles a flap belongs to neither phase.
			from, to := time.Duration(i)*step, time.Duration(i+1)*step-time.Millisecond
			switch {
			case failing(from) && failing(to):
				dn = append(dn, w)
			case !failing(from) && !failing(to):
				up = append(up, w)
			}
		}
		sd, _ := windowShare(dn, l.fleet.names[0])
		su, _ := windowShare(up, l.fleet.names[0])
		shareDown = append(shareDown, sim.Pct(sd))
		shareUp = append(shareUp, sim.Pct(su))
		errs = append(errs, sim.Pct(float64(o.failed)/float64(max(o.total, 1))))
	}
	t.AddRow("backend-0's share while it fails", shareDown...)
	t.AddRow("backend-0's share while it is healthy (fair 10%)", shareUp...)
	t.AddRow("errors seen by clients", errs...)
	t.AddNote("pickwise policies eject backend-0 within a few of its failures and readmit it after two probe calls succeed; its ejection count grows by one with each ejection and shrinks by one per 10 s it stays in, and each ejection lasts at least that count of seconds")
	return section{Name: "flapping-backend", Table: t}, nil
}

// hashBlackHole: ten backends at 2 ms, 300 keys by header, 16 callers;
// backend 3 fails every call for a while, then heals. Client-visible
// failures after the policy has seen the first second of them, and how
// soon the broken backend's own keys are back on it.
func hashBlackHole(ctx context.Context, l *lab) (section, error) {
	const n, broken = 10, 3
	strict := labPolicy{name: "pickwise_ring_hash (strictAffinity)", config: lbConfig("pickwise_ring_hash", `{"requestHashHeader":"`+keyHeader+`","strictAffinity":true}`)}
	maglev := labPolicy{name: "pickwise_ring_hash (maglev, bounded 1.25)", config: lbConfig("pickwise_ring_hash", `{"requestHashHeader":"`+keyHeader+`","table":"maglev","balanceFactor":1.25}`)}
	policies := l.keep("hash-black-hole", []labPolicy{ringHash, pwRingHash, maglev, strict})
	keyOf := func(i int) string { return fmt.Sprint("key-", i%300) }
	failFor := l.seconds(5*time.Second, 2*time.Second)
	t := &sim.Table{Title: fmt.Sprintf("Hash black hole (real gRPC): 10 backends at 2 ms, 300 keys by header, 16 callers; backend-3 fails every call for %v, then heals", failFor),
		Columns: names(policyResults(policies))}
	var homes, errs, back, backTime []string
	for _, p := range policies {
		ch, err := l.open(ctx, "hash-black-hole", n, p, `{"latency":"2ms"}`, nil, nil)
		if err != nil {
			return section{}, err
		}
		// Its keys: where each of the 300 goes while all are healthy.
		o := l.run(ctx, "hash-black-hole", p.name+" (keys)", ch, traffic{calls: 300, workers: 1, key: keyOf})
		var home []string
		for k, b := range o.keyBackend {
			if b == l.fleet.names[broken] {
				home = append(home, k)
			}
		}
		if err := l.set(ctx, broken, `{"errorRate":1,"errorCode":"UNAVAILABLE","errorLatency":"0s"}`); err != nil {
			ch.conn.Close()
			return section{}, err
		}
		o = l.run(ctx, "hash-black-hole", p.name, ch, traffic{workers: 16, duration: failFor, window: time.Second, key: keyOf})
		seen := window{perBackend: map[string]int{}}
		for _, w := range o.windows[min(1, len(o.windows)):] {
			seen.failed += w.failed
			seen.total += w.total
		}
		if err := l.set(ctx, broken, `{"errorRate":0}`); err != nil {
			ch.conn.Close()
			return section{}, err
		}
		// Back home: ordinary traffic, and every 250 ms each of its keys
		// once, until 90% of them land on it again or 30 s pass.
		healed := time.Now()
		homeKeys := traffic{calls: len(home), workers: 1, key: func(i int) string { return home[i] }}
		frac := 0.0
		for time.Since(healed) < 30*time.Second && ctx.Err() == nil && len(home) > 0 {
			drive(ctx, ch, traffic{workers: 16, duration: 250 * time.Millisecond, key: keyOf}, func(int) {})
			h := drive(ctx, ch, homeKeys, func(int) {})
			frac = float64(h.perBackend[l.fleet.names[broken]]) / float64(len(home))
			if frac >= 0.9 {
				break
			}
		}
		ch.conn.Close()
		homes = append(homes, fmt.Sprint(len(home)))
		errs = append(errs, sim.Pct(float64(seen.failed)/float64(max(seen.total, 1))))
		back = append(back, sim.Pct(frac))
		backTime = append(backTime, fmt.Sprintf("%.1f s", time.Since(healed).Seconds()))
	}
	t.AddRow("backend-3's keys of 300", homes...)
	t.AddRow("errors seen by clients while it fails, after its first second", errs...)
	t.AddRow("its keys back on it once it heals", back...)
	t.AddRow("time until 90% of them are back (or 30 s)", backTime...)
	t.AddNote("pickwise_ring_hash ejects the failing backend locally: its keys go to their next candidate while the resolver's membership stays as it is, a probe call now and then goes home, and two successful probes give its keys back; strictAffinity keeps every key home, as ring_hash does")
	return section{Name: "hash-black-hole", Table: t}, nil
}

// withRetry adds grpc's retry policy, three attempts on UNAVAILABLE, to a
// service config.
func withRetry(serviceConfig string) string {
	return strings.TrimSuffix(serviceConfig, "}") + `,"methodConfig":[{"name":[{"service":"` + server.BackendService + `"}],` +
		`"retryPolicy":{"maxAttempts":3,"initialBackoff":"0.005s","maxBackoff":"0.02s","backoffMultiplier":2,"retryableStatusCodes":["UNAVAILABLE"]}}]}`
}

// retryStorm: ten backends at 10 ms, one black hole, 16 callers and
// grpc's retry policy. Attempts per successful call is what the black
// hole costs the fleet; failures are calls whose every attempt failed.
func retryStorm(ctx context.Context, l *lab) (section, error) {
	const n = 10
	type column struct {
		p      labPolicy
		keyed  bool
		record bool // the attempts interceptor
	}
	cols := []column{
		{roundRobin, false, false}, {leastRequest, false, false}, {p2c, false, false},
		{labPolicy{name: "pickwise_p2c + attempts", config: p2c.config}, false, true},
		{ringHash, true, false}, {pwRingHash, true, false},
		{labPolicy{name: "pickwise_ring_hash + attempts", config: pwRingHash.config}, true, true},
	}
	t := &sim.Table{Title: "Retry storm (real gRPC): 10 backends at 10 ms, backend-0 fails every call at once; retryPolicy 3 attempts on UNAVAILABLE; 16 callers"}
	var perSuccess, errs []string
	calls := l.calls(3000)
	for _, c := range cols {
		if !l.runs("retry-storm", c.p.name) {
			continue
		}
		t.Columns = append(t.Columns, c.p.name)
		var opts []grpc.DialOption
		if c.record {
			opts = append(opts, grpc.WithChainUnaryInterceptor(attempts.UnaryClientInterceptor()))
		}
		p := c.p
		p.config = withRetry(p.config)
		ch, err := l.open(ctx, "retry-storm", n, p, `{"latency":"10ms"}`, nil, nil, opts...)
		if err != nil {
			return section{}, err
		}
		// Broken after the warm-up, which needs an answer from every
		// backend, and counted from here.
		if err := l.set(ctx, 0, `{"errorRate":1,"errorCode":"UNAVAILABLE","errorLatency":"0s"}`); err != nil {
			ch.conn.Close()
			return section{}, err
		}
		for i := 0; i < n; i++ {
			if _, err := server.Reset(ctx, l.fleet.admin[i], false); err != nil {
				ch.conn.Close()
				return section{}, err
			}
		}
		tr := traffic{calls: calls, workers: 16}
		if c.keyed {
			tr.key = func(i int) string { return fmt.Sprint("key-", i%300) }
		}
		o := l.run(ctx, "retry-storm", c.p.name, ch, tr)
		ch.conn.Close()
		reached := int64(0)
		for i := 0; i < n; i++ {
			st, err := server.FetchStats(ctx, l.fleet.admin[i])
			if err != nil {
				return section{}, err
			}
			reached += st.Served + st.Failed
		}
		perSuccess = append(perSuccess, fmt.Sprintf("%.3f", float64(reached)/float64(max(o.total-o.failed, 1))))
		errs = append(errs, sim.Pct(float64(o.failed)/float64(max(o.total, 1))))
	}
	t.AddRow("attempts reaching a backend per successful call", perSuccess...)
	t.AddRow("errors seen by clients (every attempt failed)", errs...)
	t.AddNote("+ attempts: the channel has the attempts package's interceptor (grpc.WithChainUnaryInterceptor(attempts.UnaryClientInterceptor())), so a retry goes away from the endpoints its call's earlier attempts used: for ring hash, the key's next candidate")
	t.AddNote("ring_hash: every attempt of a key goes to the key's home, so a black hole's keys fail whatever the retry policy")
	return section{Name: "retry-storm", Table: t}, nil
}
