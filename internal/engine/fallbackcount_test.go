package engine

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/connectivity"
)

// erringPicker fails every pick, as a child whose connection broke after
// its READY picker was published.
type erringPicker struct{}

func (erringPicker) Pick(balancer.PickInfo) (balancer.PickResult, error) {
	return balancer.PickResult{}, errors.New("connection lost")
}

// TestWeightedRRCountsFallbackPicks: a fallback picker's picks count on
// their endpoints as ReasonWeighted, with the in-flight add, and on the
// picker itself; a pick whose child fails places nothing and is counted
// nowhere. A picker that follows weights counts none of its own.
func TestWeightedRRCountsFallbackPicks(t *testing.T) {
	build := func(fallback bool, broken int) (*WeightedRR, []Ready) {
		var eps []Ready
		for i := range 4 {
			e := newEndpoint(fmt.Sprint(i), nil, false)
			if i == broken {
				e.followChild(connectivity.Ready, erringPicker{}, false)
				eps = append(eps, Ready{Stats: e, InvWeight: 1})
				continue
			}
			eps = append(eps, readyFixed(e, 1))
		}
		return NewWeightedRR(&Snapshot{Endpoints: eps, Rand: NewSeededRand(1), WeightsFallback: fallback}), eps
	}
	endpointPicks := func(eps []Ready) (weighted, fallback uint32) {
		for _, r := range eps {
			weighted += r.Stats.picks[ReasonWeighted].Load()
			fallback += r.Stats.picks[ReasonRoundRobinFallback].Load()
		}
		return weighted, fallback
	}

	p, eps := build(true, 3)
	failed := 0
	for range 100 {
		if _, err := p.Pick(balancer.PickInfo{}); err != nil {
			failed++
		}
	}
	if failed != 25 {
		t.Fatalf("%d of 100 picks failed, want the broken endpoint's 25", failed)
	}
	if got := p.fallbackPicks(); got != 75 {
		t.Errorf("fallback picker counted %d picks, want the 75 placed", got)
	}
	if w, f := endpointPicks(eps); w != 75 || f != 0 {
		t.Errorf("endpoints counted %d weighted and %d fallback picks, want 75 and 0", w, f)
	}
	var inflight uint32
	for _, r := range eps {
		inflight += uint32(r.Stats.inFlight())
	}
	if inflight != 75 {
		t.Errorf("%d calls in flight, want 75", inflight)
	}

	p, eps = build(false, -1)
	for range 100 {
		if _, err := p.Pick(balancer.PickInfo{}); err != nil {
			t.Fatal(err)
		}
	}
	if got := p.fallbackPicks(); got != 0 {
		t.Errorf("weighted picker counted %d fallback picks, want 0", got)
	}
	if w, f := endpointPicks(eps); w != 100 || f != 0 {
		t.Errorf("endpoints counted %d weighted and %d fallback picks, want 100 and 0", w, f)
	}
}

// TestWeightedRRCountsFallbackProbesAndRetries: a fallback pick that
// probes an ejected endpoint is counted as a probe, not by the picker; a
// retry that steps through the schedule past the endpoints its earlier
// attempts used is still one pick.
func TestWeightedRRCountsFallbackProbesAndRetries(t *testing.T) {
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

		WeightsFallback: true,
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
	if got := p.fallbackPicks(); got != 99 {
		t.Errorf("fallback picker counted %d picks, want the 99 that were not the probe", got)
	}
	if got := in.picks[ReasonWeighted].Load(); got != 99 {
		t.Errorf("the READY endpoint counted %d picks, want 99", got)
	}

	// One endpoint: a retry steps once past it, finds no other, and
	// places the call on it anyway.
	r := NewWeightedRR(&Snapshot{Endpoints: []Ready{readyFixed(newEndpoint("only", nil, false), 1)}, Rand: NewSeededRand(1), WeightsFallback: true})
	info := balancer.PickInfo{Ctx: WithAttempts(context.Background())}
	for range 2 {
		if _, err := r.Pick(info); err != nil {
			t.Fatal(err)
		}
	}
	if got := r.fallbackPicks(); got != 2 {
		t.Errorf("a first attempt and its retry counted %d picks, want 2", got)
	}
}

