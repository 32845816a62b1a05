package orcawrr_test

// End-to-end tests: real gRPC channels over loopback to interop/server
// backends that report their load through grpc-go's own ORCA server side
// (per-call trailers and the OpenRcaService stream), with
// pickwise_orca_wrr selected by a service config. Each backend is rated for
// some calls per second and reports utilization = served qps / rated qps,
// so the weight the policy computes, qps / utilization, is its rating
// whatever share of the traffic it gets: the shares must settle at the
// rating shares.
//
// Tolerances are wide enough for a loaded two-core machine under -race;
// nothing asserts how fast a call is.

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/pickwise/pickwise/balancer/orcawrr"
	"github.com/pickwise/pickwise/internal/fleet"
	"github.com/pickwise/pickwise/interop/server"
	"google.golang.org/grpc"
)

// e2eBackends starts one backend per rating, answering in 1ms and
// reporting per call or out of band.
func e2eBackends(t *testing.T, ratings []float64, outOfBand bool) ([]*server.Server, []string) {
	t.Helper()
	var ss []*server.Server
	var addrs []string
	for i, r := range ratings {
		b := server.Behavior{Latency: server.Duration(time.Millisecond)}
		b.ORCA = server.ORCAConfig{PerCall: !outOfBand, OutOfBand: outOfBand, Utilization: server.UtilizationRate, RatedQPS: r}
		s, err := server.New(fmt.Sprintf("backend-%d", i), b)
		if err != nil {
			t.Fatal(err)
		}
		addr, err := s.Start("127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Stop)
		ss = append(ss, s)
		addrs = append(addrs, addr)
	}
	return ss, addrs
}

// e2eDial opens a pickwise_orca_wrr channel to addrs with config.
func e2eDial(t *testing.T, addrs []string, config string) *grpc.ClientConn {
	t.Helper()
	c := fleet.DialT(t, addrs, fmt.Sprintf(`{"loadBalancingConfig":[{%q:%s}]}`, orcawrr.Name, config))
	return c.Conn
}

// e2eCalls makes n calls from 4 goroutines and counts them per backend.
func e2eCalls(t *testing.T, ctx context.Context, conn *grpc.ClientConn, n int) map[string]int {
	t.Helper()
	var mu sync.Mutex
	got := map[string]int{}
	var wg sync.WaitGroup
	per := n / 4
	for w := 0; w < 4; w++ {
		wg.Go(func() {
			for i := 0; i < per && ctx.Err() == nil; i++ {
				b, err := server.Call(ctx, conn, "k")
				if err != nil {
					t.Errorf("call: %v", err)
					return
				}
				mu.Lock()
				got[b]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return got
}

// e2eShares is the share of each backend-i in got.
func e2eShares(got map[string]int, n int) []float64 {
	total := 0
	for _, c := range got {
		total += c
	}
	out := make([]float64, n)
	for i := range out {
		out[i] = float64(got[fmt.Sprintf("backend-%d", i)]) / float64(max(total, 1))
	}
	return out
}

// e2eWithin reports whether every share is within tol of want.
func e2eWithin(got, want []float64, tol float64) bool {
	for i := range want {
		if d := got[i] - want[i]; d > tol || d < -tol {
			return false
		}
	}
	return true
}

// e2eSettle drives batches of calls until the shares are within tol of
// want for two batches in a row, and returns the last batch's shares; it
// fails the test if ctx ends first.
func e2eSettle(t *testing.T, ctx context.Context, conn *grpc.ClientConn, batch int, want []float64, tol float64, what string) []float64 {
	t.Helper()
	inARow := 0
	var last []float64
	for inARow < 2 {
		if ctx.Err() != nil {
			t.Fatalf("%s: shares %.3f never settled within ±%.2f of %.3f", what, last, tol, want)
		}
		last = e2eShares(e2eCalls(t, ctx, conn, batch), len(want))
		if e2eWithin(last, want, tol) {
			inARow++
		} else {
			inARow = 0
		}
	}
	t.Logf("%s: shares %.3f (want %.3f)", what, last, want)
	return last
}

// shares of capacity for ratings.
func capacityShares(ratings []float64) []float64 {
	sum := 0.0
	for _, r := range ratings {
		sum += r
	}
	out := make([]float64, len(ratings))
	for i, r := range ratings {
		out[i] = r / sum
	}
	return out
}

func TestEndToEndPerCallSharesFollowCapacity(t *testing.T) {
	t.Parallel()
	ratings := []float64{1000, 600, 600}
	_, addrs := e2eBackends(t, ratings, false)
	conn := e2eDial(t, addrs, `{"blackoutPeriod": "1s", "weightUpdatePeriod": "100ms", "weightHalfLife": "1s"}`)
	ctx := fleet.Context(t, 60*time.Second)
	e2eSettle(t, ctx, conn, 800, capacityShares(ratings), 0.05, "per-call reports")
}

func TestEndToEndOutOfBandSharesFollowCapacity(t *testing.T) {
	t.Parallel()
	// grpc-go's ORCA service sends a report when the stream opens and then
	// at most every 30s, so this test takes about that long: the first
	// report, sent before any traffic, has no load to tell of.
	ratings := []float64{1000, 600}
	_, addrs := e2eBackends(t, ratings, true)
	conn := e2eDial(t, addrs, `{"enableOobLoadReport": true, "oobReportingPeriod": "1s", "blackoutPeriod": "0s", "weightUpdatePeriod": "100ms"}`)
	ctx := fleet.Context(t, 120*time.Second)
	e2eSettle(t, ctx, conn, 800, capacityShares(ratings), 0.05, "out-of-band reports")
}

func TestEndToEndSilentThenReporting(t *testing.T) {
	t.Parallel()
	ratings := []float64{1000, 600, 300}
	ss, addrs := e2eBackends(t, ratings, false)
	// The third starts silent: it gets the median of the others' weights,
	// (1000+600)/2 = 800.
	silent := ss[2].Behavior()
	silent.ORCA.PerCall = false
	if err := ss[2].SetBehavior(silent); err != nil {
		t.Fatal(err)
	}
	conn := e2eDial(t, addrs, `{"blackoutPeriod": "5s", "weightExpirationPeriod": "2s", "weightUpdatePeriod": "100ms", "weightHalfLife": "0s"}`)
	ctx := fleet.Context(t, 90*time.Second)
	median := []float64{1000.0 / 2400, 600.0 / 2400, 800.0 / 2400}
	e2eSettle(t, ctx, conn, 600, median, 0.05, "silent backend at the median")

	// It starts reporting: for the 5s blackout it stays at the median. A
	// batch of 300 calls of 1ms on 4 callers takes well under a second;
	// one that outlasted the blackout would say nothing, so that is a
	// failure of the test's premise, reported as such.
	silent.ORCA.PerCall = true
	if err := ss[2].SetBehavior(silent); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	got := e2eShares(e2eCalls(t, ctx, conn, 300), 3)
	if took := time.Since(start); took > 4*time.Second {
		t.Fatalf("a batch of 300 calls took %v, longer than the blackout it was to observe", took)
	}
	if !e2eWithin(got, median, 0.05) {
		t.Errorf("shares during the blackout = %.3f, want the median's %.3f", got, median)
	}
	t.Logf("during the blackout: shares %.3f (median %.3f)", got, median)
	e2eSettle(t, ctx, conn, 600, capacityShares(ratings), 0.05, "after the blackout")

	// Its reports stop: after the 2s expiration it is back at the median.
	silent.ORCA.PerCall = false
	if err := ss[2].SetBehavior(silent); err != nil {
		t.Fatal(err)
	}
	e2eSettle(t, ctx, conn, 600, median, 0.05, "expired weight at the median")
}
