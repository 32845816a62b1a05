package sim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"
)

func init() {
	register(Scenario{Name: "remap-storm", Run: func(s Scale) (*Table, error) {
		r, err := RemapStorm(s)
		if err != nil {
			return nil, err
		}
		return r.Table, nil
	}})
}

// RemapResult holds the remap-storm scenario's numbers per policy, in
// column order.
type RemapResult struct {
	Policies []string
	// MovedKeys is the share of keys whose backend changed when the 11th
	// backend joined; MovedRequests weighs each key by its popularity.
	MovedKeys, MovedRequests []float64
	// MovedBetweenOld is the share of keys that moved from one of the old
	// backends to another: churn the new backend does not explain.
	MovedBetweenOld []float64
	// Spike is the origin's request rate right after the change over its
	// rate before: every request for a moved key misses until the key is
	// cached again. SpikeWindow is the same ratio averaged over the first
	// 100 ms after the change, in which a moved key misses only once.
	Spike, SpikeWindow []float64
	Table              *Table
}

// Remap-storm parameters: a cache tier serving 200,000 requests per
// second at a 95% hit ratio in front of an origin.
const (
	remapRate     = 200_000
	remapHitRatio = 0.95
	// remapWindow is the period after the change that SpikeWindow averages
	// over: long enough for popular moved keys to be cached again, short
	// enough that the rare ones have not yet been asked for.
	remapWindow = 100 * time.Millisecond
)

// RemapStorm: a cache tier of 10 backends behind hash-based balancing grows
// to 11. Keys are Zipf-popular (s = 1.1). A key that moves is cold on its
// new backend, so its next request goes to the origin. hash(key) mod n
// keeps a key only when hash mod 10 = hash mod 11, 10 residues in 110, so
// about 91% of keys move; consistent hashing moves about 1/11, the keys the
// newcomer takes over.
//
// The key-to-backend maps come from the policies' real pickers (one client
// each, a pick per key before and after the change); no event loop is
// needed, as where a key goes does not depend on load for these policies.
func RemapStorm(scale Scale) (*RemapResult, error) {
	const before, after = 10, 11
	const newcomer = after - 1 // the backend id that joins
	keys := 100_000
	if scale == Reduced {
		keys = 10_000
	}
	weights := zipfWeights(hotKeySkew, keys)
	backends := make([]Backend, after)
	// A key is placed here with no load, so a bounded column maps keys as
	// its unbounded table does; one shows that bounded load keeps the
	// table's movement.
	policies := append(hashPolicies(), boundedRingHash("ring")...)
	out := &RemapResult{Policies: columns(policies)}
	windowRequests := remapWindow.Seconds() * remapRate
	for _, p := range policies {
		in, err := newClient(p, 7, backends, backendIDs(before))
		if err != nil {
			return nil, err
		}
		owner := make([]int, keys)
		for k := range owner {
			if owner[k], err = pickKey(in, keyID(k)); err != nil {
				in.close()
				return nil, fmt.Errorf("%s: %w", p.Name, err)
			}
		}
		if err := in.setBackends(backendIDs(after)); err != nil {
			in.close()
			return nil, fmt.Errorf("%s: %w", p.Name, err)
		}
		var moved, betweenOld int
		var movedWeight, firstMisses float64
		for k := range owner {
			id, err := pickKey(in, keyID(k))
			if err != nil {
				in.close()
				return nil, fmt.Errorf("%s: %w", p.Name, err)
			}
			if id == owner[k] {
				continue
			}
			moved++
			if id != newcomer {
				betweenOld++
			}
			movedWeight += weights[k]
			// The chance the key is asked for at least once in the
			// window: that first request misses, the others hit.
			firstMisses += -math.Expm1(windowRequests * math.Log1p(-weights[k]))
		}
		in.close()
		miss := 1 - remapHitRatio
		out.MovedKeys = append(out.MovedKeys, float64(moved)/float64(keys))
		out.MovedRequests = append(out.MovedRequests, movedWeight)
		out.MovedBetweenOld = append(out.MovedBetweenOld, float64(betweenOld)/float64(keys))
		// Requests for moved keys that would have hit now miss; the rest
		// keep missing at the steady rate.
		out.Spike = append(out.Spike, (miss+remapHitRatio*movedWeight)/miss)
		out.SpikeWindow = append(out.SpikeWindow, (miss*windowRequests+remapHitRatio*firstMisses)/(miss*windowRequests))
	}

	t := &Table{
		Title: fmt.Sprintf("Remap storm: a cache tier grows from %d to %d backends; %s Zipf(s=%.1f) keys; %s rps at a %.0f%% hit ratio",
			before, after, withCommas(keys), hotKeySkew, withCommas(remapRate), 100*remapHitRatio),
		Columns: out.Policies,
	}
	movedKeys, movedReq, betweenOld := make([]string, len(policies)), make([]string, len(policies)), make([]string, len(policies))
	spike, spikeWin := make([]string, len(policies)), make([]string, len(policies))
	for i := range policies {
		movedKeys[i], movedReq[i], betweenOld[i] = Pct(out.MovedKeys[i]), Pct(out.MovedRequests[i]), Pct(out.MovedBetweenOld[i])
		spike[i], spikeWin[i] = fmt.Sprintf("%.1fx", out.Spike[i]), fmt.Sprintf("%.1fx", out.SpikeWindow[i])
	}
	t.AddRow("keys moved (ideal: 1/11 = 9.1%)", movedKeys...)
	t.AddRow("  of which between old backends (ideal: 0)", betweenOld...)
	t.AddRow("requests whose key moved", movedReq...)
	t.AddRow("origin load right after the change", spike...)
	t.AddRow(fmt.Sprintf("origin load over its first %v", remapWindow), spikeWin...)
	t.AddNote("origin load is relative to before the change: a moved key misses once, then is cached on its new backend")
	t.AddNote("ring_hash's ring has about minRingSize entries in all, so a new backend takes entries from every old one (103 each to 94) and their keys move between old backends too")
	notes(t, policies)
	t.AddNote("pickwise_ring_hash (ring, bounded 1.25) here: each key is placed with no calls in flight, so no backend is over its cap and keys map as in the unbounded ring")
	out.Table = t
	return out, nil
}