// TestFallbackCountsMove: the balancer's records move a fallback picker's
// picks from ReasonWeighted to ReasonRoundRobinFallback: those of the
// current picker, those a replaced one placed before its next two reads,
// and, when a record holds fewer weighted picks than are owed, the rest at
// a later record. Replaced pickers are let go, however many publishes
// come without a record.
func TestFallbackCountsMove(t *testing.T) {
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
	var f fallbackCounts
	first := newPicker(true)
	pick(first, 3) // before it is published: not the balancer's picks
	f.published(first)
	pick(first, 5)
	c := pickCounts{ReasonWeighted: 5}
	f.move(&c)
	if c != (pickCounts{ReasonRoundRobinFallback: 5}) {
		t.Errorf("after 5 fallback picks: %v, want 5 fallback", c)
	}

	weighted := newPicker(false)
	f.published(weighted) // replaces the first
	pick(first, 2)        // calls that took it before it was replaced
	pick(weighted, 3)
	c = pickCounts{ReasonWeighted: 5}
	f.move(&c) // its first read since
	if c != (pickCounts{ReasonWeighted: 3, ReasonRoundRobinFallback: 2}) {
		t.Errorf("after a replaced picker's 2 late picks and 3 weighted: %v, want 3 weighted, 2 fallback", c)
	}
	pick(first, 1)
	c = pickCounts{ReasonWeighted: 1}
	f.move(&c) // its second and last
	if c != (pickCounts{ReasonRoundRobinFallback: 1}) {
		t.Errorf("a late pick before the replaced picker's last read: %v, want 1 fallback", c)
	}
	if len(f.pickers) != 0 {
		t.Errorf("%d pickers kept after the replaced one's last read, want none", len(f.pickers))
	}
	pick(first, 1) // past its last read: its endpoint's weighted pick stays
	c = pickCounts{ReasonWeighted: 1}
	f.move(&c)
	if c != (pickCounts{ReasonWeighted: 1}) {
		t.Errorf("a pick after the replaced picker was let go: %v, want 1 weighted", c)
	}

	// A read between a pick's count and its taking back (a probe, a
	// child's error) sees one more than the next read: the owed count
	// goes back down rather than wrapping.
	second := newPicker(true)
	f.published(second)
	second.next.Add(second.step)
	c = pickCounts{}
	f.move(&c)
	second.uncount()
	c = pickCounts{ReasonWeighted: 5}
	f.move(&c)
	if c != (pickCounts{ReasonWeighted: 5}) || f.owed != 0 {
		t.Errorf("a count taken back between two reads: %v, owed %d, want 5 weighted, nothing owed", c, f.owed)
	}

	pick(second, 7)
	c = pickCounts{ReasonWeighted: 4} // a record of some endpoints only
	f.move(&c)
	if c != (pickCounts{ReasonRoundRobinFallback: 4}) || f.owed != 3 {
		t.Errorf("a record holding 4 of 7 fallback picks: %v, owed %d, want 4 fallback, 3 owed", c, f.owed)
	}
	c = pickCounts{ReasonWeighted: 3}
	f.move(&c)
	if c != (pickCounts{ReasonRoundRobinFallback: 3}) || f.owed != 0 {
		t.Errorf("the next record: %v, owed %d, want the 3 owed moved", c, f.owed)
	}

	for range 1000 {
		f.published(newPicker(true))
	}
	if len(f.pickers) > fallbackRetiredReads+1 {
		t.Errorf("%d pickers kept after 1000 publishes without a record, want at most %d", len(f.pickers), fallbackRetiredReads+1)
	}
}
