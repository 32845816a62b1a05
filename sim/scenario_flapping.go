package sim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"
)

func init() {
	register(Scenario{Name: "flapping-cache", Run: func(s Scale) (*Table, error) {
		r, err := FlappingCache(s)
		if err != nil {
			return nil, err
		}
		return r.Table, nil
	}})
}

// FlapResult holds the flapping-cache scenario's numbers per policy, in
// column order.
type FlapResult struct {
	Policies []string
	// MovedKeys is the key moves over the minute, as a share of the keys:
	// a key that goes away and comes back counts twice.
	MovedKeys []float64
	// OriginFetches is how many keys were fetched from the origin because
	// they landed on a backend that did not hold them, each weighed by the
	// chance it is asked for within a second.
	OriginFetches []float64
	Table         *Table
}

// The flapping node: out of the list for flapOut in every flapPeriod, from
// flapFirst on, for flapRun.
const (
	flapBackends = 10
	flapNode     = 3
	flapFirst    = 4 * time.Second
	flapPeriod   = 10 * time.Second
	flapOut      = 2 * time.Second
	flapRun      = time.Minute
	flapStep     = 250 * time.Millisecond
	flapRate     = 200_000 // requests per second, for the origin's fetches
)

// flapOutAt says whether the flapping node is out of the list at t.
func flapOutAt(t time.Duration) bool {
	return t >= flapFirst && (t-flapFirst)%flapPeriod < flapOut
}

// FlappingCache: a cache tier of 10 backends behind hash-based balancing,
// one of which drops out of the endpoint list for 2 s in every 10, for a
// minute (a node that restarts, or a health check that flaps). Keys are
// Zipf-popular (s = 1.1). The flapping node loses its cache each time it
// goes; the others keep every key they ever held. Every quarter second of
// virtual time each key's backend is read from the policy's real picker:
// a key whose backend changed moved, and if its new backend does not hold
// it, the origin serves it. Without a hold, every flap moves the node's
// keys away and back, and every return refills its cache from the origin;
// with pickwise_ring_hash's rejoin hold (default 30 s, then a 10 s ramp)
// the node, never present for 30 s in a row, keeps none of its keys after
// the first flap, and nothing moves again.
func FlappingCache(scale Scale) (*FlapResult, error) {
	keys := 10_000
	if scale == Reduced {
		keys = 2_000
	}
	weights := zipfWeights(hotKeySkew, keys)
	ring := GRPC("ring_hash", "ring_hash_experimental", `{"requestHashHeader":"`+HashHeader+`","minRingSize":1024}`)
	ring.Note = "" // every request has a key: no random numbers drawn
	header := `"requestHashHeader":"` + HashHeader + `"`
	policies := []Policy{
		ring,
		GRPC("pickwise_ring_hash (rejoinHold 0s)", "pickwise_ring_hash", `{`+header+`,"rejoinHold":"0s","rejoinRamp":"0s"}`),
		GRPC("pickwise_ring_hash (default hold)", "pickwise_ring_hash", `{`+header+`}`),
		GRPC("pickwise_ring_hash (maglev, default hold)", "pickwise_ring_hash", `{`+header+`,"table":"maglev"}`),
		GRPC("pickwise_ring_hash (rendezvous, default hold)", "pickwise_ring_hash", `{`+header+`,"table":"rendezvous"}`),
	}
	out := &FlapResult{Policies: columns(policies)}
	all := backendIDs(flapBackends)
	var without []int
	for _, id := range all {
		if id != flapNode {
			without = append(without, id)
		}
	}
	for _, p := range policies {
		moved, fetched, err := flapRunPolicy(p, keys, weights, all, without)
		if err != nil {
			return nil, err
		}
		out.MovedKeys = append(out.MovedKeys, float64(moved)/float64(keys))
		out.OriginFetches = append(out.OriginFetches, fetched)
	}

	t := &Table{
		Title: fmt.Sprintf("Flapping cache node: 1 of %d backends out of the list for %.0f s in every %.0f s, for a minute; %s Zipf(s=%.1f) keys",
			flapBackends, flapOut.Seconds(), flapPeriod.Seconds(), withCommas(keys), hotKeySkew),
		Columns: out.Policies,
	}
	moved, fetched := make([]string, len(policies)), make([]string, len(policies))
	for i := range policies {
		moved[i] = Pct(out.MovedKeys[i])
		fetched[i] = fmt.Sprintf("%.0f", out.OriginFetches[i])
	}
	t.AddRow("key moves over the minute, share of the keys", moved...)
	t.AddRow("origin fetches caused by moves", fetched...)
	t.AddNote("a key that leaves with the node and comes back moves twice; the node loses its cache each time it drops out, the others keep what they held")
	t.AddNote("origin fetches: each move to a backend that does not hold the key costs one fetch, weighed by the chance the key is asked for within a second at 200,000 rps")
	t.AddNote("pickwise_ring_hash (default hold): rejoinHold 30s, rejoinRamp 10s; a node that left after it was READY gets its keys back only once present and READY for 30 s, so a node out every 10 s keeps none after its first flap")
	t.AddNote("pickwise_ring_hash (maglev, default hold): the hold keeps the node's own keys off it, but a Maglev table is rebuilt whenever the node leaves or comes back, and a rebuild without it and one with it assign the slots it does not own differently, so the other keys move anyway; for a cache tier whose nodes flap, use the ring (the default) or rendezvous")
	notes(t, policies)
	out.Table = t
	return out, nil
}

// flapRunPolicy runs the flapping minute for p and returns the key moves
// and the origin's fetches.
func flapRunPolicy(p Policy, keys int, weights []float64, all, without []int) (moved int, fetched float64, err error) {
	e := &env{loop: &Loop{}, rand: rand.New(rand.NewPCG(7, 7^0xf1a9)), seed: 7, backends: make([]Backend, flapBackends)}
	in, err := p.newInstance(e)
	if err != nil {
		return 0, 0, fmt.Errorf("%s: %w", p.Name, err)
	}
	defer in.close()
	if err := in.setBackends(all); err != nil {
		return 0, 0, fmt.Errorf("%s: %w", p.Name, err)
	}
	owner := make([]int, keys)
	cached := make([][]bool, flapBackends)
	for b := range cached {
		cached[b] = make([]bool, keys)
	}
	for k := range owner {
		if owner[k], err = pickKey(in, keyID(k)); err != nil {
			return 0, 0, fmt.Errorf("%s: %w", p.Name, err)
		}
		cached[owner[k]][k] = true // a warm tier
	}
	out := false
	for t := flapStep; t <= flapRun; t += flapStep {
		e.loop.Run(t)
		if now := flapOutAt(t); now != out {
			out = now
			ids := all
			if out {
				ids = without
				clear(cached[flapNode]) // it restarts
			}
			if err := in.setBackends(ids); err != nil {
				return 0, 0, fmt.Errorf("%s: %w", p.Name, err)
			}
		}
		for k := range owner {
			b, err := pickKey(in, keyID(k))
			if err != nil {
				return 0, 0, fmt.Errorf("%s at %v: %w", p.Name, t, err)
			}
			if b == owner[k] {
				continue
			}
			moved++
			owner[k] = b
			if !cached[b][k] {
				cached[b][k] = true
				fetched += -math.Expm1(flapRate * math.Log1p(-weights[k]))
			}
		}
	}
	return moved, fetched, nil
}
