package server

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
)

// defaults is the zero Behavior after normalization.
func defaults() Behavior {
	return Behavior{
		ErrorCode: DefaultErrorCode,
		ORCA:      ORCAConfig{Interval: DefaultORCAInterval, Utilization: UtilizationComputed},
	}
}

func TestPatch(t *testing.T) {
	for _, tc := range []struct {
		name  string
		base  Behavior
		patch string
		want  func(*Behavior)
	}{
		{name: "empty", patch: "", want: func(*Behavior) {}},
		{name: "empty object", patch: " {} ", want: func(*Behavior) {}},
		{
			name:  "every field",
			patch: `{"latency":"20ms","latencySpread":0.3,"capacity":4,"errorRate":0.1,"errorCode":"deadline_exceeded","errorLatency":"1ms","coldStart":"5s","coldFactor":3,"slowdown":2.5,"orca":{"perCall":true,"outOfBand":true,"interval":"100ms","utilization":"fixed","fixedUtilization":1.5}}`,
			want: func(b *Behavior) {
				*b = Behavior{
					Latency: Duration(20 * time.Millisecond), LatencySpread: 0.3, Capacity: 4,
					ErrorRate: 0.1, ErrorCode: "DEADLINE_EXCEEDED", ErrorLatency: Duration(time.Millisecond),
					ColdStart: Duration(5 * time.Second), ColdFactor: 3, Slowdown: 2.5,
					ORCA: ORCAConfig{PerCall: true, OutOfBand: true, Interval: Duration(100 * time.Millisecond),
						Utilization: UtilizationFixed, FixedUtilization: 1.5},
				}
			},
		},
		{
			name:  "omitted and null keep the base",
			base:  Behavior{Latency: Duration(time.Second), Capacity: 2, ORCA: ORCAConfig{PerCall: true}},
			patch: `{"capacity":null,"errorRate":0.5,"orca":{"outOfBand":true}}`,
			want: func(b *Behavior) {
				b.Latency = Duration(time.Second)
				b.Capacity = 2
				b.ErrorRate = 0.5
				b.ORCA.PerCall = true
				b.ORCA.OutOfBand = true
			},
		},
		{
			name:  "null object keeps the base",
			base:  Behavior{ORCA: ORCAConfig{PerCall: true}},
			patch: `{"orca":null}`,
			want:  func(b *Behavior) { b.ORCA.PerCall = true },
		},
		{
			name:  "zero resets",
			base:  Behavior{Latency: Duration(time.Second), ColdStart: Duration(time.Second), ColdFactor: 2},
			patch: `{"latency":"0s","coldStart":"0s","coldFactor":0}`,
			want:  func(*Behavior) {},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.base.Patch(tc.patch)
			if err != nil {
				t.Fatalf("Patch(%s): %v", tc.patch, err)
			}
			want := defaults()
			tc.want(&want)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Patch(%s) (-want +got):\n%s", tc.patch, diff)
			}
		})
	}
}

