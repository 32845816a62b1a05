package sim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"
)

func init() {
	register(Scenario{Name: "hot-key", Run: func(s Scale) (*Table, error) {
		r, err := HotKey(s)
		if err != nil {
			return nil, err
		}
		return r.Table, nil
	}})
}

// HotKeyResult holds the hot-key scenario's numbers per policy, in column
// order.
type HotKeyResult struct {
	Policies []string
	// MaxOverMean is the busiest backend's request count over the mean;
	// MaxOverMedian over the median backend's, as operators see it.
	MaxOverMean, MaxOverMedian []float64
	// FirstChoice is the share of requests placed on the backend their key
	// maps to first (where an idle client of the same policy sends it).
	FirstChoice []float64
	// MaxUtilization is the busiest backend's utilization; P99 is the
	// 99th-percentile latency.
	MaxUtilization []float64
	P99            []time.Duration
	// Failed counts requests that failed (none should: every backend is
	// healthy).
	Failed []int
	// HottestKey is the most popular key's share of requests, the same in
	// every column.
	HottestKey float64
	Table      *Table
}

// hotKeySkew is the Zipf exponent of key popularity in the hash scenarios:
// s = 1.1 over 10,000 keys gives the hottest key about 15% of requests.
const hotKeySkew = 1.1

// HotKey: 10 backends, 2,000 requests per second whose keys follow a Zipf
// law (s = 1.1 over 10,000 keys). Hashing balances key space, not traffic:
// the backend that owns the hottest key gets its 15% on top of a tenth of
// the rest, at least 2.3 times the mean, however good the hash. Bounded-load
// hashing spills the excess to the next backends in the key's order.
func HotKey(scale Scale) (*HotKeyResult, error) {
	const n, keys, rate = 10, 10_000, 2000
	backends := make([]Backend, n)
	for i := range backends {
		// 7 servers of 10 ms (10.5 ms on average): 670 rps each, so the
		// fleet runs at 30% and only the backend with the hottest key comes
		// near its capacity.
		backends[i] = Backend{Servers: 7, Service: LogNormal(10*time.Millisecond, 0.3)}
	}
	run := Run{Seed: 5, Backends: backends, Rate: rate, Requests: 200_000}
	if scale == Reduced {
		run.Requests = 40_000
	}
	// Load decides placement under bounded load, so every table has a
	// bounded column here.
	policies := append(hashPolicies(), boundedRingHash("ring", "maglev", "rendezvous")...)
	out := &HotKeyResult{Policies: columns(policies), HottestKey: zipfWeights(hotKeySkew, keys)[0]}
	for _, p := range policies {
		// The first choice of a key is where an idle client of the same
		// policy sends it: for plain hashing every request, for bounded
		// load all but the spilled ones.
		probe, err := newClient(p, 7, backends, backendIDs(n))
		if err != nil {
			return nil, err
		}
		first := map[uint64]int{}
		var onFirst, placed int
		var probeErr error
		r := run
		// A fresh key stream per policy, so every column sees the same
		// sequence of keys.
		r.Key = zipfKeys(run.Seed, hotKeySkew, keys)
		r.OnPick = func(_ time.Duration, req *Request, backend int, _ time.Duration) {
			want, ok := first[req.Key]
			if !ok {
				var err error
				if want, err = pickKey(probe, req.Key); err != nil {
					probeErr = err
				}
				first[req.Key] = want
			}
			placed++
			if backend == want {
				onFirst++
			}
		}
		res, err := r.Execute(p)
		probe.close()
		if err != nil {
			return nil, err
		}
		if probeErr != nil {
			return nil, fmt.Errorf("%s: first choice: %w", p.Name, probeErr)
		}
		maxPicks, placedAll := slices.Max(res.Picks), 0
		for _, k := range res.Picks {
			placedAll += k
		}
		mean := float64(placedAll) / float64(n)
		out.MaxOverMean = append(out.MaxOverMean, float64(maxPicks)/mean)
		out.MaxOverMedian = append(out.MaxOverMedian, float64(maxPicks)/medianCount(res.Picks))
		out.FirstChoice = append(out.FirstChoice, float64(onFirst)/float64(max(placed, 1)))
		out.MaxUtilization = append(out.MaxUtilization, slices.Max(res.Utilization))
		out.P99 = append(out.P99, res.Quantile(0.99))
		out.Failed = append(out.Failed, res.Failed)
	}

	t := &Table{
		Title: fmt.Sprintf("Hot key: %d backends, %s rps, %s Zipf(s=%.1f) keys; the hottest key is %s of requests",
			n, withCommas(rate), withCommas(keys), hotKeySkew, Pct(out.HottestKey)),
		Columns: out.Policies,
	}
	maxMean, maxMedian, firstChoice := make([]string, len(policies)), make([]string, len(policies)), make([]string, len(policies))
	util, p99 := make([]string, len(policies)), make([]string, len(policies))
	for i := range policies {
		maxMean[i], maxMedian[i] = fmt.Sprintf("%.2f", out.MaxOverMean[i]), fmt.Sprintf("%.2f", out.MaxOverMedian[i])
		firstChoice[i], util[i], p99[i] = Pct(out.FirstChoice[i]), Pct(out.MaxUtilization[i]), Ms(out.P99[i])
	}
	t.AddRow("busiest backend's requests / mean", maxMean...)
	t.AddRow("busiest backend's requests / median", maxMedian...)
	t.AddRow("requests on their key's first choice", firstChoice...)
	t.AddRow("busiest backend's utilization (fleet: 30%)", util...)
	t.AddRow("p99 latency (service: 10ms median)", p99...)
	notes(t, policies)
	out.Table = t
	return out, nil
}

// keyID turns a key's popularity rank into its 64-bit identity, as a hash
// of the key's name would: with ranks as identities, key mod n would put
// the ten hottest keys on ten different backends. mix64 is a bijection, so
// distinct ranks stay distinct keys.
func keyID(rank int) uint64 { return mix64(uint64(rank)) }

// zipfKeys returns a Run.Key drawing key ranks below keys from a Zipf law
// with exponent s, from its own source seeded with seed rather than the
// run's, whose draws depend on the policy; each call starts a new sequence.
func zipfKeys(seed uint64, s float64, keys int) func(*rand.Rand) uint64 {
	z := rand.NewZipf(rand.New(rand.NewPCG(seed, seed^0x21bf)), s, 1, uint64(keys-1))
	return func(*rand.Rand) uint64 { return keyID(int(z.Uint64())) }
}

// zipfWeights is the popularity of each rank under zipfKeys' law:
// proportional to (1+rank)^-s, summing to 1.
func zipfWeights(s float64, keys int) []float64 {
	w := make([]float64, keys)
	var sum float64
	for k := range w {
		w[k] = math.Pow(float64(k+1), -s)
		sum += w[k]
	}
	for k := range w {
		w[k] /= sum
	}
	return w
}

// medianCount returns the median of counts.
func medianCount(counts []int) float64 {
	s := slices.Sorted(slices.Values(counts))
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return float64(s[len(s)/2])
	}
	return float64(s[len(s)/2-1]+s[len(s)/2]) / 2
}

// withCommas formats n with comma separators, as the tables' titles do.
func withCommas(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
