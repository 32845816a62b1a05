package orcawrr_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"testing"
	"time"

	v3orcapb "github.com/cncf/xds/go/xds/data/orca/v3"
	"github.com/pickwise/pickwise/balancer/orcawrr"
	"github.com/pickwise/pickwise/internal/engine"
	"github.com/pickwise/pickwise/internal/testkit"
	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/serviceconfig"
	"google.golang.org/grpc/status"
)

// report is a backend's load report: qps calls a second at utilization
// util, with eps errors a second.
func report(qps, util, eps float64) *v3orcapb.OrcaLoadReport {
	return &v3orcapb.OrcaLoadReport{RpsFractional: qps, CpuUtilization: util, Eps: eps}
}

// serve makes n picks, each answered with the report its backend gives,
// then lets the virtual clock run for step so that a weight update folds
// the reports in. It returns the picks per address.
func serve(h *testkit.Harness, n int, step time.Duration, reports map[string]*v3orcapb.OrcaLoadReport) map[string]int {
	h.T.Helper()
	got := map[string]int{}
	for i := 0; i < n; i++ {
		a, done := h.Pick()
		got[a]++
		if done != nil {
			var load any
			if r := reports[a]; r != nil {
				load = r
			}
			done(balancer.DoneInfo{ServerLoad: load, BytesSent: true, BytesReceived: true})
		}
	}
	h.Clock.Advance(step)
	return got
}

// shareOf is a's share of the picks in got.
func shareOf(got map[string]int, a string) float64 {
	total := 0
	for _, n := range got {
		total += n
	}
	return float64(got[a]) / float64(total)
}

func near(t *testing.T, what string, got, want, tol float64) {
	t.Helper()
	if math.Abs(got-want) > tol {
		t.Errorf("%s = %.3f, want %.3f ± %.3f", what, got, want, tol)
	}
}

func TestSharesFollowReportedCapacity(t *testing.T) {
	h := testkit.NewHarness(t, orcawrr.Name, `{"blackoutPeriod": "0s"}`)
	as := testkit.Addrs(3)
	h.Start(as...)
	// Capacities 4:2:1: the same qps at utilizations 0.1, 0.2 and 0.4.
	reports := map[string]*v3orcapb.OrcaLoadReport{
		as[0]: report(100, 0.1, 0), as[1]: report(100, 0.2, 0), as[2]: report(100, 0.4, 0),
	}
	first := serve(h, 700, time.Second, reports)
	// Before any weight update every endpoint had the same share.
	near(t, "share before the first update", shareOf(first, as[2]), 1.0/3, 0.01)
	got := serve(h, 700, time.Second, reports)
	near(t, "share of capacity 4", shareOf(got, as[0]), 4.0/7, 0.01)
	near(t, "share of capacity 2", shareOf(got, as[1]), 2.0/7, 0.01)
	near(t, "share of capacity 1", shareOf(got, as[2]), 1.0/7, 0.01)
}

func TestErrorsLowerTheWeight(t *testing.T) {
	h := testkit.NewHarness(t, orcawrr.Name, `{"blackoutPeriod": "0s", "errorUtilizationPenalty": 1}`)
	as := testkit.Addrs(2)
	h.Start(as...)
	// Same qps and utilization, but the second fails half its calls:
	// weight = 100 / (0.5 + 0.5) against 100 / 0.5.
	reports := map[string]*v3orcapb.OrcaLoadReport{as[0]: report(100, 0.5, 0), as[1]: report(100, 0.5, 50)}
	serve(h, 300, time.Second, reports)
	got := serve(h, 300, time.Second, reports)
	near(t, "share of the failing backend", shareOf(got, as[1]), 1.0/3, 0.01)
}

// blackHoleShare runs three endpoints that report weights 100, 200 and 400
// while a fourth fails every call and reports utilization 0, which A58
// discards: by its reports it is an endpoint without a weight, at the
// median. It returns the fourth's share after a few updates.
func blackHoleShare(t *testing.T, cfg string) float64 {
	h := testkit.NewHarness(t, orcawrr.Name, cfg)
	as := testkit.Addrs(4)
	h.Start(as...)
	reports := map[string]*v3orcapb.OrcaLoadReport{
		as[0]: report(100, 1, 0), as[1]: report(100, 0.5, 0), as[2]: report(100, 0.25, 0), as[3]: report(100, 0, 100),
	}
	var got map[string]int
	for i := 0; i < 5; i++ {
		got = map[string]int{}
		for j := 0; j < 900; j++ {
			a, done := h.Pick()
			got[a]++
			var err error
			if a == as[3] {
				err = status.Error(codes.Unavailable, "down")
			}
			info := testkit.Outcome(err)
			info.ServerLoad = reports[a]
			done(info)
		}
		h.Clock.Advance(time.Second)
	}
	return shareOf(got, as[3])
}

