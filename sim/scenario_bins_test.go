package sim

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

func TestBallsIntoBins(t *testing.T) {
	scenarioTest(t, "balls-into-bins")
	r, err := BallsIntoBins(testScale())
	if err != nil {
		t.Fatal(err)
	}
	logTable(t, "balls-into-bins", r.Table)
	col := func(name string) int { return column(t, r.Policies, name) }
	random, rr, lr, lc, p2c := col("random"), col("round_robin"), col("least_request"), col("least-conn (full scan)"), col("pickwise_p2c")
	i := slices.Index(r.N, 10_000)
	if i < 0 {
		t.Fatalf("sizes %v lack 10,000", r.N)
	}
	// One random choice: about 7 at n = 10,000 (ln n / ln ln n grows
	// slowly; one run's maximum is 6 to 8 with overwhelming probability).
	if m := r.MeanMax[i][random]; m < 5 || m > 10 {
		t.Errorf("random at n = 10,000: max load %.1f, want within [5, 10]", m)
	}
	ranWired := false
	for i, n := range r.N {
		// Two choices: log log n, 3 at these sizes and rarely 4.
		if m := r.WorstMax[i][p2c]; m < 1 || m > 4 {
			t.Errorf("pickwise_p2c at n = %d: max load %d, want within [1, 4]", n, m)
		}
		if m := r.WorstMax[i][lc]; m != 1 {
			t.Errorf("least-conn at n = %d: max load %d, want 1", n, m)
		}
		if m := r.WorstMax[i][rr]; m != 1 && m != -1 {
			t.Errorf("round_robin at n = %d: max load %d, want 1", n, m)
		}
		if m := r.WorstMax[i][rr]; m != -1 {
			ranWired = true
		}
		// grpc-go's least_request is two choices too, with the global
		// random source: a generous bound.
		if m := r.WorstMax[i][lr]; m > 5 {
			t.Errorf("least_request at n = %d: max load %d, want at most 5", n, m)
		}
		if n > 100 && r.MeanMax[i][random] <= r.MeanMax[i][p2c] {
			t.Errorf("n = %d: random's max load %.1f not above pickwise_p2c's %.1f", n, r.MeanMax[i][random], r.MeanMax[i][p2c])
		}
	}
	if !ranWired {
		t.Error("round_robin ran at no size")
	}
}

func TestBallsIntoBinsDeterministic(t *testing.T) {
	for _, p := range []Policy{Random(), Static("pickwise_p2c", "pickwise_p2c", `{}`), bucketLeastConnections()} {
		a, err := binsMax(2000, 5, p)
		if err != nil {
			t.Fatal(err)
		}
		b, err := binsMax(2000, 5, p)
		if err != nil {
			t.Fatal(err)
		}
		if a != b {
			t.Errorf("%s: two runs with the same seed gave max loads %d and %d", p.Name, a, b)
		}
	}
}

// TestBallsIntoBinsPeakEWMAIsP2C backs the table's note that a
// pickwise_peak_ewma column would repeat pickwise_p2c's: with requests that
// never end there is no latency sample, and the two policies place every
// request on the same backend, through the balancer and through the bare
// picker alike.
func TestBallsIntoBinsPeakEWMAIsP2C(t *testing.T) {
	for _, tc := range []struct {
		n         int
		p2c, ewma Policy
	}{
		{100, GRPC("pickwise_p2c", "pickwise_p2c", `{}`), GRPC("pickwise_peak_ewma", "pickwise_peak_ewma", `{}`)},
		{5000, Static("pickwise_p2c", "pickwise_p2c", `{}`), Static("pickwise_peak_ewma", "pickwise_peak_ewma", `{}`)},
	} {
		run := Run{
			Seed:       uint64(tc.n),
			Backends:   make([]Backend, tc.n),
			Requests:   tc.n,
			Rate:       float64(tc.n),
			StreamLife: func(*rand.Rand) time.Duration { return 24 * time.Hour },
		}
		a, err := run.Execute(tc.p2c)
		if err != nil {
			t.Fatal(err)
		}
		b, err := run.Execute(tc.ewma)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(a.Picks, b.Picks) {
			t.Errorf("n = %d: pickwise_p2c and pickwise_peak_ewma placed requests differently", tc.n)
		}
	}
}

// TestBucketLeastConnections checks that the bucketed baseline makes the
// scan's decision: always a backend with the fewest requests in flight
// among those listed, every tied backend about equally often, and never a
// backend that was removed, while picks and completions interleave.
func TestBucketLeastConnections(t *testing.T) {
	const n = 6
	e := &env{rand: rand.New(rand.NewPCG(1, 2)), backends: make([]Backend, n)}
	in, err := bucketLeastConnections().newInstance(e)
	if err != nil {
		t.Fatal(err)
	}
	listed := []int{0, 1, 2, 3, 4, 5}
	if err := in.setBackends(listed); err != nil {
		t.Fatal(err)
	}
	ops := rand.New(rand.NewPCG(3, 4))
	inflight := make([]int, n)
	var open []finishFunc
	var openIDs []int
	chosen := make([]int, n)
	for step := range 20_000 {
		if step == 10_000 {
			// Drop backend 5 with requests still in flight to it.
			listed = listed[:5]
			if err := in.setBackends(listed); err != nil {
				t.Fatal(err)
			}
		}
		if len(open) > 0 && ops.IntN(2) == 0 {
			k := ops.IntN(len(open))
			open[k](nil, nil)
			inflight[openIDs[k]]--
			open = slices.Delete(open, k, k+1)
			openIDs = slices.Delete(openIDs, k, k+1)
			continue
		}
		least := -1
		for _, id := range listed {
			if least < 0 || inflight[id] < least {
				least = inflight[id]
			}
		}
		id, done, err := in.pick(nil)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(listed, id) {
			t.Fatalf("step %d: picked backend %d, not in %v", step, id, listed)
		}
		if inflight[id] != least {
			t.Fatalf("step %d: picked backend %d with %d in flight, least is %d (%v)", step, id, inflight[id], least, inflight)
		}
		inflight[id]++
		chosen[id]++
		open, openIDs = append(open, done), append(openIDs, id)
	}
	// By symmetry backends 0-4 are chosen equally often in expectation.
	for id := range 5 {
		if chosen[id] < chosen[0]*8/10 || chosen[id] > chosen[0]*12/10 {
			t.Errorf("picks per backend %v: backends 0-4 should be about even", chosen)
			break
		}
	}
}
