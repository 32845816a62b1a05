package shadow

import (
	"math/rand/v2"
	"slices"
	"testing"

	"google.golang.org/grpc/balancer"
)

// TestReleases: held Dones join the queue at a collect, run with
// errNotSent once a drain finds them due, earliest first in the queue,
// more than a batch at a time if due, and flush runs the rest.
func TestReleases(t *testing.T) {
	r := newReleases()
	var ran []int
	hold := func(due int) {
		held := trackPool.Get().(*tracked)
		held.due = int64(due)
		held.cand = func(i balancer.DoneInfo) {
			if i.Err != errNotSent {
				t.Errorf("due %d: Done got %v, want errNotSent", due, i.Err)
			}
			ran = append(ran, due)
		}
		r.hold(held)
	}
	for _, due := range []int{30, 10, 20, 40} {
		hold(due)
	}
	r.drain(25)
	if len(ran) != 0 {
		t.Fatalf("ran %v before a collect", ran)
	}
	r.collect(5)
	if len(ran) != 0 {
		t.Fatalf("ran %v before any was due", ran)
	}
	r.drain(25)
	if !slices.Equal(ran, []int{10, 20}) {
		t.Fatalf("by 25 ran %v, want [10 20]", ran)
	}
	var want []int
	for due := 100; due < 100+3*drainBatch; due++ {
		hold(due)
		want = append(want, due)
	}
	// Not due at this collect: into the queue, which then gives up the
	// two due by 50.
	ran = nil
	r.collect(50)
	if !slices.Equal(ran, []int{30, 40}) {
		t.Fatalf("by 50 ran %v, want [30 40]", ran)
	}
	// The queue gives them up in order of due time, in several batches.
	ran = nil
	r.drain(1000)
	if !slices.Equal(ran, want) {
		t.Fatalf("by 1000 ran %v, want %v", ran, want)
	}
	hold(2000)
	r.flush()
	if want = append(want, 2000); !slices.Equal(ran, want) {
		t.Fatalf("after flush ran %v", ran)
	}
	if r.next.Load() != 1<<63-1 || r.pending.Load() != nil {
		t.Errorf("next %d, pending %v with nothing held", r.next.Load(), r.pending.Load())
	}
}

// TestReleaseHeapOrder: pops come out by due time, whatever the pushes.
func TestReleaseHeapOrder(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 2))
	var h releaseHeap
	for round := range 50 {
		n := 1 + rnd.IntN(40)
		for range n {
			h.push(release{due: rnd.Int64N(100)})
		}
		last := int64(-1)
		for range n {
			r := h.pop()
			if r.due < last {
				t.Fatalf("round %d: popped %d after %d", round, r.due, last)
			}
			last = r.due
		}
		if len(h) != 0 {
			t.Fatalf("round %d: %d left", round, len(h))
		}
	}
}

// TestLatencyEstimate: the estimate starts at the first sample and moves
// an eighth of the way to each next one.
func TestLatencyEstimate(t *testing.T) {
	var l latencyEstimate
	if l.get() != 0 {
		t.Fatal("an estimate before any sample")
	}
	l.add(800)
	l.add(1600)
	if got := l.get(); got != 900 {
		t.Errorf("estimate %d, want 900", got)
	}
}