func TestFailurePenaltyStarvesBlackHoleThatReportsNothingUseful(t *testing.T) {
	if s := blackHoleShare(t, `{"blackoutPeriod": "0s"}`); s > 0.01 {
		t.Errorf("black hole's share with the failure penalty = %.2f%%, want under 1%%", 100*s)
	}
	// Without it, its discarded reports leave it at the median: 200 of 900.
	if s := blackHoleShare(t, `{"blackoutPeriod": "0s", "failurePenalty": {"enabled": false}}`); math.Abs(s-200.0/900) > 0.01 {
		t.Errorf("black hole's share without the failure penalty = %.1f%%, want the median's %.1f%%", 100*s, 100*200.0/900)
	}
}

func TestBlackoutHoldsNewReporterAtMedian(t *testing.T) {
	h := testkit.NewHarness(t, orcawrr.Name, `{"blackoutPeriod": "5s", "weightHalfLife": "0s"}`)
	as := testkit.Addrs(4)
	h.Start(as...)
	reports := map[string]*v3orcapb.OrcaLoadReport{
		as[0]: report(100, 1, 0), as[1]: report(100, 0.5, 0), as[2]: report(100, 0.25, 0), // weights 100, 200, 400
	}
	for i := 0; i < 7; i++ {
		serve(h, 70, time.Second, reports)
	}
	// The fourth now reports a weight of 1000; for 5s it is held at the
	// median of the others (200), which is also its share before it
	// reported at all.
	reports[as[3]] = report(100, 0.1, 0)
	got := serve(h, 900, time.Second, reports)
	near(t, "silent endpoint's share (median weight)", shareOf(got, as[3]), 200.0/900, 0.01)
	for i := 0; i < 3; i++ {
		got = serve(h, 900, time.Second, reports)
	}
	near(t, "share during blackout", shareOf(got, as[3]), 200.0/900, 0.01)
	for i := 0; i < 3; i++ {
		got = serve(h, 1700, time.Second, reports)
	}
	near(t, "share after blackout", shareOf(got, as[3]), 1000.0/1700, 0.01)
	if n := h.Metrics.Total("pickwise.orca_wrr.endpoint_weight_not_yet_usable"); n == 0 {
		t.Error("not-yet-usable metric never counted the endpoint in blackout")
	}
	if l := h.Metrics.Label("pickwise.orca_wrr.endpoint_weight_not_yet_usable"); l != "test:///harness" {
		t.Errorf("metric target label = %q, want test:///harness", l)
	}
}

func TestStaleWeightDroppedToMedian(t *testing.T) {
	h := testkit.NewHarness(t, orcawrr.Name, `{"blackoutPeriod": "0s", "weightExpirationPeriod": "10s", "weightHalfLife": "0s"}`)
	as := testkit.Addrs(3)
	h.Start(as...)
	reports := map[string]*v3orcapb.OrcaLoadReport{
		as[0]: report(100, 1, 0), as[1]: report(100, 0.5, 0), as[2]: report(100, 0.1, 0), // 100, 200, 1000
	}
	serve(h, 130, time.Second, reports)
	got := serve(h, 1300, time.Second, reports)
	near(t, "reporting share", shareOf(got, as[2]), 1000.0/1300, 0.01)
	// Its reports stop; within the expiration it keeps its weight, after
	// it falls to the median of the others.
	delete(reports, as[2])
	for i := 0; i < 11; i++ {
		got = serve(h, 450, time.Second, reports)
	}
	// The median of the two usable weights, 100 and 200, is 150.
	near(t, "stale share", shareOf(got, as[2]), 150.0/450, 0.01)
	if n := h.Metrics.Total("pickwise.orca_wrr.endpoint_weight_stale"); n == 0 {
		t.Error("stale metric never counted the expired weight")
	}
}

