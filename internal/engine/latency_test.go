package engine

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/pickwise/pickwise/internal/ewma"
	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func testLatency() *latency {
	return newLatency(&LatencyConfig{DecayTime: 10 * time.Second})
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
	l, e := testLatency(), newEndpoint("a", &doneShared{}, false)
	sec := int64(time.Second)
	e.observe(ok(), int64(20*time.Millisecond), 0, l)
	near(t, "first sample", avgOf(e), 20*time.Millisecond)
	// A slower sample replaces the average at once.
	e.observe(ok(), int64(50*time.Millisecond), 1*sec, l)
	near(t, "after a peak", avgOf(e), 50*time.Millisecond)
	// A faster one, a decay time later, starts from the decayed average
	// pickers saw (50ms/e) and pulls it 1-1/e of the way.
	e.observe(ok(), int64(5*time.Millisecond), 11*sec, l)
	seen := 50e6 * math.Exp(-1)
	want := time.Duration(seen*math.Exp(-1) + 5e6*(1-math.Exp(-1)))
	near(t, "after a fast sample one decay time later", avgOf(e), want)
	// The same sample right after barely moves it.
	before := avgOf(e)
	e.observe(ok(), int64(5*time.Millisecond), 11*sec+int64(time.Millisecond), l)
	if d := before - avgOf(e); d <= 0 || d > time.Millisecond {
		t.Errorf("a fast sample 1ms later moved the average by %v, want a little", d)
	}
}

// TestPeakEWMALoneFarPeak: a sample over farPeak times the average, with
// no far one in the decay time before it, waits for the next answer: a
// success in time forgives it, a far one makes the larger of the two the
// peak. A far sample within the decay time of the last far one is the
// peak at once.
func TestPeakEWMALoneFarPeak(t *testing.T) {
	// answer is one call's end: its outcome, its latency and its end in
	// ms, and the average it leaves, in ms.
	type answer struct {
		info           balancer.DoneInfo
		took, at, want int64
	}
	pause := []answer{
		{ok(), 20, 0, 20},
		{ok(), 200, 1000, 20}, // a pause: one answer ten times late
		{ok(), 20, 1010, 20},  // then the usual ones
	}
	for _, c := range []struct {
		name    string
		answers []answer
		held    bool // a far answer is still held after them
	}{
		{"a lone far answer forgiven by the next", pause, false},
		{"another far answer within the decay time", append(pause[:3:3], answer{ok(), 150, 5000, 150}), false},
		{
			// A decay time after the last far answer one is held again,
			// and a far answer after it takes the larger of the two. Far
			// is judged against the stored average, not the decayed
			// one: after 11 s idle, 25 ms is far over the decayed 6.7 ms
			// but not over the stored 20, and is the peak at once.
			"far answers a decay time after the last",
			append(pause[:3:3], answer{ok(), 25, 12000, 25}, answer{ok(), 200, 12010, 25}, answer{ok(), 100, 12020, 200}),
			false,
		},
		{
			// Calls seconds apart: the lone far answer is held all the
			// same, and the next usual one forgives it.
			"sparse calls",
			[]answer{{ok(), 20, 0, 20}, {ok(), 20, 3000, 20}, {ok(), 200, 6000, 20}, {ok(), 20, 9000, 20}},
			false,
		},
		{
			// A fast failure says nothing of speed: it neither forgives
			// a held far answer nor takes it.
			"a fast failure after a held timeout",
			[]answer{{ok(), 20, 0, 20}, {failed(codes.DeadlineExceeded), 500, 1000, 20}, {failed(codes.Unavailable), 1, 1010, 20}},
			true,
		},
		{
			"a second timeout after a fast failure",
			[]answer{{ok(), 20, 0, 20}, {failed(codes.DeadlineExceeded), 500, 1000, 20}, {failed(codes.Unavailable), 1, 1010, 20}, {failed(codes.DeadlineExceeded), 400, 1500, 500}},
			false,
		},
		{"a peak under farPeak times the average, taken at once", []answer{{ok(), 20, 0, 20}, {ok(), 59, 1000, 59}}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			l, e := testLatency(), newEndpoint("a", &doneShared{}, false)
			ms := int64(time.Millisecond)
			for i, a := range c.answers {
				e.observe(a.info, a.took*ms, a.at*ms, l)
				near(t, fmt.Sprintf("average after answer %d (%d ms at %d ms)", i, a.took, a.at), avgOf(e), time.Duration(a.want*ms))
			}
			if held := e.farPeaks.held.Load() != 0; held != c.held {
				t.Errorf("a far answer held after them: %v, want %v", held, c.held)
			}
		})
	}
}