func TestBehaviorJSONRoundTrip(t *testing.T) {
	b, err := Behavior{}.Patch(`{"latency":"1.5s","errorLatency":"250us","orca":{"interval":"2s"}}`)
	if err != nil {
		t.Fatal(err)
	}
	js, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"latency":"1.5s","latencySpread":0,"capacity":0,"errorRate":0,"errorCode":"UNAVAILABLE","errorLatency":"250µs","failNext":0,"coldStart":"0s","coldFactor":0,"slowdown":0,"orca":{"perCall":false,"outOfBand":false,"interval":"2s","utilization":"computed","fixedUtilization":0,"ratedQps":0}}`
	if string(js) != want {
		t.Errorf("Marshal =\n%s\nwant\n%s", js, want)
	}
	back, err := Behavior{}.Patch(string(js))
	if err != nil {
		t.Fatalf("Patch(Marshal(b)): %v", err)
	}
	if diff := cmp.Diff(b, back); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
}

// FuzzPatch checks that no input makes Patch panic, and that whatever it
// accepts is valid and survives a JSON round trip unchanged (the admin
// reply must be a patch that reproduces the state).
func FuzzPatch(f *testing.F) {
	for _, seed := range []string{
		``, `{}`, `null`, `[]`, `{"latency":"20ms"}`, `{"latency":-1}`,
		`{"errorRate":1,"errorCode":"resource_exhausted"}`,
		`{"coldStart":"1s","coldFactor":4}`, `{"orca":{"perCall":true,"interval":"50ms"}}`,
		`{"orca":{"utilization":"fixed","fixedUtilization":0.3}}`, `{"orca":{"x":1}}`,
		`{"latencySpread":1e309}`, `{"capacity":9223372036854775808}`, `{"latency":"9999999h"}`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, patch string) {
		b, err := Behavior{}.Patch(patch)
		if err != nil {
			return
		}
		if err := b.normalize(); err != nil {
			t.Fatalf("Patch(%q) accepted an invalid behavior: %v", patch, err)
		}
		js, err := json.Marshal(b)
		if err != nil {
			t.Fatalf("Marshal: %v", err)
		}
		back, err := Behavior{}.Patch(string(js))
		if err != nil {
			t.Fatalf("Patch(%s) of an accepted behavior: %v", js, err)
		}
		if diff := cmp.Diff(b, back); diff != "" {
			t.Fatalf("round trip of %q (-want +got):\n%s", patch, diff)
		}
	})
}

func TestCodeNames(t *testing.T) {
	// Every name CodeName gives is one ErrorCode accepts and Code decodes
	// back, OK aside: it is not a failure.
	for c := codes.Canceled; c <= codes.Unauthenticated; c++ {
		name := CodeName(c)
		b, err := Behavior{ErrorRate: 1, ErrorCode: name}.Patch("")
		if err != nil {
			t.Errorf("CodeName(%v) = %q, which ErrorCode rejects: %v", c, name, err)
			continue
		}
		if got := b.Code(); got != c {
			t.Errorf("Code() of ErrorCode %q = %v, want %v", name, got, c)
		}
	}
	if got := CodeName(codes.ResourceExhausted); got != "RESOURCE_EXHAUSTED" {
		t.Errorf("CodeName(ResourceExhausted) = %q, want the spec's spelling", got)
	}
	if got := CodeName(codes.Code(99)); got != "" {
		t.Errorf("CodeName(99) = %q, want empty", got)
	}
	// Unset means the default, as after normalization.
	if got := (Behavior{}).Code(); got != codes.Unavailable {
		t.Errorf("Code() of the zero Behavior = %v, want Unavailable", got)
	}
}

func TestColdFactor(t *testing.T) {
	b := &Behavior{ColdStart: Duration(time.Second), ColdFactor: 5}
	for _, tc := range []struct {
		since time.Duration
		want  float64
	}{
		{-time.Second, 5}, // clock restarted after the call began
		{0, 5},
		{500 * time.Millisecond, 3},
		{time.Second, 1},
		{time.Hour, 1},
	} {
		if got := coldFactor(b, tc.since); got != tc.want {
			t.Errorf("coldFactor(%v) = %v, want %v", tc.since, got, tc.want)
		}
	}
	if got := coldFactor(&Behavior{}, 0); got != 1 {
		t.Errorf("coldFactor with cold start off = %v, want 1", got)
	}
}

func TestRates(t *testing.T) {
	t0 := time.Unix(1000, 0)
	r := newRates(t0)
	// Just after a reset the rate is over the time actually covered, with
	// a one-bucket floor.
	r.add(t0, false)
	if qps, eps := r.rate(t0); qps != 10 || eps != 0 {
		t.Errorf("rate right after start = %v, %v; want 10, 0", qps, eps)
	}
	now := t0.Add(2 * time.Second)
	for i := range 19 {
		r.add(now.Add(time.Duration(i)*50*time.Millisecond), i%5 == 0)
	}
	// The calls span 0..900ms; half-way through the last bucket the window
	// is 950ms long and holds all of them.
	now = now.Add(950 * time.Millisecond)
	qps, eps := r.rate(now)
	if math.Abs(qps-19/0.95) > 1e-9 || math.Abs(eps-4/0.95) > 1e-9 {
		t.Errorf("rate = %v, %v; want %v, %v", qps, eps, 19/0.95, 4/0.95)
	}
	// A second later everything has slid out of the window.
	if qps, eps := r.rate(now.Add(1100 * time.Millisecond)); qps != 0 || eps != 0 {
		t.Errorf("rate after the window = %v, %v; want 0, 0", qps, eps)
	}
	r.reset(now)
	if qps, _ := r.rate(now); qps != 0 {
		t.Errorf("rate after reset = %v, want 0", qps)
	}
}

// The gate tests use no timing: each waiter's admission is observed through
// the gate's own counts.
func TestGateFIFOAndCapacityChanges(t *testing.T) {
	ctx := t.Context()
	g := newGate(1)
	if err := g.acquire(ctx); err != nil {
		t.Fatal(err)
	}
	order := make(chan int, 3)
	for i := range 3 {
		go func() {
			if err := g.acquire(ctx); err != nil {
				t.Error(err)
				return
			}
			order <- i
		}()
		// Queue them in a known order.
		waitQueued(t, g, i+1)
	}
	if a, q, _ := g.load(); a != 1 || q != 3 {
		t.Fatalf("active %d queued %d, want 1, 3", a, q)
	}
	g.release() // admits waiter 0
	if got := <-order; got != 0 {
		t.Errorf("first admitted = %d, want 0", got)
	}
	g.setCapacity(2) // room for one more: the oldest waiter
	if got := <-order; got != 1 {
		t.Errorf("admitted after raising capacity = %d, want 1", got)
	}
	g.setCapacity(3)
	if got := <-order; got != 2 {
		t.Errorf("admitted last = %d, want 2", got)
	}
	if a, q, c := g.load(); a != 3 || q != 0 || c != 3 {
		t.Errorf("active %d queued %d capacity %d, want 3, 0, 3", a, q, c)
	}
	g.setCapacity(1) // lowering never preempts
	g.release()
	g.release()
	if a, _, _ := g.load(); a != 1 {
		t.Errorf("active = %d, want 1", a)
	}
	g.setCapacity(0) // unlimited
	for range 5 {
		if err := g.acquire(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if a, _, _ := g.load(); a != 6 {
		t.Errorf("active with unlimited capacity = %d, want 6", a)
	}
}

func TestGateCancelLeavesQueue(t *testing.T) {
	g := newGate(1)
	if err := g.acquire(t.Context()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() { errc <- g.acquire(ctx) }()
	waitQueued(t, g, 1)
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("acquire = %v, want Canceled", err)
	}
	if a, q, _ := g.load(); a != 1 || q != 0 {
		t.Errorf("active %d queued %d after cancel, want 1, 0", a, q)
	}
	g.release()
	if a, _, _ := g.load(); a != 0 {
		t.Errorf("active = %d after release, want 0", a)
	}
}

func waitQueued(t *testing.T, g *gate, n int) {
	t.Helper()
	waitFor(t, testCtx(t), "waiters to queue", func() bool {
		_, q, _ := g.load()
		return q == n
	})
}
