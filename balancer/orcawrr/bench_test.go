package orcawrr_test

import (
	"testing"

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
