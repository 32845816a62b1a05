package sim

import (
	"math"
	"testing"
	"time"
)

func TestDistMean(t *testing.T) {
	if got := Const(10 * time.Millisecond).Mean(); got != 10*time.Millisecond {
		t.Errorf("Const(10ms).Mean() = %v", got)
	}
	want := 10 * time.Millisecond.Seconds() * math.Exp(0.125)
	if got := LogNormal(10*time.Millisecond, 0.5).Mean().Seconds(); math.Abs(got-want) > 1e-9 {
		t.Errorf("LogNormal(10ms, 0.5).Mean() = %v s, want %v s", got, want)
	}
}

func TestOracleExpectedCompletion(t *testing.T) {
	const m = float64(20 * time.Millisecond)
	spec := Backend{Servers: 4, Service: Const(20 * time.Millisecond), Slow: []Window{{From: time.Second, To: 2 * time.Second, Factor: 3}}}
	for _, tc := range []struct {
		name          string
		spec          Backend
		busy, waiting int
		now           time.Duration
		want          float64
	}{
		{"idle", spec, 0, 0, 0, m},
		{"a worker free", spec, 3, 0, 0, m},
		{"all busy", spec, 4, 0, 0, m * (1 + 1.0/4)},
		{"all busy, three queued", spec, 4, 3, 0, m * 2},
		{"slowed, idle", spec, 0, 0, 1500 * time.Millisecond, 3 * m},
		{"slowed, all busy", spec, 4, 0, 1500 * time.Millisecond, 3 * m * (1 + 1.0/4)},
		{"after the slowdown", spec, 0, 0, 2 * time.Second, m},
		{"no worker limit", Backend{Service: Const(20 * time.Millisecond)}, 50, 0, 0, m},
	} {
		srv := &server{spec: tc.spec, busy: tc.busy, waiting: tc.waiting}
		if got := expectedCompletion(srv, tc.now); math.Abs(got-tc.want) > 1 {
			t.Errorf("%s: expectedCompletion = %v, want %v", tc.name, time.Duration(got), time.Duration(tc.want))
		}
	}
}

// TestOraclePlacement: the oracle leaves a slow backend idle while a fast
// one is expected to finish a call sooner, and splits calls between equal
// backends evenly.
func TestOraclePlacement(t *testing.T) {
	fast := Backend{Servers: 4, Service: Const(10 * time.Millisecond)}
	slow := fast
	slow.Slow = []Window{{From: 0, To: time.Hour, Factor: 4}}
	// 200 rps on 400 of fast capacity: the fast backend rarely has more
	// than a few calls ahead of a new one, never the 12 that would make
	// the slow one's 40 ms sooner.
	r, err := Run{Seed: 1, Backends: []Backend{slow, fast}, Rate: 200, Requests: 4000}.Execute(Oracle())
	if err != nil {
		t.Fatal(err)
	}
	if r.Picks[0] != 0 {
		t.Errorf("slow backend got %d of %d calls, want none", r.Picks[0], r.Total)
	}
	// At 600 rps, more than the fast backend serves, the overflow goes
	// to the slow one.
	r, err = Run{Seed: 1, Backends: []Backend{slow, fast}, Rate: 600, Requests: 4000}.Execute(Oracle())
	if err != nil {
		t.Fatal(err)
	}
	if s := r.Share(0); s < 0.1 || s > 0.5 {
		t.Errorf("slow backend's share at 600 rps %.3f, want the overflow", s)
	}
	r, err = Run{Seed: 1, Backends: []Backend{fast, fast}, Rate: 100, Requests: 4000}.Execute(Oracle())
	if err != nil {
		t.Fatal(err)
	}
	if s := r.Share(0); s < 0.45 || s > 0.55 {
		t.Errorf("equal idle backends: share %.3f to the first, want about half", s)
	}
}

// TestOracleQueueCount checks the count the oracle reads: at every pick,
// each backend's waiting calls are those of its queue whose client has
// not given up.
func TestOracleQueueCount(t *testing.T) {
	checks := 0
	check := Policy{Name: "check", newInstance: func(e *env) (instance, error) {
		in, err := Oracle().newInstance(e)
		return countCheck{instance: in, env: e, t: t, checks: &checks}, err
	}}
	// One backend offered twice its capacity, with a deadline that ends
	// calls while they wait.
	b := Backend{Servers: 2, Service: LogNormal(10*time.Millisecond, 0.5)}
	r, err := Run{Seed: 3, Backends: []Backend{b}, Rate: 400, Requests: 3000, Deadline: 100 * time.Millisecond}.Execute(check)
	if err != nil {
		t.Fatal(err)
	}
	if r.Failed == 0 || checks == 0 {
		t.Fatalf("%d failures, %d checks: want calls to expire in the queue", r.Failed, checks)
	}
}

type countCheck struct {
	instance
	env    *env
	t      *testing.T
	checks *int
}

func (c countCheck) pick(req *Request) (int, finishFunc, error) {
	for _, srv := range c.env.servers {
		live := 0
		for _, q := range srv.queue {
			if !q.finished {
				live++
			}
		}
		if live != srv.waiting {
			c.t.Fatalf("at %v: backend %d has %d live calls queued, waiting says %d", c.env.loop.Now(), srv.id, live, srv.waiting)
		}
		*c.checks++
	}
	return c.instance.pick(req)
}
