package orcawrr_test

import (
	"testing"
	"time"

	v3orcapb "github.com/cncf/xds/go/xds/data/orca/v3"
	"github.com/pickwise/pickwise/balancer/orcawrr"
	"github.com/pickwise/pickwise/internal/testkit"
	"google.golang.org/grpc/balancer"
	_ "google.golang.org/grpc/balancer/weightedroundrobin" // the peer we measure against
)

// BenchmarkPick measures one pick and its Done carrying a per-call load
// report, from many goroutines at once, for pickwise_orca_wrr and grpc-go's
// weighted_round_robin in the same run. Both take per-call reports (their
// default), so both Dones fold the report in.
func BenchmarkPick(b *testing.B) {
	info := balancer.DoneInfo{ServerLoad: &v3orcapb.OrcaLoadReport{RpsFractional: 100, CpuUtilization: 0.5, Eps: 1}}
	testkit.BenchmarkPickDone(b, [][2]string{
		{"weighted_round_robin", `{}`}, // first: the base of benchstat -col /policy
		{orcawrr.Name, `{}`},
	}, []int{10, 100, 1000}, info)
}

// BenchmarkPickOutOfBand is BenchmarkPick with both policies reading
// reports out of band (enableOobLoadReport), so that calls carry none:
// grpc-go's picker then gives a call no Done at all, and ours gives the
// one that records the call's outcome for the failure penalty and local
// ejection. The first picker of each, as in BenchmarkPick: round robin
// until a weight is usable.
func BenchmarkPickOutOfBand(b *testing.B) {
	const cfg = `{"enableOobLoadReport": true}`
	testkit.BenchmarkPickDone(b, [][2]string{
		{"weighted_round_robin", cfg},
		{orcawrr.Name, cfg},
	}, []int{10, 100, 1000}, balancer.DoneInfo{})
}

// BenchmarkPickWeighted is BenchmarkPick in both policies' steady state:
// with the blackout off and weights updated every 100 ms (the least
// grpc-go allows), a few rounds of calls carrying reports let each take
// the reported weights in before the timer starts, so that the picks
// measured follow weights, where BenchmarkPick's, from the first picker,
// are the round robin both policies fall back to before any weight is
// usable. The reports differ between endpoints (qps 50 to 200 at the same
// utilization, by the SubConn's number), as equal weights would make
// both policies' schedules a plain round robin again.
func BenchmarkPickWeighted(b *testing.B) {
	const cfg = `{"blackoutPeriod": "0s", "weightUpdatePeriod": "0.1s"}`
	var reports [16]balancer.DoneInfo
	for i := range reports {
		reports[i] = balancer.DoneInfo{ServerLoad: &v3orcapb.OrcaLoadReport{RpsFractional: float64(50 + 10*i), CpuUtilization: 0.5, Eps: 1}}
	}
	report := func(sc balancer.SubConn) balancer.DoneInfo {
		return reports[sc.(*testkit.SubConn).ID()%len(reports)]
	}
	testkit.BenchmarkPickWarm(b, [][2]string{
		{"weighted_round_robin", cfg},
		{orcawrr.Name, cfg},
	}, []int{10, 100, 1000}, report, 150*time.Millisecond)
}

// BenchmarkPickSerial is BenchmarkPickOutOfBand from one goroutine: the
// pick's own instructions and cache misses, with nothing taken from
// another core. Not at 10,000: the peer's out-of-band streams over that
// many connections take the test binary's memory past what CI has.
func BenchmarkPickSerial(b *testing.B) {
	const cfg = `{"enableOobLoadReport": true}`
	testkit.BenchmarkPickSerial(b, [][2]string{
		{"weighted_round_robin", cfg},
		{orcawrr.Name, cfg},
	}, []int{10, 100, 1000})
}
