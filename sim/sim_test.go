package sim

import (
	"testing"
	"time"

	"google.golang.org/grpc/codes"
)

func TestLoopRunsInTimeOrder(t *testing.T) {
	l := &Loop{}
	var got []time.Duration
	rec := func() { got = append(got, l.Now()) }
	l.At(3*time.Second, rec)
	l.At(time.Second, func() {
		rec()
		l.After(time.Second, rec) // scheduled while running
	})
	tm := l.clock().AfterFunc(1500*time.Millisecond, rec)
	if !tm.Stop() {
		t.Fatal("Stop of a pending timer returned false")
	}
	l.Run(10 * time.Second)
	want := []time.Duration{time.Second, 2 * time.Second, 3 * time.Second}
	if len(got) != len(want) {
		t.Fatalf("events at %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("events at %v, want %v", got, want)
		}
	}
	if tm.Stop() {
		t.Error("Stop of a cancelled timer returned true")
	}
	if l.Now() != 10*time.Second {
		t.Errorf("loop ended at %v, want 10s", l.Now())
	}
}

// TestQueueingModel checks the backend model against queueing arithmetic:
// one server, constant 10 ms service, 50 rps offered is 50% utilization;
// 200 rps offered saturates it and latency grows with the queue.
func TestQueueingModel(t *testing.T) {
	one := []Backend{{Servers: 1, Service: Const(10 * time.Millisecond)}}
	r, err := Run{Seed: 3, Backends: one, Rate: 50, Duration: 100 * time.Second}.Execute(Random())
	if err != nil {
		t.Fatal(err)
	}
	if u := r.Utilization[0]; u < 0.45 || u > 0.55 {
		t.Errorf("utilization at 50 rps = %.3f, want about 0.5", u)
	}
	// M/D/1 at rho 0.5: mean wait rho/(2(1-rho)) service times = 5 ms.
	if p50 := r.Quantile(0.5); p50 < 10*time.Millisecond || p50 > 16*time.Millisecond {
		t.Errorf("p50 at 50%% utilization = %v, want 10-16ms", p50)
	}
	over, err := Run{Seed: 3, Backends: one, Rate: 200, Duration: 10 * time.Second}.Execute(Random())
	if err != nil {
		t.Fatal(err)
	}
	if u := over.Utilization[0]; u < 0.99 {
		t.Errorf("utilization at 200 rps = %.3f, want saturated", u)
	}
	if o := over.Offered[0]; o < 1.9 || o > 2.1 {
		t.Errorf("offered load at 200 rps on a 100 rps backend = %.2f, want about 2", o)
	}
	if p99 := over.Quantile(0.99); p99 < time.Second {
		t.Errorf("p99 when overloaded = %v, want queueing delay beyond 1s", p99)
	}
}

func TestDeadlineAndFailures(t *testing.T) {
	bs := []Backend{
		{Servers: 1, Service: Const(2 * time.Second)},
		{Service: Const(time.Millisecond), FailRate: 1, FailAfter: time.Millisecond, FailCode: codes.Internal},
	}
	var deadlines, internals int
	r, err := Run{Seed: 5, Backends: bs, Rate: 10, Requests: 200, Deadline: time.Second,
		OnDone: func(_ time.Duration, _ *Request, backend int, lat time.Duration, err error) {
			if err == nil {
				return
			}
			if backend == 0 {
				deadlines++
				if lat != time.Second {
					t.Errorf("deadline failure after %v, want exactly 1s", lat)
				}
			} else {
				internals++
			}
		}}.Execute(Random())
	if err != nil {
		t.Fatal(err)
	}
	if r.Failed != 200 || deadlines+internals != 200 || deadlines == 0 || internals == 0 {
		t.Errorf("failed %d (deadline %d, internal %d), want all 200 split between both", r.Failed, deadlines, internals)
	}
}