func TestFewerThanTwoWeightsIsRoundRobin(t *testing.T) {
	h := testkit.NewHarness(t, orcawrr.Name, `{"blackoutPeriod": "0s"}`)
	as := testkit.Addrs(3)
	h.Start(as...)
	reports := map[string]*v3orcapb.OrcaLoadReport{as[0]: report(100, 0.01, 0)}
	serve(h, 300, time.Second, reports)
	got := serve(h, 300, time.Second, reports)
	for _, a := range as {
		near(t, "share with one usable weight", shareOf(got, a), 1.0/3, 0.01)
	}
	if n := h.Metrics.Total("pickwise.orca_wrr.rr_fallback"); n < 2 {
		t.Errorf("round-robin fallback counted %v times, want one per update", n)
	}
}

func TestBadReportsIgnoredAndCounted(t *testing.T) {
	h := testkit.NewHarness(t, orcawrr.Name, `{"blackoutPeriod": "0s", "weightHalfLife": "0s"}`)
	as := testkit.Addrs(2)
	h.Start(as...)
	good := map[string]*v3orcapb.OrcaLoadReport{as[0]: report(100, 0.25, 0), as[1]: report(100, 0.75, 0)}
	serve(h, 400, time.Second, good)
	before := serve(h, 400, time.Second, good)
	near(t, "share with good reports", shareOf(before, as[0]), 0.75, 0.01)
	// Now the first sends garbage: NaN, infinite, negative, zero qps, zero
	// utilization under load. Its weight must stay as it was.
	bad := []*v3orcapb.OrcaLoadReport{
		report(math.NaN(), 0.5, 0), report(100, math.Inf(1), 0), report(-1, 0.5, 0),
		report(0, 0.5, 0), report(100, 0, 0), report(100, 0.5, math.NaN()),
	}
	for _, r := range bad {
		serve(h, 400, time.Second, map[string]*v3orcapb.OrcaLoadReport{as[0]: r, as[1]: good[as[1]]})
	}
	after := serve(h, 400, time.Second, good)
	near(t, "share after bad reports", shareOf(after, as[0]), 0.75, 0.01)
	if n := h.Metrics.Total("pickwise.orca_wrr.bad_reports"); n < float64(len(bad)) {
		t.Errorf("bad_reports = %v, want at least %d", n, len(bad))
	}
}

func TestScheduleIsSmooth(t *testing.T) {
	h := testkit.NewHarness(t, orcawrr.Name, `{"blackoutPeriod": "0s", "weightHalfLife": "0s"}`)
	as := testkit.Addrs(3)
	h.Start(as...)
	// Weights 5:1:1.
	reports := map[string]*v3orcapb.OrcaLoadReport{as[0]: report(100, 0.2, 0), as[1]: report(100, 1, 0), as[2]: report(100, 1, 0)}
	serve(h, 7, time.Second, reports)
	serve(h, 7, time.Second, reports)
	run, longest := 0, 0
	for i := 0; i < 700; i++ {
		a, done := h.Pick()
		done(balancer.DoneInfo{})
		if a == as[0] {
			run++
			longest = max(longest, run)
		} else {
			run = 0
		}
	}
	// Five of every seven calls go to the first; a smooth order never
	// gives it more than three in a row (ideal: 5 spread over 2 gaps).
	if longest > 3 {
		t.Errorf("longest run on the heaviest endpoint = %d calls, want at most 3", longest)
	}
}

func TestPickersStartAtRandomPositions(t *testing.T) {
	// Clients with identical weights would move through the backends in
	// step, all sending their first calls to the same one, if every
	// schedule started at position 0. Each weight update builds a new
	// picker; their first picks must spread.
	h := testkit.NewHarness(t, orcawrr.Name, `{}`)
	h.Start(testkit.Addrs(8)...)
	firsts := map[string]bool{}
	for i := 0; i < 8; i++ {
		h.Clock.Advance(time.Second)
		a, _ := h.Pick()
		firsts[a] = true
	}
	if len(firsts) < 3 {
		t.Errorf("8 pickers started on only %d distinct backends, want a random spread", len(firsts))
	}
}