// newClient builds one client's instance of p over the backends ids, outside
// any Run, for questions a single pick answers without load (where does this
// key go?). The instance has its own event loop, which never runs, and a
// source seeded with seed. The caller closes it.
func newClient(p Policy, seed uint64, backends []Backend, ids []int) (instance, error) {
	ins, err := newClients(p, seed, backends, ids, 1)
	if err != nil {
		return nil, err
	}
	return ins[0], nil
}

// newClients builds n clients' instances of p as Execute does, in client
// order and sharing one environment, and gives each the backends ids. The
// caller closes them.
func newClients(p Policy, seed uint64, backends []Backend, ids []int, n int) ([]instance, error) {
	e := &env{loop: &Loop{}, rand: rand.New(rand.NewPCG(seed, seed^0xc1)), seed: seed, backends: backends}
	ins := make([]instance, 0, n)
	for range n {
		in, err := p.newInstance(e)
		if err == nil {
			ins = append(ins, in)
			err = in.setBackends(ids)
		}
		if err != nil {
			for _, in := range ins {
				in.close()
			}
			return nil, fmt.Errorf("%s: %w", p.Name, err)
		}
	}
	return ins, nil
}

// pickKey asks in where key goes and ends the call at once, so that no
// load is left behind.
func pickKey(in instance, key uint64) (int, error) {
	id, done, err := in.pick(&Request{Key: key, HasKey: true})
	if err != nil {
		return -1, err
	}
	done(nil, nil)
	return id, nil
}

// backendIDs returns the backend ids 0 to n-1.
func backendIDs(n int) []int {
	ids := make([]int, n)
	for i := range ids {
		ids[i] = i
	}
	return ids
}
