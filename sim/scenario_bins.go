package sim

import (
	"fmt"
	"math/rand/v2"
	"time"

	v3orcapb "github.com/cncf/xds/go/xds/data/orca/v3"
)

func init() {
	register(Scenario{Name: "balls-into-bins", Run: func(s Scale) (*Table, error) {
		r, err := BallsIntoBins(s)
		if err != nil {
			return nil, err
		}
		return r.Table, nil
	}})
}

// BallsIntoBinsResult holds the balls-into-bins scenario's numbers: for
// each fleet size N[i], per policy j (column order), the fullest backend's
// load.
type BallsIntoBinsResult struct {
	Policies []string
	N        []int
	// Runs[i] is how many runs with different seeds were made at N[i].
	Runs []int
	// MeanMax[i][j] is the fullest backend's load averaged over the runs,
	// WorstMax[i][j] the largest over the runs. Both are -1 where the
	// policy was not run at that size (see Table's notes).
	MeanMax  [][]float64
	WorstMax [][]int
	Table    *Table
}

// Above these sizes a column falls back to a cheaper way to run the same
// decision, or to n/a.
const (
	// binsWiredMax is the largest fleet built through grpc's balancer API.
	// grpc-go's endpointsharding publishes a new picker, built over every
	// child, each time an endpoint turns READY, so setting up n endpoints
	// costs its policies O(n²): measured on a 2-core machine, about 0.1 s
	// for round_robin and 0.4 s for least_request at n = 1,000, 16 s and
	// 75 s at 10,000 (internal/scale's BenchmarkBringUp). pickwise's
	// balancers come up in O(n), but above this size the peers cannot
	// run, and pickwise_p2c's column runs its picker directly so that
	// every column above it is placed the same way.
	binsWiredMax = 1000
	// binsScanMax is the largest fleet the full-scan least-connections
	// baseline runs on: n placements scanning n backends cost n².
	binsScanMax = 1000
)

// binsNote marks a cell not run; the table's notes say why.
const binsNote = "n/a (setup O(n²))"

// BallsIntoBins places n requests on n backends and never lets one finish
// (each is a stream that outlives the run), so the fullest backend's load
// is the classic balls-into-bins maximum: about ln n / ln ln n for one
// random choice, ln ln n / ln 2 + O(1) for the less loaded of two
// (Azar, Broder, Karlin and Upfal; Mitzenmacher). Round robin and full
// least connections place exactly one request per backend.
//
// Each size is run several times with different seeds, many at n = 10,
// where one run's maximum is noisy, down to 3 at 100,000, where it varies
// little; the cells show the mean of the per-run maximum. Full scale goes
// to n = 100,000, reduced to 10,000.
func BallsIntoBins(scale Scale) (*BallsIntoBinsResult, error) {
	sizes := []int{10, 100, 1000, 10_000, 100_000}
	runs := func(n int) int { return max(3, 3000/n) }
	if scale == Reduced {
		sizes = sizes[:4]
		runs = func(n int) int { return max(1, 300/n) }
	}
	// The column layout is fixed; what runs in a column may depend on n.
	header := []string{"random", "round_robin", "least_request", "least-conn (full scan)", "pickwise_p2c"}
	policiesFor := func(n int) []*Policy {
		wired := func(p Policy) *Policy {
			if n > binsWiredMax {
				return nil
			}
			return &p
		}
		lc := LeastConnections()
		if n > binsScanMax {
			lc = bucketLeastConnections()
		}
		p2c := GRPC("pickwise_p2c", "pickwise_p2c", `{}`)
		if n > binsWiredMax {
			p2c = Static("pickwise_p2c", "pickwise_p2c", `{}`)
		}
		rnd := Random()
		return []*Policy{
			&rnd,
			wired(GRPC("round_robin", "round_robin", `{}`)),
			wired(GRPC("least_request", "least_request_experimental", `{}`)),
			&lc,
			&p2c,
		}
	}

	out := &BallsIntoBinsResult{Policies: header}
	t := &Table{
		Title:   "Balls into bins: n requests on n backends, none finishing; the fullest backend's load (mean load 1)",
		Columns: header,
	}
	t.AddNote("cells are the fullest backend's load, averaged over the runs")
	// A pickwise_peak_ewma column would repeat pickwise_p2c's exactly;
	// TestBallsIntoBinsPeakEWMAIsP2C checks that it does.
	t.AddNote("pickwise_peak_ewma: no column, it would repeat pickwise_p2c's: no request ends, so no backend ever has a latency sample, and its cost is then the pending penalty plus the requests in flight, which orders backends as pickwise_p2c's in-flight count does; with the same seed it makes the same picks")
	for _, n := range sizes {
		policies := policiesFor(n)
		k := runs(n)
		meanMax, worstMax := make([]float64, len(policies)), make([]int, len(policies))
		cells := make([]string, len(policies))
		for j, p := range policies {
			if p == nil {
				meanMax[j], worstMax[j], cells[j] = -1, -1, binsNote
				continue
			}
			sum := 0
			for r := range k {
				m, err := binsMax(n, uint64(n)<<16|uint64(r), *p)
				if err != nil {
					return nil, err
				}
				sum += m
				worstMax[j] = max(worstMax[j], m)
			}
			meanMax[j] = float64(sum) / float64(k)
			cells[j] = fmt.Sprintf("%.1f", meanMax[j])
			t.AddNote(p.Note)
		}
		out.N = append(out.N, n)
		out.Runs = append(out.Runs, k)
		out.MeanMax = append(out.MeanMax, meanMax)
		out.WorstMax = append(out.WorstMax, worstMax)
		t.AddRow(fmt.Sprintf("n = %s (%s)", binsCount(n), binsPlural(k, "run")), cells...)
	}
	if sizes[len(sizes)-1] > binsWiredMax {
		t.AddNote(fmt.Sprintf("round_robin, least_request: %s above n = %s: grpc-go's endpointsharding rebuilds its picker over every endpoint each time one turns READY, so building the balancer for n endpoints costs O(n²)",
			binsNote, binsCount(binsWiredMax)))
		t.AddNote(fmt.Sprintf("pickwise_p2c: above n = %s, the policy's real picker built directly over the backends (sim.Static), as the peers cannot be wired there", binsCount(binsWiredMax)))
		t.AddNote(fmt.Sprintf("least-conn: above n = %s, the same choice (uniform among the backends with the fewest in flight) made from per-count buckets in O(1), since n scans of n backends cost n²", binsCount(binsScanMax)))
	}
	out.Table = t
	return out, nil
}