func TestSlowStartRampsNewcomer(t *testing.T) {
	// By time alone: calls here end with no time passed, which shows the
	// newcomer as fast as its peers and would end its ramp
	// (TestSlowStartEndsOnEvidence).
	h := testkit.NewHarness(t, orcawrr.Name, `{"blackoutPeriod": "0s", "slowStart": {"window": "10s", "minWeightPercent": 10, "timeOnly": true}}`)
	as := testkit.Addrs(3)
	h.Start(as[:2]...)
	reports := map[string]*v3orcapb.OrcaLoadReport{as[0]: report(100, 0.5, 0), as[1]: report(100, 0.5, 0), as[2]: report(100, 0.5, 0)}
	serve(h, 200, time.Second, reports)
	if err := h.Update(testkit.Endpoints(as)...); err != nil {
		t.Fatal(err)
	}
	h.Ready(as[2])
	serve(h, 300, time.Second, reports)
	early := serve(h, 300, time.Second, reports)
	for i := 0; i < 10; i++ {
		serve(h, 300, time.Second, reports)
	}
	late := serve(h, 300, time.Second, reports)
	if s := shareOf(early, as[2]); s > 0.2 {
		t.Errorf("newcomer's share 2s into a 10s ramp = %.2f, want well below its fair 0.33", s)
	}
	near(t, "newcomer's share after the ramp", shareOf(late, as[2]), 1.0/3, 0.01)
}

// TestSlowStartEndsOnEvidence: a newcomer whose answers are as fast as
// its peers' proves warm and gets its full weight at the next picker,
// long before its window is over; one whose answers are ten times slower,
// as a cold process's are, keeps its ramp, and so does a fast one whose
// ramp goes by time alone. Calls go one at a time, each answered after its
// endpoint's latency on the test's clock.
func TestSlowStartEndsOnEvidence(t *testing.T) {
	const peerLatency = 2 * time.Millisecond
	for _, tc := range []struct {
		name      string
		slowStart string
		latency   time.Duration // the newcomer's
		proved    bool
	}{
		{"as fast as its peers", `{"window": "30s"}`, peerLatency, true},
		{"ten times slower", `{"window": "30s"}`, 10 * peerLatency, false},
		{"fast, timeOnly", `{"window": "30s", "timeOnly": true}`, peerLatency, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := testkit.NewHarness(t, orcawrr.Name, `{"blackoutPeriod": "0s", "slowStart": `+tc.slowStart+`}`)
			as := testkit.Addrs(3)
			h.Start(as[:2]...)
			r := report(100, 0.5, 0)
			serve(h, 200, time.Second, map[string]*v3orcapb.OrcaLoadReport{as[0]: r, as[1]: r})
			if err := h.Update(testkit.Endpoints(as)...); err != nil {
				t.Fatal(err)
			}
			h.Ready(as[2])
			// calls makes n calls and returns the newcomer's share.
			calls := func(n int) float64 {
				got := 0
				for range n {
					a, done := h.Pick()
					if a == as[2] {
						got++
						h.Clock.Advance(tc.latency)
					} else {
						h.Clock.Advance(peerLatency)
					}
					done(balancer.DoneInfo{ServerLoad: r, BytesSent: true, BytesReceived: true})
				}
				return float64(got) / float64(n)
			}
			calls(1000) // 2 s or more of answers
			s := calls(1000)
			switch {
			case tc.proved && s < 0.3:
				t.Errorf("newcomer's share after its answers = %.2f, want its fair 0.33", s)
			case !tc.proved && s > 0.15:
				// At most about 5 s into a 30 s ramp: a factor under 0.2,
				// a share under 0.2/2.2.
				t.Errorf("newcomer's share = %.2f, want its ramped share, under 0.15", s)
			}
		})
	}
}

// TestSlowStartRelief: at its ramped weight a newcomer's own slots in
// the schedule come about once in a hundred picks; the picker gives it
// its first call sooner, at the pace at which two random choices would
// draw it. When its peers are overloaded (their calls wait in queues) the
// answer to that call ends its ramp; with peers as fast, it keeps the
// ramp.
func TestSlowStartRelief(t *testing.T) {
	// Its own slots: 0.1 of a weight against 11, one pick in 111.
	testkit.CheckRampRelief(t, 40, joinTwelfth)
}

// joinTwelfth is a harness of eleven READY endpoints and a twelfth just
// READY, ramping over a 30 s window, and the twelfth's address.
func joinTwelfth(t *testing.T) (*testkit.Harness, string) {
	h := testkit.NewHarness(t, orcawrr.Name, `{"slowStart": {"window": "30s"}}`)
	as := testkit.Addrs(12)
	h.Start(as[:11]...)
	h.Serve()
	if err := h.Update(testkit.Endpoints(as)...); err != nil {
		t.Fatal(err)
	}
	h.Ready(as[11])
	return h, as[11]
}

