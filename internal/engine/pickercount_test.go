package engine

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/status"
)

// erringPicker fails every pick, as a child whose connection broke after
// its READY picker was published.
type erringPicker struct{}

func (erringPicker) Pick(balancer.PickInfo) (balancer.PickResult, error) {
	return balancer.PickResult{}, errors.New("connection lost")
}

// TestWeightedRRCountsItsPicks: a WeightedRR picker counts its picks
// itself, in fallback or following weights, and writes no count on their
// endpoints, in flight or by reason; a pick whose child fails places
// nothing and is counted nowhere; a call's Done records its outcome and
// leaves the in-flight count as it was.
func TestWeightedRRCountsItsPicks(t *testing.T) {
	build := func(fallback bool, broken int) (*WeightedRR, []Ready) {
		var eps []Ready
		shared := &doneShared{}
		shared.penalty.Store(newPenalty(DefaultFailurePenalty()))
		for i := range 4 {
			e := newEndpoint(fmt.Sprint(i), shared, false)
			if i == broken {
				e.followChild(connectivity.Ready, erringPicker{}, false)
				eps = append(eps, Ready{Stats: e, InvWeight: 1})
				continue
			}
			eps = append(eps, readyFixed(e, 1))
		}
		return NewWeightedRR(&Snapshot{Endpoints: eps, Rand: NewSeededRand(1), WeightsFallback: fallback}), eps
	}
	onEndpoints := func(eps []Ready) (picks, inflight uint32) {
		for _, r := range eps {
			for i := range r.Stats.picks {
				picks += r.Stats.picks[i].Load()
			}
			inflight += uint32(r.Stats.inFlight())
		}
		return picks, inflight
	}

	for _, fallback := range []bool{true, false} {
		p, eps := build(fallback, 3)
		if want := map[bool]PickReason{true: ReasonRoundRobinFallback, false: ReasonWeighted}[fallback]; p.reason() != want {
			t.Errorf("fallback %v: picks counted for reason %d, want %d", fallback, p.reason(), want)
		}
		failed := 0
		for range 100 {
			res, err := p.Pick(balancer.PickInfo{})
			if err != nil {
				failed++
				continue
			}
			res.Done(balancer.DoneInfo{Err: status.Error(codes.Unavailable, "down"), BytesSent: true, BytesReceived: true})
		}
		if failed != 25 {
			t.Fatalf("fallback %v: %d of 100 picks failed, want the broken endpoint's 25", fallback, failed)
		}
		if got := p.picks(); got != 75 {
			t.Errorf("fallback %v: the picker counted %d picks, want the 75 placed", fallback, got)
		}
		if picks, inflight := onEndpoints(eps); picks != 0 || inflight != 0 {
			t.Errorf("fallback %v: endpoints counted %d picks and %d in flight, want none", fallback, picks, inflight)
		}
		if o := eps[0].Stats.outcomes(); o.Failures == 0 {
			t.Errorf("fallback %v: a failed call's Done recorded no failure", fallback)
		}
	}
}

// TestWeightedRRCountsProbesAndRetries: a pick that probes an ejected
// endpoint is counted as a probe, in flight on its endpoint, and not by
// the picker; a retry that steps through the schedule past the endpoints
// its earlier attempts used is still one pick.
func TestWeightedRRCountsProbesAndRetries(t *testing.T) {
	shared := &doneShared{clock: &queueClock{}}
	out := newEndpoint("out", shared, false)
	in := newEndpoint("in", shared, false)
	snap := &Snapshot{
		Endpoints: []Ready{readyFixed(in, 1)},
		Ejected:   []Ready{readyFixed(out, 1)},
		ejector:   newEjector(DefaultEjection(), newPenalty(DefaultFailurePenalty())),
		Clock:     shared.clock,
		Rand:      NewSeededRand(1),
		shared:    shared,
	}
	p := NewWeightedRR(snap)
	for range 100 {
		if _, err := p.Pick(balancer.PickInfo{}); err != nil {
			t.Fatal(err)
		}
	}
	// The probe's Done never runs, so the one due probe is the only one.
	if n := shared.probes.Load(); n != 1 {
		t.Fatalf("%d probes, want 1 among 100 picks", n)
	}
	if got := p.picks(); got != 99 {
		t.Errorf("the picker counted %d picks, want the 99 that were not the probe", got)
	}
	if got := out.inFlight(); got != 1 {
		t.Errorf("the probed endpoint has %d calls in flight, want the probe", got)
	}

	// One endpoint: a retry steps once past it, finds no other, and
	// places the call on it anyway.
	r := NewWeightedRR(&Snapshot{Endpoints: []Ready{readyFixed(newEndpoint("only", nil, false), 1)}, Rand: NewSeededRand(1)})
	info := balancer.PickInfo{Ctx: WithAttempts(context.Background())}
	for range 2 {
		if _, err := r.Pick(info); err != nil {
			t.Fatal(err)
		}
	}
	if got := r.picks(); got != 2 {
		t.Errorf("a first attempt and its retry counted %d picks, want 2", got)
	}
}