// binsMax places n streams on n backends with p and returns the most any
// backend received.
func binsMax(n int, seed uint64, p Policy) (int, error) {
	run := Run{
		Seed:     seed,
		Backends: make([]Backend, n),
		Requests: n,
		// Arrivals take about a second; every stream outlives them, so
		// nothing leaves before the last placement.
		Rate:       float64(n),
		StreamLife: func(*rand.Rand) time.Duration { return 24 * time.Hour },
	}
	res, err := run.Execute(p)
	if err != nil {
		return 0, err
	}
	if res.Failed > 0 {
		return 0, fmt.Errorf("%s: %d of %d placements failed", p.Name, res.Failed, n)
	}
	most := 0
	for _, k := range res.Picks {
		most = max(most, k)
	}
	return most, nil
}

func binsCount(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

func binsPlural(k int, noun string) string {
	if k == 1 {
		return "1 " + noun
	}
	return binsCount(k) + " " + noun + "s"
}

// bucketLeastConnections is LeastConnections' decision, a uniformly random
// backend among those with the fewest requests in flight, at O(1) per pick
// instead of a scan of every backend: backends sit in buckets by in-flight
// count, so the least loaded are the first non-empty bucket. Its random
// draws differ from the scan's, its distribution of choices does not.
func bucketLeastConnections() Policy {
	return Policy{Name: "least-conn (full scan)", newInstance: func(e *env) (instance, error) {
		return &bucketInstance{env: e}, nil
	}}
}

type bucketInstance struct {
	env *env
	// count[id] is backend id's in-flight requests; pos[id] its index in
	// buckets[count[id]], or -1 when it is not in the list.
	count, pos []int
	buckets    [][]int
	least      int // no non-empty bucket below this one
}

func (in *bucketInstance) setBackends(ids []int) error {
	if in.count == nil {
		in.count = make([]int, len(in.env.backends))
		in.pos = make([]int, len(in.env.backends))
	}
	for i := range in.pos {
		in.pos[i] = -1
	}
	for c := range in.buckets {
		in.buckets[c] = in.buckets[c][:0]
	}
	in.least = 0
	for _, id := range ids {
		in.insert(id)
	}
	return nil
}

func (in *bucketInstance) close() {}

func (in *bucketInstance) insert(id int) {
	c := in.count[id]
	for len(in.buckets) <= c {
		in.buckets = append(in.buckets, nil)
	}
	in.pos[id] = len(in.buckets[c])
	in.buckets[c] = append(in.buckets[c], id)
	in.least = min(in.least, c)
}

func (in *bucketInstance) remove(id int) {
	b := in.buckets[in.count[id]]
	i, last := in.pos[id], b[len(b)-1]
	b[i], in.pos[last] = last, i
	in.buckets[in.count[id]] = b[:len(b)-1]
	in.pos[id] = -1
}

// move changes id's in-flight count by delta, keeping it in the right
// bucket if it is in the list.
func (in *bucketInstance) move(id, delta int) {
	listed := in.pos[id] >= 0
	if listed {
		in.remove(id)
	}
	in.count[id] += delta
	if listed {
		in.insert(id)
	}
}

func (in *bucketInstance) pick(*Request) (int, finishFunc, error) {
	for in.least < len(in.buckets) && len(in.buckets[in.least]) == 0 {
		in.least++
	}
	if in.least == len(in.buckets) {
		return -1, nil, errNoBackends
	}
	b := in.buckets[in.least]
	id := b[in.env.rand.IntN(len(b))]
	in.move(id, 1)
	return id, func(error, *v3orcapb.OrcaLoadReport) { in.move(id, -1) }, nil
}