// TestSlowStartOpeningLends: a client that sends a newcomer many calls
// lends it its opening's five at once, at the pace of two random choices
// (one pick in six over twelve endpoints), so that their answers come
// together, and repays them from its own slots, so that its share over
// the ramp is the same; one that sends it few lends it only the first,
// so that many such clients do not herd onto a process that may be cold.
func TestSlowStartOpeningLends(t *testing.T) {
	for _, tc := range []struct {
		name               string
		gap                time.Duration
		picks              int
		firstMin, firstMax int // of the first 100 picks
		totalMin, totalMax int // of all picks
	}{
		// 10,000 calls a second: lent on a visit every 0.6 ms, within the
		// 5 ms that a factor of 0.1 allows. Its own slots, one pick in
		// 111, give it 9 in 1,000 picks (with the harness's seeded
		// source), of which 4 repay: 10 in all (14 unrepaid, 9 if the
		// first were repaid too).
		{"fast client", 100 * time.Microsecond, 1000, 5, 6, 10, 10},
		// 100 calls a second: the first lent after about 60 ms, and its
		// own slot at most once more.
		{"slow client", 10 * time.Millisecond, 100, 1, 2, 1, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, newcomer := joinTwelfth(t)
			var held []func(balancer.DoneInfo)
			t.Cleanup(func() { testkit.Finish(held, nil) })
			first, total := 0, 0
			for k := range tc.picks {
				a, done := h.Pick()
				held = append(held, done)
				if a == newcomer {
					total++
					if k < 100 {
						first++
					}
				}
				h.Clock.Advance(tc.gap)
			}
			if first < tc.firstMin || first > tc.firstMax {
				t.Errorf("newcomer had %d of the first 100 calls, want %d to %d", first, tc.firstMin, tc.firstMax)
			}
			if total < tc.totalMin || total > tc.totalMax {
				t.Errorf("newcomer had %d of %d calls, want %d to %d", total, tc.picks, tc.totalMin, tc.totalMax)
			}
		})
	}
}

func TestPickAllocatesNothing(t *testing.T) {
	h := testkit.NewHarness(t, orcawrr.Name, `{"blackoutPeriod": "0s"}`)
	as := testkit.Addrs(10)
	h.Start(as...)
	r := report(100, 0.5, 1)
	serve(h, 100, time.Second, map[string]*v3orcapb.OrcaLoadReport{as[0]: r, as[1]: r})
	p := h.CC.State().Picker
	info := balancer.DoneInfo{ServerLoad: r}
	allocs := testing.AllocsPerRun(2000, func() {
		res, err := p.Pick(balancer.PickInfo{})
		if err != nil {
			t.Fatal(err)
		}
		res.Done(info)
	})
	if allocs != 0 {
		t.Errorf("Pick+Done with a report allocates %v times per call, want 0", allocs)
	}
}

func TestOutOfBandStreamsFollowConnectionsAndConfig(t *testing.T) {
	h := testkit.NewHarness(t, orcawrr.Name, `{"enableOobLoadReport": true}`)
	as := testkit.Addrs(3)
	h.Start(as...)
	// With out-of-band reporting, A58 ignores per-call reports: a report
	// in a call's trailer changes nothing.
	_, done := h.Pick()
	done(balancer.DoneInfo{ServerLoad: report(100, 0.01, 0)})
	if n := h.Metrics.Total("pickwise.orca_wrr.bad_reports"); n != 0 {
		t.Errorf("bad reports = %v, want 0", n)
	}
	const method = "/xds.service.orca.v3.OpenRcaService/StreamCoreMetrics"
	streams := func(a string) int {
		n := 0
		for _, m := range h.CC.SubConnFor(a).Streams() {
			if m == method {
				n++
			}
		}
		return n
	}
	for _, a := range as {
		waitFor(t, h, fmt.Sprintf("an ORCA stream on %s", a), func() bool { return streams(a) == 1 })
	}
	// A lost connection closes its stream; the new READY connection opens
	// one.
	old := h.Lose(as[0])
	if old.ProducersClosed() != 1 {
		t.Errorf("producers closed on a lost connection = %d, want 1", old.ProducersClosed())
	}
	// Turning out-of-band reporting off closes every stream and brings
	// back the per-call hook.
	h.Cfg = mustParse(t, `{}`)
	if err := h.Update(testkit.Endpoints(as)...); err != nil {
		t.Fatal(err)
	}
	for _, a := range as[1:] {
		if n := h.CC.SubConnFor(a).ProducersClosed(); n != 1 {
			t.Errorf("producers closed on %s after turning OOB off = %d, want 1", a, n)
		}
	}
}

