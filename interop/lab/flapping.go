package main

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/pickwise/pickwise/sim"
)

// The lab's flapping cache node: the simulator's flapping-cache scenario
// (out 2 s in every 10, for a minute) at a fifth of its time scale, and
// pickwise_ring_hash's hold scaled alike (30 s and 10 s become 6 s and
// 2 s), so that it runs in seconds over real gRPC.
const (
	labFlapNode   = 3
	labFlapFirst  = 800 * time.Millisecond
	labFlapPeriod = 2 * time.Second
	labFlapOut    = 400 * time.Millisecond
	labFlapRun    = 12 * time.Second
)

// flappingCache sends every key, round after round, while one of 10
// backends leaves the endpoint list for 0.4 s in every 2 s, and counts the
// keys whose backend changed from one round to the next.
func flappingCache(ctx context.Context, l *lab) (section, error) {
	nKeys := l.calls(500)
	keys := make([]string, nKeys)
	for i := range keys {
		keys[i] = "key-" + strconv.Itoa(i)
	}
	tr := traffic{calls: nKeys, workers: 16, key: func(i int) string { return keys[i] }}
	all := make([]int, 10)
	for i := range all {
		all[i] = i
	}
	var without []int
	for _, id := range all {
		if id != labFlapNode {
			without = append(without, id)
		}
	}
	header := `"requestHashHeader":"` + keyHeader + `"`
	policies := l.keep("flapping-cache", []labPolicy{
		ringHash,
		{name: "pickwise_ring_hash (no hold)", config: lbConfig("pickwise_ring_hash", `{`+header+`,"rejoinHold":"0s","rejoinRamp":"0s"}`)},
		{name: "pickwise_ring_hash (hold 6s, ramp 2s)", config: lbConfig("pickwise_ring_hash", `{`+header+`,"rejoinHold":"6s","rejoinRamp":"2s"}`)},
	})
	// A smaller lab (-scale below 1) runs fewer flaps, but at least two.
	run := time.Duration(float64(labFlapRun) * min(1, max(l.scale, 1.0/3)))
	movedShare := map[string]float64{}
	var moved, failed []string
	for _, p := range policies {
		if err := l.fleet.configure(ctx, nil, `{"latency":"1ms"}`); err != nil {
			return section{}, err
		}
		ch, err := dial(l.fleet, p.config, all, nil)
		if err != nil {
			return section{}, err
		}
		if err := ch.warm(ctx, len(all)); err != nil {
			ch.conn.Close()
			return section{}, err
		}
		prog := l.progress.start("flapping-cache", p.name, 0)
		start := time.Now()
		out, moves, fails, calls := false, 0, 0, 0
		var prev map[string]string
		for t := time.Since(start); t < run && ctx.Err() == nil; t = time.Since(start) {
			if now := t >= labFlapFirst && (t-labFlapFirst)%labFlapPeriod < labFlapOut; now != out {
				out = now
				ids := all
				if out {
					ids = without
				}
				ch.setMembers(l.fleet, ids)
			}
			o := drive(ctx, ch, tr, func(int) {})
			fails += o.failed
			calls += o.total
			for k, b := range o.keyBackend {
				if prev != nil && prev[k] != "" && prev[k] != b {
					moves++
				}
			}
			prev = o.keyBackend
			prog.total = calls
			prog.update(calls)
		}
		prog.finish()
		ch.conn.Close()
		movedShare[p.name] = float64(moves) / float64(nKeys)
		moved = append(moved, sim.Pct(movedShare[p.name]))
		failed = append(failed, strconv.Itoa(fails))
	}
	t := &sim.Table{Title: fmt.Sprintf("Flapping cache node (real gRPC): %d keys sent round after round, 1 of 10 backends out of the list for %v in every %v, for %v",
		nKeys, labFlapOut, labFlapPeriod, run)}
	for _, p := range policies {
		t.Columns = append(t.Columns, p.name)
	}
	t.AddRow("key moves between rounds, share of the keys", moved...)
	t.AddRow("failed calls", failed...)
	t.AddNote("the simulator's flapping-cache scenario at a fifth of its time scale; the hold is scaled alike (30 s and 10 s by default)")
	t.AddNote("a key that leaves with the node and comes back moves twice")
	sec := section{Name: "flapping-cache", Table: t, Order: t.Columns}
	sec.Charts = []chart{{
		Kind: policyValues, Title: "Key moves while one node flaps",
		Reading: "shorter is better: without a hold every flap moves the node's keys away and back",
		Values:  movedShare, Percent: true, Axis: "key moves, share of the keys",
	}}
	return sec, nil
}