// TestPickerCountsAdd: the balancer's records add a WeightedRR picker's
// picks for its reason: those of the current picker, and those a replaced
// one placed before its next two reads. Replaced pickers are let go,
// however many publishes come without a record.
func TestPickerCountsAdd(t *testing.T) {
	newPicker := func(fallback bool) *WeightedRR {
		e := newEndpoint("0", nil, false)
		return NewWeightedRR(&Snapshot{Endpoints: []Ready{readyFixed(e, 1)}, Rand: NewSeededRand(1), WeightsFallback: fallback})
	}
	pick := func(p *WeightedRR, n int) {
		for range n {
			if _, err := p.Pick(balancer.PickInfo{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	var f pickerCounts
	first := newPicker(true)
	pick(first, 3) // before it is published: not the balancer's picks
	f.published(first)
	pick(first, 5)
	c := pickCounts{ReasonWeighted: 1} // what the record holds stays
	f.add(&c)
	if c != (pickCounts{ReasonWeighted: 1, ReasonRoundRobinFallback: 5}) {
		t.Errorf("after 5 fallback picks: %v, want 5 fallback beside the 1 weighted", c)
	}

	weighted := newPicker(false)
	f.published(weighted) // replaces the first
	pick(first, 2)        // calls that took it before it was replaced
	pick(weighted, 3)
	c = pickCounts{}
	f.add(&c) // the first's first read since
	if c != (pickCounts{ReasonWeighted: 3, ReasonRoundRobinFallback: 2}) {
		t.Errorf("after a replaced picker's 2 late picks and 3 weighted: %v, want 3 weighted, 2 fallback", c)
	}
	pick(first, 1)
	c = pickCounts{}
	f.add(&c) // its second and last
	if c != (pickCounts{ReasonRoundRobinFallback: 1}) {
		t.Errorf("a late pick before the replaced picker's last read: %v, want 1 fallback", c)
	}
	if len(f.pickers) != 1 || f.pickers[0].p != weighted {
		t.Errorf("%d pickers kept after the replaced one's last read, want the current one", len(f.pickers))
	}
	pick(first, 1) // past its last read: not counted
	c = pickCounts{}
	f.add(&c)
	if c != (pickCounts{}) {
		t.Errorf("a pick after the replaced picker was let go: %v, want nothing", c)
	}

	// A read between a pick's count and its taking back (a probe, a
	// child's error) sees one more than the next read: the owed count
	// goes below nothing rather than wrapping, and the next picks make up
	// for it.
	weighted.shared.next.Add(nextPick) // a seeded picker: its one cursor
	c = pickCounts{}
	f.add(&c)
	if c != (pickCounts{ReasonWeighted: 1}) {
		t.Errorf("a pick under way: %v, want it counted", c)
	}
	weighted.shared.uncount()
	c = pickCounts{}
	f.add(&c)
	if c != (pickCounts{}) || f.owed[ReasonWeighted] != -1 {
		t.Errorf("a count taken back after the read that counted it: %v, owed %d, want nothing, -1 owed", c, f.owed[ReasonWeighted])
	}
	pick(weighted, 4)
	c = pickCounts{}
	f.add(&c)
	if c != (pickCounts{ReasonWeighted: 3}) || f.owed[ReasonWeighted] != 0 {
		t.Errorf("4 picks after one taken back: %v, owed %d, want 3 weighted, nothing owed", c, f.owed[ReasonWeighted])
	}

	for range 1000 {
		f.published(newPicker(true))
	}
	if len(f.pickers) > pickerRetiredReads+1 {
		t.Errorf("%d pickers kept after 1000 publishes without a record, want at most %d", len(f.pickers), pickerRetiredReads+1)
	}
}
