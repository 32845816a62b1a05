package shadow

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/pickwise/pickwise/internal/engine"
	"google.golang.org/grpc/balancer"
)

// doneRecorder returns a Done that adds key to *ran, and fails t unless
// it is called with errNotSent.
func doneRecorder(t *testing.T, key int, ran *[]int) func(balancer.DoneInfo) {
	return func(i balancer.DoneInfo) {
		if i.Err != errNotSent {
			t.Errorf("Done %d got %v, want errNotSent", key, i.Err)
		}
		*ran = append(*ran, key)
	}
}

// checkEmpty fails t unless r holds nothing and references no Done.
func checkEmpty(t *testing.T, r *releases) {
	t.Helper()
	for i := range r.shards {
		s := &r.shards[i]
		if s.next.Load() != math.MaxInt64 || len(s.pending) != 0 || len(s.queue) != 0 || s.spare == nil {
			t.Errorf("shard %d: next %d, %d pending, %d queued, spare %v with nothing held", i, s.next.Load(), len(s.pending), len(s.queue), s.spare != nil)
		}
		for _, rel := range slices.Concat(s.pending[:cap(s.pending)], s.spare[:cap(s.spare)], s.queue[:cap(s.queue)]) {
			if rel.done != nil {
				t.Fatalf("shard %d: a Done run is still referenced", i)
			}
		}
	}
}

// TestReleases: held Dones run with errNotSent once a drain or collect
// finds them due, without entering the queue if due by the first that
// looks; the others join the queue, which gives them up earliest first,
// more than a batch at a time if due; flush runs the rest.
func TestReleases(t *testing.T) {
	r := newReleases(1, engine.NewSeededRand(1))
	var ran []int
	hold := func(due int) { r.hold(0, int64(due), doneRecorder(t, due, &ran)) }
	for _, due := range []int{30, 10, 20, 40} {
		hold(due)
	}
	if next := r.shards[0].next.Load(); next != 10 {
		t.Fatalf("next %d with 10 the earliest held", next)
	}
	r.drain(0, 5)
	if len(ran) != 0 {
		t.Fatalf("ran %v before any was due", ran)
	}
	r.drain(0, 25)
	if !slices.Equal(ran, []int{10, 20}) || len(r.shards[0].queue) != 2 {
		t.Fatalf("by 25 ran %v and queued %d, want [10 20] and the other two", ran, len(r.shards[0].queue))
	}
	var want []int
	for due := 100; due < 100+3*drainBatch; due++ {
		hold(due)
		want = append(want, due)
	}
	// Not due at this collect: into the queue, which then gives up the
	// two due by 50.
	ran = nil
	r.collect(0, 50, 0)
	if !slices.Equal(ran, []int{30, 40}) {
		t.Fatalf("by 50 ran %v, want [30 40]", ran)
	}
	// The queue gives them up in order of due time, in several batches.
	ran = nil
	r.drain(0, 1000)
	if !slices.Equal(ran, want) {
		t.Fatalf("by 1000 ran %v, want %v", ran, want)
	}
	// Due at once, at a collect, without entering the queue.
	ran = nil
	hold(1500)
	hold(1200)
	r.collect(0, 2000, 0)
	if !slices.Equal(ran, []int{1500, 1200}) {
		t.Fatalf("by 2000 ran %v, want [1500 1200]", ran)
	}
	hold(3000)
	r.flush()
	if !slices.Equal(ran, []int{1500, 1200, 3000}) {
		t.Fatalf("after flush ran %v", ran)
	}
	checkEmpty(t, r)
}

// TestReleasesAcrossPs: a Done held by one P runs when that P collects
// it, not when another P collects its own; a timed pick on another P
// finds it through the shards collect draws; flush runs every shard's.
func TestReleasesAcrossPs(t *testing.T) {
	r := newReleases(4, engine.NewSeededRand(1))
	var ran []int
	for proc := range 4 {
		r.hold(proc, 10, doneRecorder(t, proc, &ran))
	}
	r.collect(1, 100, 1|1<<12) // draws P 1's shard twice
	if !slices.Equal(ran, []int{1}) {
		t.Fatalf("P 1's collect ran the Dones of Ps %v, want only its own", ran)
	}
	r.collect(0, 100, 2|3<<12)
	slices.Sort(ran)
	if !slices.Equal(ran, []int{0, 1, 2, 3}) {
		t.Fatalf("collect on P 0 drawing 2 and 3: ran %v, want all four", ran)
	}
	r.hold(6, 10, doneRecorder(t, 6, &ran)) // P 6 shares P 2's shard
	r.hold(3, 500, doneRecorder(t, 7, &ran))
	r.collect(3, 100, 3|3<<12)
	if slices.Contains(ran, 7) {
		t.Fatal("a collect at 100 ran a Done due at 500")
	}
	r.flush()
	if !slices.Contains(ran, 6) || !slices.Contains(ran, 7) || len(ran) != 6 {
		t.Errorf("after flush ran %v, want every Done", ran)
	}
	checkEmpty(t, r)
}

// TestReleasesCollectUnderWay: a collect that finds another running the
// Dones it took leaves the pending list to a later one, and a flush waits
// for it; holding meanwhile goes on.
func TestReleasesCollectUnderWay(t *testing.T) {
	r := newReleases(1, engine.NewSeededRand(1))
	var ran []int
	inside, release := make(chan struct{}), make(chan struct{})
	r.hold(0, 10, func(balancer.DoneInfo) {
		close(inside)
		<-release
	})
	go r.collect(0, 100, 0)
	<-inside
	r.hold(0, 10, doneRecorder(t, 1, &ran))
	r.collect(0, 100, 0)
	if len(ran) != 0 || len(r.shards[0].pending) != 1 {
		t.Fatalf("a second collect ran %v and left %d pending, want none run and one left", ran, len(r.shards[0].pending))
	}
	flushed := make(chan struct{})
	go func() {
		r.flush()
		close(flushed)
	}()
	select {
	case <-flushed:
		t.Fatal("flush returned while a collect ran its Dones")
	case <-time.After(20 * time.Millisecond):
	}
	close(release)
	<-flushed
	if !slices.Equal(ran, []int{1}) {
		t.Fatalf("after flush ran %v, want [1]", ran)
	}
	checkEmpty(t, r)
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
