package engine

import (
	"math"
	"testing"
	"time"

	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestDecayMatchesExp(t *testing.T) {
	worst := 0.0
	for x := 0.0; x < 60; x += 0.0007 {
		want := math.Exp(-x)
		got := decay(x)
		if rel := math.Abs(got-want) / want; rel > worst {
			worst = rel
		}
	}
	if worst > 1e-6 {
		t.Errorf("decay differs from math.Exp by up to %.2g relative, want below 1e-6", worst)
	}
	if decay(-1) != 1 || decay(1000) != 0 {
		t.Errorf("decay(-1) = %v, decay(1000) = %v; want 1 and 0", decay(-1), decay(1000))
	}
}

func testLatency() *latency {
	return newLatency(&LatencyConfig{DecayTime: 10 * time.Second, DefaultRTT: 30 * time.Millisecond})
}

func ok() balancer.DoneInfo { return balancer.DoneInfo{BytesSent: true, BytesReceived: true} }

func failed(c codes.Code) balancer.DoneInfo {
	return balancer.DoneInfo{Err: status.Error(c, "x"), BytesSent: true, BytesReceived: true}
}

func avgOf(e *Endpoint) time.Duration {
	d, _ := e.LatencyAverage()
	return d
}

func near(t *testing.T, what string, got, want time.Duration) {
	t.Helper()
	if math.Abs(float64(got-want)) > 0.001*float64(want)+1 {
		t.Errorf("%s = %v, want %v", what, got, want)
	}
}

func TestPeakEWMAPeakAndDecay(t *testing.T) {
	l, e := testLatency(), newEndpoint("a", nil, false)
	sec := int64(time.Second)
	e.observe(ok(), int64(20*time.Millisecond), 0, l)
	near(t, "first sample", avgOf(e), 20*time.Millisecond)
	// A slower sample replaces the average at once.
	e.observe(ok(), int64(200*time.Millisecond), 1*sec, l)
	near(t, "after a peak", avgOf(e), 200*time.Millisecond)
	// A faster one, a decay time later, starts from the decayed average
	// pickers saw (200ms/e) and pulls it 1-1/e of the way.
	e.observe(ok(), int64(20*time.Millisecond), 11*sec, l)
	seen := 200e6 * math.Exp(-1)
	want := time.Duration(seen*math.Exp(-1) + 20e6*(1-math.Exp(-1)))
	near(t, "after a fast sample one decay time later", avgOf(e), want)
	// The same sample right after barely moves it.
	before := avgOf(e)
	e.observe(ok(), int64(20*time.Millisecond), 11*sec+int64(time.Millisecond), l)
	if d := before - avgOf(e); d <= 0 || d > time.Millisecond {
		t.Errorf("a fast sample 1ms later moved the average by %v, want a little", d)
	}
}

func TestPeakEWMAIdleDecay(t *testing.T) {
	l, e := testLatency(), newEndpoint("a", nil, false)
	e.observe(ok(), int64(time.Second), 0, l)
	// Idle for two decay times: a picker sees e^-2 of the average.
	got := e.PeakLoad(int64(20*time.Second), l)
	if want := 1e9 * math.Exp(-2); math.Abs(got-want) > want*1e-6 {
		t.Errorf("load after 20s idle = %v, want %v", got, want)
	}
	// Reading does not change the stored average.
	near(t, "stored average", avgOf(e), time.Second)
}

func TestPeakEWMADefaultAndPending(t *testing.T) {
	l, e := testLatency(), newEndpoint("a", nil, false)
	// Never answered and idle: free, so it is tried at once.
	if got := e.PeakLoad(0, l); got != 0 {
		t.Errorf("load with no sample and nothing in flight = %v, want 0", got)
	}
	e.started()
	if got := e.PeakLoad(0, l); got < pendingPenalty {
		t.Errorf("load with a call pending and no sample = %v, want the pending penalty", got)
	}
	e.observe(ok(), int64(10*time.Millisecond), 0, l)
	// One call in flight: average x (1 + 1).
	if got := e.PeakLoad(0, l); math.Abs(got-2e7) > 1 {
		t.Errorf("load with a sample and one call in flight = %v, want 2e7", got)
	}
}

func TestPeakEWMAFailures(t *testing.T) {
	l, e := testLatency(), newEndpoint("a", nil, false)
	e.observe(ok(), int64(20*time.Millisecond), 0, l)
	// A fast server failure counts as twice the larger of the average and
	// defaultRtt.
	e.observe(failed(codes.Unavailable), int64(time.Millisecond), 1, l)
	near(t, "after a fast failure", avgOf(e), 60*time.Millisecond)
	e.observe(failed(codes.Internal), int64(time.Millisecond), 2, l)
	near(t, "after a second one", avgOf(e), 120*time.Millisecond)
	// The cap: 100 x defaultRtt.
	for i := 0; i < 20; i++ {
		e.observe(failed(codes.DeadlineExceeded), int64(time.Millisecond), int64(3+i), l)
	}
	near(t, "after many", avgOf(e), 3*time.Second)

	// On an endpoint already slower than the cap, a failure cannot lower
	// the average.
	slow := newEndpoint("s", nil, false)
	slow.observe(ok(), int64(10*time.Second), 0, l)
	slow.observe(failed(codes.Unavailable), int64(time.Millisecond), 1, l)
	near(t, "a failure on a very slow endpoint", avgOf(slow), 10*time.Second)

	// What is not the backend's doing is not a sample.
	f := newEndpoint("b", nil, false)
	f.observe(ok(), int64(20*time.Millisecond), 0, l)
	for _, di := range []balancer.DoneInfo{
		failed(codes.Canceled),
		failed(codes.InvalidArgument),
		failed(codes.NotFound),
		{Err: status.Error(codes.Unavailable, "never sent")}, // never reached the server
	} {
		f.observe(di, int64(5*time.Second), 1, l)
	}
	near(t, "after ignored outcomes", avgOf(f), 20*time.Millisecond)
}