func TestPeakEWMAIdleDecay(t *testing.T) {
	l, e := testLatency(), newEndpoint("a", &doneShared{}, false)
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
	l, e := testLatency(), newEndpoint("a", &doneShared{}, false)
	// Never answered and idle: free, so it is tried at once.
	if got := e.PeakLoad(0, l); got != 0 {
		t.Errorf("load with no sample and nothing in flight = %v, want 0", got)
	}
	e.started(ReasonLeastLoaded)
	if got := e.PeakLoad(0, l); got < ewma.PendingPenalty {
		t.Errorf("load with a call pending and no sample = %v, want the pending penalty", got)
	}
	e.observe(ok(), int64(10*time.Millisecond), 0, l)
	// One call in flight: average x (1 + 1).
	if got := e.PeakLoad(0, l); math.Abs(got-2e7) > 1 {
		t.Errorf("load with a sample and one call in flight = %v, want 2e7", got)
	}
}

func TestPeakEWMAFailures(t *testing.T) {
	l, e := testLatency(), newEndpoint("a", &doneShared{}, false)
	e.observe(ok(), int64(20*time.Millisecond), 0, l)
	// A fast server failure neither lowers the average nor raises it: the
	// failure counts weigh it, not the latency.
	e.observe(failed(codes.Unavailable), int64(time.Millisecond), 1, l)
	near(t, "after a fast failure", avgOf(e), 20*time.Millisecond)
	for i := 0; i < 20; i++ {
		e.observe(failed(codes.Internal), int64(time.Millisecond), int64(2+i), l)
	}
	near(t, "after many", avgOf(e), 20*time.Millisecond)
	// A slow one, a timeout, is a sample of its latency: the peak. Fifty
	// times the average, a lone one waits for the next answer
	// (TestPeakEWMALoneFarPeak); a second one is taken.
	e.observe(failed(codes.DeadlineExceeded), int64(time.Second), 30, l)
	near(t, "after one timeout", avgOf(e), 20*time.Millisecond)
	e.observe(failed(codes.DeadlineExceeded), int64(time.Second), 31, l)
	near(t, "after two timeouts", avgOf(e), time.Second)

	// Before any answer, a failure is no sample: neither the fast
	// endpoint it seems nor a slow one never tried again.
	fresh := newEndpoint("f", &doneShared{}, false)
	fresh.observe(failed(codes.Unavailable), int64(time.Microsecond), 1, l)
	if _, ok := fresh.LatencyAverage(); ok {
		t.Error("a failure before any answer set the latency average")
	}

	// What is not the backend's doing is not a sample.
	f := newEndpoint("b", &doneShared{}, false)
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

// manualClock is a Clock that moves only when a test says; it has no
// timers.
type manualClock struct{ now int64 }

func (c *manualClock) Nanotime() int64                       { return c.now }
func (c *manualClock) AfterFunc(time.Duration, func()) Timer { panic("no timers here") }
func (c *manualClock) advance(d time.Duration)               { c.now += int64(d) }

// timedPicker is a Peak EWMA LeastLoaded picker over one endpoint, built
// directly on a snapshot, with the balancer-wide state its Done reads.
func timedPicker(clk *manualClock) (*LeastLoaded, *Endpoint, *latency) {
	lat := testLatency()
	shared := &doneShared{clock: clk}
	shared.latency.Store(lat)
	e := newEndpoint("a", shared, false)
	snap := &Snapshot{
		Endpoints: []Ready{readyFixed(e, 1)},
		Clock:     clk,
		Rand:      NewSeededRand(1),
		latency:   lat,
	}
	return NewLeastLoaded(snap, 2, NewPeakEWMA(snap)), e, lat
}

// TestLargeFleetTimesFewerCalls checks sampleGapPerEndpoint: over 2,000
// endpoints, a picker times each endpoint at most every 2ms, not every
// 150µs, and every call again once that much time has passed; on the
// pair's path and on the general one (three choices).
func TestLargeFleetTimesFewerCalls(t *testing.T) {
	const n = 2000
	lat := testLatency()
	if got, want := lat.sampleGap(n), int64(2*time.Millisecond); got != want {
		t.Fatalf("sampleGap(%d) = %v, want %v", n, time.Duration(got), time.Duration(want))
	}
	if got := lat.sampleGap(10); got != lat.sampleEvery {
		t.Fatalf("sampleGap(10) = %v, want the per-endpoint gap %v", time.Duration(got), time.Duration(lat.sampleEvery))
	}
	// A short decay time caps the gap at 1/256 of it.
	short := newLatency(&LatencyConfig{DecayTime: 10 * time.Millisecond})
	if got, want := short.sampleGap(10000), int64(10*time.Millisecond/256); got != want {
		t.Fatalf("sampleGap(10000) at a 10ms decay time = %v, want %v", time.Duration(got), time.Duration(want))
	}
	for _, choices := range []int{2, 3} {
		t.Run(fmt.Sprintf("choices=%d", choices), func(t *testing.T) { largeFleetTimesFewerCalls(t, lat, n, choices) })
	}
}

func largeFleetTimesFewerCalls(t *testing.T, lat *latency, n, choices int) {
	clk := &manualClock{now: int64(time.Hour)}
	shared := &doneShared{clock: clk}
	shared.latency.Store(lat)
	snap := &Snapshot{Clock: clk, Rand: NewSeededRand(3), latency: lat}
	for i := 0; i < n; i++ {
		e := newEndpoint(fmt.Sprint(i), shared, false)
		e.rtt.bits.Store(math.Float64bits(float64(time.Millisecond))) // past its first answer
		snap.Endpoints = append(snap.Endpoints, readyFixed(e, 1))
	}
	p := NewLeastLoaded(snap, choices, NewPeakEWMA(snap))
	// timedSince counts the endpoints whose last timed call started at or
	// after t0.
	timedSince := func(t0 int64) int {
		c := 0
		for _, r := range snap.Endpoints {
			if r.Stats.rtt.lastTimed.Load() >= t0 {
				c++
			}
		}
		return c
	}
	burst := func() {
		for i := 0; i < 4*n; i++ {
			pickDone(t, p)(ok())
		}
	}
	start := clk.now
	burst()
	if got := timedSince(start); got < n/2 {
		t.Fatalf("%d of %d endpoints timed in the first burst, want most", got, n)
	}
	// 0.5ms on: past the 150µs a small fleet waits, short of the 2ms. An
	// endpoint that no call reached in the first burst is timed now; one
	// timed then is not.
	first := make([]bool, n)
	for i, r := range snap.Endpoints {
		first[i] = r.Stats.rtt.lastTimed.Load() >= start
	}
	clk.advance(500 * time.Microsecond)
	burst()
	again := 0
	for i, r := range snap.Endpoints {
		if first[i] && r.Stats.rtt.lastTimed.Load() >= clk.now {
			again++
		}
	}
	if again != 0 {
		t.Errorf("%d endpoints timed again after 0.5ms, want none before 2ms", again)
	}
	clk.advance(2 * time.Millisecond)
	burst()
	if got := timedSince(clk.now); got < n/2 {
		t.Errorf("%d of %d endpoints timed again after 2.5ms, want most", got, n)
	}
}

func pickDone(t *testing.T, p *LeastLoaded) func(balancer.DoneInfo) {
	t.Helper()
	res, err := p.Pick(balancer.PickInfo{})
	if err != nil {
		t.Fatal(err)
	}
	return res.Done
}

func TestBusyEndpointIsSampledNotTimedOnEveryCall(t *testing.T) {
	clk := &manualClock{now: int64(time.Hour)}
	p, e, lat := timedPicker(clk)
	interval := time.Duration(lat.sampleEvery)
	if interval < 100*time.Microsecond || interval > 200*time.Microsecond {
		t.Fatalf("sample interval at a 10s decay time = %v, want about 150µs", interval)
	}

	// Until its first answer, every call is timed: the slower of two
	// calls placed together becomes the average.
	a, b := pickDone(t, p), pickDone(t, p)
	clk.advance(10 * time.Millisecond)
	a(ok())
	clk.advance(10 * time.Millisecond)
	b(ok())
	near(t, "average after two timed calls", avgOf(e), 20*time.Millisecond)

	// A burst at one instant: only its first call is timed. The others
	// take far longer; had they been timed, the average would be 500ms.
	clk.advance(time.Second)
	burst := make([]func(balancer.DoneInfo), 100)
	for i := range burst {
		burst[i] = pickDone(t, p)
	}
	if got := e.InFlight(); got != 100 {
		t.Fatalf("in flight = %d, want 100: untimed calls are still counted", got)
	}
	clk.advance(20 * time.Millisecond)
	burst[0](ok())
	clk.advance(480 * time.Millisecond)
	for _, done := range burst[1:] {
		done(ok())
	}
	near(t, "average after a burst with one timed call", avgOf(e), 20*time.Millisecond)
	if got := e.InFlight(); got != 0 {
		t.Fatalf("in flight after the burst = %d, want 0", got)
	}

	// One interval later the next call is timed again, and its peak shows.
	clk.advance(interval)
	slow := pickDone(t, p)
	clk.advance(50 * time.Millisecond)
	slow(ok())
	near(t, "average after a timed slow call", avgOf(e), 50*time.Millisecond)

	// An untimed call is no latency sample, failed or not (its failure is
	// for the failure counts).
	clk.advance(time.Millisecond)
	first, second := pickDone(t, p), pickDone(t, p)
	second(failed(codes.Unavailable))
	near(t, "average after an untimed failure", avgOf(e), 50*time.Millisecond)
	first(ok())
	clk.advance(time.Millisecond)
	first, second = pickDone(t, p), pickDone(t, p)
	second(failed(codes.Canceled))
	near(t, "average after an untimed cancellation", avgOf(e), 50*time.Millisecond)
	first(ok())
}