// TestCallsCountedInFlight: a pick counts its call in its endpoint's
// in-flight count, which the picker compares (engine.WeightedRR), until
// the call's Done, with per-call reports or without; the picks themselves
// are counted by the picker, not on the endpoints.
func TestCallsCountedInFlight(t *testing.T) {
	for _, cfg := range []string{`{}`, `{"enableOobLoadReport": true}`} {
		h := testkit.NewHarness(t, orcawrr.Name, cfg)
		as := testkit.Addrs(2)
		h.Start(as...)
		_, held := h.Count(10, true)
		endpoints := h.CC.State().Picker.(*engine.WeightedRR).Snapshot().Endpoints
		var total int64
		for _, r := range endpoints {
			total += r.Stats.InFlight()
		}
		if total != 10 {
			t.Errorf("%s: %d calls in flight after 10 held picks, want 10", cfg, total)
		}
		testkit.Finish(held, nil)
		for _, r := range endpoints {
			if n := r.Stats.InFlight(); n != 0 {
				t.Errorf("%s: %s in flight after every Done = %d, want 0", cfg, r.Stats.Addr(), n)
			}
		}
	}
}

func waitFor(t *testing.T, h *testkit.Harness, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case <-h.Ctx.Done():
			t.Fatalf("timed out waiting for %s", what)
		case <-time.After(time.Millisecond):
		}
	}
}

