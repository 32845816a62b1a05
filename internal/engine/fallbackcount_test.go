package engine

import (
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

	second := newPicker(true)
	f.published(second) // the first's second and last read
	if len(f.pickers) != 1 || f.pickers[0].p != second {
		t.Errorf("%d pickers kept after the replaced one's last read, want the new one only", len(f.pickers))
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