func mustParse(t *testing.T, js string) serviceconfig.LoadBalancingConfig {
	t.Helper()
	cfg, err := orcawrr.ParseConfig(json.RawMessage(js))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func TestEmptyEndpointList(t *testing.T) {
	testkit.CheckEmptyEndpointList(t, orcawrr.Name)
}

// TestRetryReportsReachTheRetriedEndpoint: a retry whose schedule position
// falls on the endpoint an earlier attempt used steps to another one, and
// the report of the call it places there must be read into that
// endpoint's weight, not the one the schedule named. Only second attempts
// report here, and with weights 300 and 100 the schedule names the heavy
// endpoint for nearly every second attempt, which then steps to the light
// one: a report read into the wrong endpoint would give the heavy one the
// light one's weight, and plain picks would split evenly instead of 3:1.
func TestRetryReportsReachTheRetriedEndpoint(t *testing.T) {
	h := testkit.NewHarness(t, orcawrr.Name, `{"blackoutPeriod": "0s", "weightHalfLife": "0s"}`)
	as := testkit.Addrs(2)
	h.Start(as...)
	reports := map[string]*v3orcapb.OrcaLoadReport{as[0]: report(300, 1, 0), as[1]: report(100, 1, 0)}
	serve(h, 400, time.Second, reports)
	stepped := 0
	for round := 0; round < 4; round++ {
		for i := 0; i < 800; i++ {
			info := balancer.PickInfo{Ctx: engine.WithAttempts(context.Background())}
			first, err := h.CC.State().Picker.Pick(info)
			if err != nil {
				t.Fatal(err)
			}
			first.Done(balancer.DoneInfo{})
			second, err := h.CC.State().Picker.Pick(info)
			if err != nil {
				t.Fatal(err)
			}
			a, b := first.SubConn.(*testkit.SubConn).Addr(), second.SubConn.(*testkit.SubConn).Addr()
			if a == b {
				t.Fatalf("retry placed on %s, which the first attempt used", a)
			}
			if b == as[1] {
				stepped++
			}
			second.Done(balancer.DoneInfo{ServerLoad: reports[b]})
		}
		h.Clock.Advance(time.Second)
	}
	if stepped < 1000 {
		t.Fatalf("only %d second attempts on the light endpoint: the test does not exercise the step", stepped)
	}
	got := serve(h, 800, 0, nil)
	if share := shareOf(got, as[0]); math.Abs(share-0.75) > 0.02 {
		t.Errorf("plain picks on %s: %.1f%%, want 75%% (weights 300:100)", as[0], 100*share)
	}
}

// TestRemovedEndpointReturnsWithItsWeight: an endpoint that leaves the
// endpoint list and returns on the connection the policy kept for it
// (removalGrace) is the same backend, and keeps its weight: no new
// blackout holds it at the median.
func TestRemovedEndpointReturnsWithItsWeight(t *testing.T) {
	h := testkit.NewHarness(t, orcawrr.Name, `{"blackoutPeriod": "5s", "weightHalfLife": "0s"}`)
	as := testkit.Addrs(4)
	h.Start(as...)
	reports := map[string]*v3orcapb.OrcaLoadReport{ // weights 100, 200, 400, 1000
		as[0]: report(100, 1, 0), as[1]: report(100, 0.5, 0), as[2]: report(100, 0.25, 0), as[3]: report(100, 0.1, 0),
	}
	var got map[string]int
	for range 8 {
		got = serve(h, 1700, time.Second, reports)
	}
	near(t, "share before the removal", shareOf(got, as[3]), 1000.0/1700, 0.01)
	if err := h.Update(testkit.Endpoints(as[:3])...); err != nil {
		t.Fatal(err)
	}
	serve(h, 700, time.Second, reports)
	if err := h.Update(testkit.Endpoints(as)...); err != nil {
		t.Fatal(err)
	}
	got = serve(h, 1700, time.Second, reports)
	near(t, "share back on its connection", shareOf(got, as[3]), 1000.0/1700, 0.01)
}

// orcaStreams is how many ORCA streams were opened on sc.
func orcaStreams(sc *testkit.SubConn) int {
	n := 0
	for _, m := range sc.Streams() {
		if m == "/xds.service.orca.v3.OpenRcaService/StreamCoreMetrics" {
			n++
		}
	}
	return n
}

// TestOutOfBandStreamRestartsOnReturn: an endpoint's ORCA stream closes
// when it leaves the endpoint list, and opens again on the connection it
// kept when it returns (removalGrace).
func TestOutOfBandStreamRestartsOnReturn(t *testing.T) {
	h := testkit.NewHarness(t, orcawrr.Name, `{"enableOobLoadReport": true}`)
	as := testkit.Addrs(3)
	h.Start(as...)
	sc := h.CC.SubConnFor(as[2])
	streams := func() int { return orcaStreams(sc) }
	waitFor(t, h, "an ORCA stream", func() bool { return streams() == 1 })
	if err := h.Update(testkit.Endpoints(as[:2])...); err != nil {
		t.Fatal(err)
	}
	if n := sc.ProducersClosed(); n != 1 {
		t.Errorf("producers closed on the removed endpoint's connection = %d, want 1", n)
	}
	if err := h.Update(testkit.Endpoints(as)...); err != nil {
		t.Fatal(err)
	}
	if h.CC.SubConnFor(as[2]) != sc {
		t.Fatal("the returning endpoint did not keep its connection")
	}
	waitFor(t, h, "a second ORCA stream on the kept connection", func() bool { return streams() == 2 })
}

// TestOutOfBandStreamOpenedOnceOnReturn: an endpoint that returns from
// parking in the update that turns out-of-band reports on gets one ORCA
// stream, opened once, not opened and closed again at once.
func TestOutOfBandStreamOpenedOnceOnReturn(t *testing.T) {
	h := testkit.NewHarness(t, orcawrr.Name, `{}`)
	as := testkit.Addrs(3)
	h.Start(as...)
	sc := h.CC.SubConnFor(as[2])
	streams := func() int { return orcaStreams(sc) }
	if err := h.Update(testkit.Endpoints(as[:2])...); err != nil {
		t.Fatal(err)
	}
	h.Cfg = mustParse(t, `{"enableOobLoadReport": true}`)
	if err := h.Update(testkit.Endpoints(as)...); err != nil {
		t.Fatal(err)
	}
	if h.CC.SubConnFor(as[2]) != sc {
		t.Fatal("the returning endpoint did not keep its connection")
	}
	waitFor(t, h, "an ORCA stream on the kept connection", func() bool { return streams() == 1 })
	if n := sc.ProducersClosed(); n != 0 {
		t.Errorf("producers closed on the returning endpoint's connection = %d, want 0: its stream was opened twice", n)
	}
}
