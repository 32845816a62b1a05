package shadow

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	_ "github.com/pickwise/pickwise/balancer/p2c"
	"github.com/pickwise/pickwise/internal/engine"
	"github.com/pickwise/pickwise/internal/fakecc"
	"github.com/pickwise/pickwise/internal/testkit"
	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/status"
)

// readyShadow builds a shadow balancer over n endpoints on a fake
// ClientConn with config js, every endpoint READY, and returns it with the
// ClientConn once both children have published a picker that places
// calls on all of them.
func readyShadow(t testing.TB, n int, js string) (*shadowBalancer, *fakecc.ClientConn) {
	t.Helper()
	return readyShadowWith(t, testkit.NewClientConn(), engine.NewSeededRand(7), n, js)
}

// readyShadowWith is readyShadow on cc, drawing from rnd.
func readyShadowWith(t testing.TB, cc *fakecc.ClientConn, rnd engine.Rand, n int, js string) (*shadowBalancer, *fakecc.ClientConn) {
	t.Helper()
	return readyShadowOpts(t, cc, engine.Options{Rand: rnd}, n, js)
}

// readyShadowOpts is readyShadow on cc, with opts' clock and draws.
func readyShadowOpts(t testing.TB, cc *fakecc.ClientConn, opts engine.Options, n int, js string) (*shadowBalancer, *fakecc.ClientConn) {
	t.Helper()
	b := newBalancer(cc, balancer.BuildOptions{}, opts)
	t.Cleanup(b.Close)
	addrs := testkit.Addrs(n)
	update(t, b, addrs, js)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := cc.SetReady(ctx, addrs...); err != nil {
		t.Fatal(err)
	}
	err := cc.WaitFor(ctx, func(s balancer.State) error {
		p, ok := s.Picker.(*picker)
		if !ok || s.ConnectivityState != connectivity.Ready || p.candidate == nil {
			return fmt.Errorf("state %v, picker %T", s.ConnectivityState, s.Picker)
		}
		res, err := p.candidate.Pick(balancer.PickInfo{})
		if err != nil {
			return err
		}
		if res.Done != nil {
			res.Done(balancer.DoneInfo{Err: errNotSent})
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := cc.NumSubConns(); got != n {
		t.Fatalf("%d SubConns for %d endpoints and two children, want %d", got, n, n)
	}
	return b, cc
}

// TestSampledPicks checks a shadow asked on every pick: each pick goes out
// on one of the channel's SubConns, the candidate's Done hears the call's
// outcome when it chose the same endpoint and "not sent" otherwise, and
// the counts add up.
func TestSampledPicks(t *testing.T) {
	b, cc := readyShadow(t, 4, `{"live": [{"round_robin": {}}], "candidate": [{"pickwise_p2c": {}}], "sampleRate": 1}`)
	p := cc.State().Picker.(*picker)
	real := map[balancer.SubConn]bool{}
	for _, sc := range cc.SubConns() {
		real[sc] = true
	}
	failure := errors.New("boom")
	const picks = 2000
	for i := range picks {
		res, err := p.Pick(balancer.PickInfo{})
		if err != nil {
			t.Fatal(err)
		}
		if !real[res.SubConn] {
			t.Fatalf("pick %d went out on %v, not one of the channel's SubConns", i, res.SubConn)
		}
		var info balancer.DoneInfo
		if i%10 == 0 {
			info = balancer.DoneInfo{Err: failure, BytesSent: true}
		}
		res.Done(info)
	}
	s := b.rec.summary()
	if s.Compared != picks || s.NoPrediction != 0 {
		t.Fatalf("compared %d, no prediction %d; want %d and 0", s.Compared, s.NoPrediction, picks)
	}
	if s.Agreed == 0 || s.Agreed == s.Compared {
		t.Errorf("agreed %d of %d: round_robin and p2c should agree on some picks, not all", s.Agreed, s.Compared)
	}
	var live, cand int64
	for _, e := range s.Endpoints {
		live += e.Live
		cand += e.Candidate
	}
	if live != picks || cand != picks {
		t.Errorf("endpoint counts sum to %d live, %d candidate; want %d each", live, cand, picks)
	}
	if s.LiveArm.Calls != picks || s.LiveArm.Failed != picks/10 {
		t.Errorf("live arm %+v, want %d calls, %d failed", s.LiveArm, picks, picks/10)
	}
}

// TestSampledPicksFromManyGoroutines: picks and Dones from several
// goroutines at once, with the production draw, are each counted once,
// and every prediction held goes back to the candidate by a flush.
func TestSampledPicksFromManyGoroutines(t *testing.T) {
	b, cc := readyShadowWith(t, testkit.NewClientConn(), engine.SystemRand{}, 4, `{"live": [{"round_robin": {}}], "candidate": [{"pickwise_p2c": {}}], "sampleRate": 1}`)
	p := cc.State().Picker.(*picker)
	const goroutines, picks = 4, 2000
	var wg sync.WaitGroup
	for range goroutines {
		wg.Go(func() {
			for i := range picks {
				res, err := p.Pick(balancer.PickInfo{})
				if err != nil {
					t.Error(err)
					return
				}
				if i%100 == 0 {
					runtime.Gosched()
				}
				res.Done(balancer.DoneInfo{})
			}
		})
	}
	wg.Wait()
	s := b.rec.summary()
	if s.Compared != goroutines*picks || s.LiveArm.Calls != goroutines*picks {
		t.Errorf("compared %d, live arm %d calls; want %d each", s.Compared, s.LiveArm.Calls, goroutines*picks)
	}
	b.rec.held.flush()
	if n := len(b.rec.held.shards); n < runtime.GOMAXPROCS(0) || n&(n-1) != 0 {
		t.Errorf("%d shards for %d Ps, want a power of two, at least as many", n, runtime.GOMAXPROCS(0))
	}
	checkEmpty(t, b.rec.held)
}

// TestRealConnLatencyApart: the latency estimate timed calls' ends write
// on an endpoint is on a line apart from what every sampled pick and
// call's end reads, and from the counts.
func TestRealConnLatencyApart(t *testing.T) {
	var rc realConn
	read := unsafe.Offsetof(rc.liveDone) + unsafe.Sizeof(rc.liveDone)
	if gap := unsafe.Offsetof(rc.latency) - read; gap < cacheLine {
		t.Errorf("the latency starts %d bytes after the fields read, want a line (%d) or more", gap, cacheLine)
	}
	if gap := unsafe.Offsetof(rc.agreed) - unsafe.Offsetof(rc.latency); gap < cacheLine {
		t.Errorf("the counts start %d bytes after the latency, want a line (%d) or more", gap, cacheLine)
	}
}

// TestShardFillsLines: a P's shard fills whole cache lines, so that two
// shards never share one.
func TestShardFillsLines(t *testing.T) {
	if size := unsafe.Sizeof(releaseShard{}); size%cacheLine != 0 {
		t.Errorf("a shard is %d bytes, want a multiple of %d", size, cacheLine)
	}
}

// TestCandidateDoneHearsOutcome checks the Done a sampled prediction gets,
// with a recording candidate: the call's own outcome on agreement, "not
// sent" otherwise.
func TestCandidateDoneHearsOutcome(t *testing.T) {
	b, cc := readyShadow(t, 2, `{"live": [{"round_robin": {}}], "candidate": [{"round_robin": {}}], "sampleRate": 1}`)
	p := cc.State().Picker.(*picker)
	scs := cc.SubConns()
	var got []balancer.DoneInfo
	// Stand-in candidate that always picks scs[0]'s view, recording its
	// Dones.
	var v0 *view
	for rc := range b.conns.all {
		if rc.sc == scs[0] {
			v0 = rc.views[0]
		}
	}
	p.candidate = pickerFunc(func(balancer.PickInfo) (balancer.PickResult, error) {
		return balancer.PickResult{SubConn: v0, Done: func(i balancer.DoneInfo) { got = append(got, i) }}, nil
	})
	failure := errors.New("boom")
	var agreed, disagreed int
	for range 10 {
		res, err := p.Pick(balancer.PickInfo{})
		if err != nil {
			t.Fatal(err)
		}
		res.Done(balancer.DoneInfo{Err: failure, BytesSent: true})
		// A prediction on another endpoint is held until a call there
		// would have ended; let it go now.
		b.rec.held.flush()
		if last := got[len(got)-1]; res.SubConn == scs[0] {
			agreed++
			if last.Err != failure {
				t.Errorf("agreed, candidate's Done got %v, want the call's outcome", last.Err)
			}
		} else {
			disagreed++
			if last.Err != errNotSent || last.BytesSent {
				t.Errorf("disagreed, candidate's Done got %+v, want not sent", last)
			}
		}
	}
	if agreed == 0 || disagreed == 0 {
		t.Errorf("agreed %d, disagreed %d: round_robin over 2 should do both", agreed, disagreed)
	}
}

// TestSparsePredictionHeldFromItsPick: when calls come far apart, each is
// timed, and a prediction is held for its endpoint's latency from its own
// pick's reading, not from the latest reading before it, which an idle
// spell makes old: it is let go by the first pick after that latency, and
// not by one before.
func TestSparsePredictionHeldFromItsPick(t *testing.T) {
	clock := testkit.NewFakeClock()
	b, cc := readyShadowOpts(t, testkit.NewClientConn(), engine.Options{Rand: engine.NewSeededRand(3), Clock: clock}, 2, `{"live": [{"round_robin": {}}], "candidate": [{"round_robin": {}}], "sampleRate": 1}`)
	p := cc.State().Picker.(*picker)
	scs := cc.SubConns()
	var v0 *view
	for rc := range b.conns.all {
		if rc.sc == scs[0] {
			v0 = rc.views[0]
		}
	}
	start := clock.Now()
	released := map[int]time.Duration{} // by pick: the fake clock's time at its prediction's release
	picks := 0
	p.candidate = pickerFunc(func(balancer.PickInfo) (balancer.PickResult, error) {
		n := picks
		picks++
		return balancer.PickResult{SubConn: v0, Done: func(balancer.DoneInfo) { released[n] = clock.Now().Sub(start) }}, nil
	})
	pick := func() balancer.PickResult {
		t.Helper()
		res, err := p.Pick(balancer.PickInfo{})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	// Calls of 10 ms, 50 ms apart, on both endpoints: every one timed,
	// and scs[0]'s latency 10 ms.
	for range 8 {
		res := pick()
		clock.Advance(10 * time.Millisecond)
		res.Done(balancer.DoneInfo{})
		clock.Advance(40 * time.Millisecond)
	}
	if s := b.rec.timing.shift.Load(); s != 0 {
		t.Fatalf("calls 50 ms apart: shift %d, want 0", s)
	}
	clock.Advance(time.Second) // idle: the latest reading grows old
	// A pick on scs[1] (round_robin alternates), whose prediction on
	// scs[0] is held 10 ms from now.
	first := pick()
	if first.SubConn == scs[0] {
		first.Done(balancer.DoneInfo{})
		first = pick()
	}
	id, heldAt := picks-1, clock.Now().Sub(start)
	first.Done(balancer.DoneInfo{})
	clock.Advance(6 * time.Millisecond)
	pick().Done(balancer.DoneInfo{})
	if at, ok := released[id]; ok {
		t.Fatalf("a prediction made at %v was let go at %v, before its endpoint's 10 ms", heldAt, at)
	}
	clock.Advance(6 * time.Millisecond)
	pick().Done(balancer.DoneInfo{})
	if at, ok := released[id]; !ok || at != heldAt+12*time.Millisecond {
		t.Errorf("the prediction made at %v let go at %v (%v); want it let go by the pick at %v", heldAt, at, ok, heldAt+12*time.Millisecond)
	}
}

// TestSparsePicksCollectOtherShards: at sampleRate 1, which takes no
// draw, sparse picks (every one timed) still collect shards chosen at
// random, so that predictions held in a shard no pick runs on are let go
// once due.
func TestSparsePicksCollectOtherShards(t *testing.T) {
	clock := testkit.NewFakeClock()
	b, cc := readyShadowOpts(t, testkit.NewClientConn(), engine.Options{Rand: engine.NewSeededRand(5), Clock: clock}, 2, `{"live": [{"round_robin": {}}], "candidate": [{"pickwise_p2c": {}}], "sampleRate": 1}`)
	p := cc.State().Picker.(*picker)
	const shards = 64 // more than this machine has Ps: most are no pick's own
	b.rec.held.flush()
	b.rec.held = newReleases(shards, engine.NewSeededRand(9))
	released := 0
	for i := range shards {
		b.rec.held.hold(i, clock.Nanotime()+int64(time.Millisecond), func(balancer.DoneInfo) { released++ })
	}
	for range 1000 {
		clock.Advance(10 * time.Millisecond)
		res, err := p.Pick(balancer.PickInfo{})
		if err != nil {
			t.Fatal(err)
		}
		res.Done(balancer.DoneInfo{})
	}
	if s := b.rec.timing.shift.Load(); s != 0 {
		t.Fatalf("picks 10 ms apart: shift %d, want 0", s)
	}
	if released != shards {
		t.Errorf("%d of the %d predictions held one in each shard let go after 1000 sparse picks, want all", released, shards)
	}
}

// TestCanarySeesLiveLoad: while a canary runs, a pickwise candidate counts
// live's calls in flight on each endpoint as its own, so that it places
// the canary's calls away from the endpoint live is loading, and counts
// them out again when they end.
func TestCanarySeesLiveLoad(t *testing.T) {
	// At sampleRate 1 every live call is also a compared pick, whose
	// prediction is let go at once.
	for _, rate := range []string{"0", "1"} {
		t.Run("sampleRate="+rate, func(t *testing.T) {
			testArmSeesOthersLoad(t, `{"live": [{"pick_first": {}}], "candidate": [{"pickwise_p2c": {}}], "sampleRate": `+rate+`, "canaryPercent": 50}`, armCanary)
		})
	}
}

// TestLiveSeesCanaryLoad: with a pickwise live policy that compares
// loads, the canary's calls in flight count in live's in-flight calls,
// so that live does not pile its calls onto the endpoint the canary
// keeps busy; once they end, live uses it again.
func TestLiveSeesCanaryLoad(t *testing.T) {
	testArmSeesOthersLoad(t, `{"live": [{"pickwise_p2c": {}}], "candidate": [{"pick_first": {}}], "sampleRate": 0, "canaryPercent": 50}`, armLive)
}

// testArmSeesOthersLoad runs a shadow over two endpoints under js, whose
// arm watched is a p2c and whose other arm a pick_first, at a 50% canary.
// With every call held open, watched must mostly avoid the endpoint the
// other arm loads; once they end, it must use that endpoint again.
func testArmSeesOthersLoad(t *testing.T, js string, watched int) {
	b, cc := readyShadow(t, 2, js)
	p := cc.State().Picker.(*picker)
	// pick reports where a pick went, and whether the watched arm placed
	// it.
	pick := func() (balancer.PickResult, bool) {
		before := b.rec.summary().CanaryArm.Calls
		res, err := p.Pick(balancer.PickInfo{})
		if err != nil {
			t.Fatal(err)
		}
		canary := b.rec.summary().CanaryArm.Calls > before
		return res, canary == (watched == armCanary)
	}
	var open []balancer.PickResult
	var loaded balancer.SubConn
	watchedOn := map[balancer.SubConn]int{}
	for range 60 {
		res, byWatched := pick()
		open = append(open, res)
		if byWatched {
			watchedOn[res.SubConn]++
			continue
		}
		if loaded != nil && res.SubConn != loaded {
			t.Fatalf("pick_first placed calls on two endpoints")
		}
		loaded = res.SubConn
	}
	placed := 0
	for _, n := range watchedOn {
		placed += n
	}
	if placed < 15 || loaded == nil {
		t.Fatalf("%d of 60 calls by the watched arm at a 50%% canary, pick_first's on %v", placed, loaded)
	}
	// Without the other arm's load, p2c would split its own calls about
	// evenly; with it, the loads meet only now and then, and ties go
	// either way.
	if n := watchedOn[loaded]; n > placed/3 {
		t.Errorf("%d of %d calls went to the endpoint the other arm had %d calls in flight on, want few", n, placed, 60-placed)
	}
	for _, res := range open {
		if res.Done != nil {
			res.Done(balancer.DoneInfo{BytesSent: true, BytesReceived: true})
		}
	}
	// Every call ended: the endpoints are even again, and the watched
	// arm's calls, ended at once, go to both.
	watchedOn = map[balancer.SubConn]int{}
	for range 200 {
		res, byWatched := pick()
		if byWatched {
			watchedOn[res.SubConn]++
		}
		if res.Done != nil {
			res.Done(balancer.DoneInfo{BytesSent: true, BytesReceived: true})
		}
	}
	if watchedOn[loaded] < 10 {
		t.Errorf("after the other arm's calls ended, %d calls on its endpoint (%v), want its share: its load was not counted out", watchedOn[loaded], watchedOn)
	}
}

// TestLiveFeedTakesOnlyTheCanarysLoad: a pickwise live policy's feed is
// told of each canary call's start and end, never of an outcome (live is
// compared, not taught), and is unbound when live is replaced.
func TestLiveFeedTakesOnlyTheCanarysLoad(t *testing.T) {
	const cfg = `"candidate": [{"pick_first": {}}], "sampleRate": 1, "canaryPercent": 50}`
	b, cc := readyShadow(t, 2, `{"live": [{"pickwise_p2c": {}}], `+cfg)
	var starts, ends atomic.Int64
	stub := newChildFeed(engine.EndpointFeed{
		Outcome: func(balancer.DoneInfo, int64) { t.Error("live was told the outcome of a call") },
		Load: func(started bool) {
			if started {
				starts.Add(1)
			} else {
				ends.Add(1)
			}
		},
	})
	bound := map[*realConn]*childFeed{}
	forEachConn(b, func(rc *realConn) {
		f := rc.liveFeed.Load()
		if f == nil {
			t.Errorf("%s: the pickwise live policy's engine bound no feed", rc.addr)
		}
		bound[rc] = f
		rc.liveFeed.Store(stub)
	})
	p := cc.State().Picker.(*picker)
	failure := status.Error(codes.Unavailable, "backend down")
	for i := range 200 {
		res, err := p.Pick(balancer.PickInfo{})
		if err != nil {
			t.Fatal(err)
		}
		info := balancer.DoneInfo{BytesSent: true, BytesReceived: true}
		if i%2 == 0 {
			info.Err = failure
		}
		res.Done(info)
	}
	canaries := b.rec.summary().CanaryArm.Calls
	if canaries < 50 || starts.Load() != int64(canaries) || ends.Load() != int64(canaries) {
		t.Errorf("live's feed told of %d starts and %d ends, want one each for the %d canary calls", starts.Load(), ends.Load(), canaries)
	}
	forEachConn(b, func(rc *realConn) { rc.liveFeed.Store(bound[rc]) })
	// Replacing live with a policy from grpc shuts the old one's views
	// down, and their feeds with them.
	update(t, b, testkit.Addrs(2), `{"live": [{"round_robin": {}}], `+cfg)
	forEachConn(b, func(rc *realConn) {
		if rc.liveFeed.Load() != nil {
			t.Errorf("%s: live's feed still bound after live was replaced", rc.addr)
		}
	})
}

// TestParentLoadOnlyForLoadComparingCandidates: a candidate whose picker
// compares endpoints' in-flight counts (p2c) takes live's load during a
// canary; a ring hash candidate, whose bounded load caps an endpoint's
// count by its own calls' total, takes only the outcome feed.
func TestParentLoadOnlyForLoadComparingCandidates(t *testing.T) {
	for _, tc := range []struct {
		candidate string
		load      bool
	}{
		{`{"pickwise_p2c": {}}`, true},
		{`{"pickwise_ring_hash": {"balanceFactor": 1.25}}`, false},
	} {
		b, _ := readyShadow(t, 2, `{"live": [{"round_robin": {}}], "candidate": [`+tc.candidate+`], "sampleRate": 0, "canaryPercent": 10}`)
		fed := 0
		b.conns.mu.Lock()
		for rc := range b.conns.all {
			// A lazy candidate (ring hash) binds only the endpoints it
			// has asked for.
			f := rc.candidateFeed.Load()
			if f == nil {
				continue
			}
			fed++
			if f.Outcome == nil || (f.Load != nil) != tc.load {
				t.Errorf("%s: %s takes live's load %v, want %v", tc.candidate, rc.addr, f.Load != nil, tc.load)
			}
		}
		b.conns.mu.Unlock()
		if fed == 0 {
			t.Errorf("%s: no endpoint bound a feed", tc.candidate)
		}
	}
}

// TestLoadEndsOnce: a loaded live call is counted out of the candidate's
// in-flight calls once, when it ends, on the feed its start was counted
// in, and live's own Done, if any, still hears the outcome.
func TestLoadEndsOnce(t *testing.T) {
	var rc realConn
	inFlight := 0
	feed := newChildFeed(engine.EndpointFeed{Load: func(started bool) {
		if started {
			inFlight++
		} else {
			inFlight--
		}
	}})
	rc.candidateFeed.Store(feed)
	for _, withOwn := range []bool{false, true} {
		var heard []balancer.DoneInfo
		res := balancer.PickResult{}
		if withOwn {
			res.Done = func(i balancer.DoneInfo) { heard = append(heard, i) }
		}
		res = load(res, &rc)
		if inFlight != 1 {
			t.Fatalf("own Done %v: %d in flight after the pick, want 1", withOwn, inFlight)
		}
		// Rebinding the address before the end does not move it.
		rc.candidateFeed.Store(newChildFeed(engine.EndpointFeed{Load: func(bool) { t.Error("the end went to a feed bound after the start") }}))
		failure := errors.New("boom")
		res.Done(balancer.DoneInfo{Err: failure})
		rc.candidateFeed.Store(feed)
		if inFlight != 0 {
			t.Errorf("own Done %v: %d in flight after the end, want 0", withOwn, inFlight)
		}
		if withOwn && (len(heard) != 1 || heard[0].Err != failure) {
			t.Errorf("live's own Done heard %v, want the one failure", heard)
		}
	}
}

// TestRemovedEndpointStaysCounted: compared picks still in a shard's list
// when their endpoint is removed are counted in the totals, and the
// endpoints left list only their own.
func TestRemovedEndpointStaysCounted(t *testing.T) {
	// The candidate closes a removed endpoint's connection at once
	// (removalGrace 0s), rather than keep it for the endpoint's return,
	// so that the shadow lets the endpoint go.
	const cfg = `{"live": [{"round_robin": {}}], "candidate": [{"pickwise_p2c": {"removalGrace": "0s"}}], "sampleRate": 1}`
	b, cc := readyShadow(t, 3, cfg)
	p := cc.State().Picker.(*picker)
	const picks = 90 // fewer than a shard lists before counting
	for range picks {
		res, err := p.Pick(balancer.PickInfo{})
		if err != nil {
			t.Fatal(err)
		}
		res.Done(balancer.DoneInfo{})
	}
	addrs := testkit.Addrs(3)
	update(t, b, addrs[1:], cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		b.conns.mu.Lock()
		left := len(b.conns.all)
		b.conns.mu.Unlock()
		if left == 2 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("%d endpoints still held after one was removed, want 2", left)
		}
		time.Sleep(time.Millisecond)
	}
	s := b.rec.summary()
	if s.Compared != picks {
		t.Errorf("compared %d, want the %d made before the removal", s.Compared, picks)
	}
	var live int64
	for _, e := range s.Endpoints {
		if e.Addr == addrs[0] {
			t.Errorf("the removed endpoint %s is still listed", e.Addr)
		}
		live += e.Live
	}
	if live != picks*2/3 {
		t.Errorf("the endpoints left were sent %d compared picks by live, want %d (round_robin's two thirds)", live, picks*2/3)
	}
}

type pickerFunc func(balancer.PickInfo) (balancer.PickResult, error)

func (f pickerFunc) Pick(i balancer.PickInfo) (balancer.PickResult, error) { return f(i) }

// TestCanaryFallsBack checks that a canary pick the candidate cannot place
// goes to live and is counted.
func TestCanaryFallsBack(t *testing.T) {
	b, cc := readyShadow(t, 2, `{"live": [{"round_robin": {}}], "candidate": [{"round_robin": {}}], "sampleRate": 0, "canaryPercent": 100}`)
	p := cc.State().Picker.(*picker)
	p.candidate = pickerFunc(func(balancer.PickInfo) (balancer.PickResult, error) {
		return balancer.PickResult{}, balancer.ErrNoSubConnAvailable
	})
	for range 5 {
		res, err := p.Pick(balancer.PickInfo{})
		if err != nil {
			t.Fatalf("a canary pick the candidate could not place failed: %v", err)
		}
		if res.Done != nil {
			res.Done(balancer.DoneInfo{})
		}
	}
	if s := b.rec.summary(); s.CanaryFallbacks != 5 || s.CanaryArm.Calls != 0 {
		t.Errorf("fallbacks %d, canary calls %d; want 5 and 0", s.CanaryFallbacks, s.CanaryArm.Calls)
	}
}

// TestUnsampledPickAllocatesNothing: with sampleRate 0 and no canary, a
// pick costs live's pick and no allocation.
func TestUnsampledPickAllocatesNothing(t *testing.T) {
	_, cc := readyShadow(t, 8, `{"live": [{"pickwise_p2c": {}}], "candidate": [{"round_robin": {}}], "sampleRate": 0}`)
	p := cc.State().Picker
	allocs := testing.AllocsPerRun(1000, func() {
		res, err := p.Pick(balancer.PickInfo{})
		if err != nil {
			t.Fatal(err)
		}
		res.Done(balancer.DoneInfo{})
	})
	if allocs != 0 {
		t.Errorf("%v allocations per unsampled pick, want 0", allocs)
	}
}

// BenchmarkPick compares a shadow's pick with its children's: live alone,
// the candidate alone, and the shadow at sampleRate 0 and 1 (the target:
// at most live + candidate + 20 ns). The candidate alone is measured
// twice: each call ending at once, and each ending 16 picks later
// (in-flight), as the predictions the shadow holds for it do, which
// makes a load-aware candidate's comparisons differ and its picks cost
// more. Metrics are off, as the runtime's recorder costs what it costs
// whoever records; the draw is the production one.
func BenchmarkPick(b *testing.B) { benchmarkPick(b, false) }

// BenchmarkPickParallel is BenchmarkPick from GOMAXPROCS goroutines at
// once, as a channel's picks come: what the counts and held predictions
// every sampled pick shares cost when cores take their lines from each
// other.
func BenchmarkPickParallel(b *testing.B) { benchmarkPick(b, true) }

// BenchmarkPickCanary is BenchmarkPick's shadow during a 10% canary, with
// and without sampling: the candidate's canary picks, and live's picks
// counted in the candidate's in-flight calls (load).
func BenchmarkPickCanary(b *testing.B) {
	const js = `{"live": [{"round_robin": {}}], "candidate": [{"pickwise_p2c": {}}], "sampleRate": %v, "canaryPercent": %v}`
	for _, c := range []struct{ rate, canary float64 }{{0.1, 0}, {0.1, 10}, {0, 10}} {
		cc := testkit.NewClientConn()
		cc.Metrics = nil
		_, cc = readyShadowWith(b, cc, engine.SystemRand{}, 10, fmt.Sprintf(js, c.rate, c.canary))
		p := cc.State().Picker.(*picker)
		b.Run(fmt.Sprintf("sampleRate=%v/canaryPercent=%v", c.rate, c.canary), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := pickAndFinish(p); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// pickAndFinish is one pick through pk and its Done, at once.
func pickAndFinish(pk balancer.Picker) error {
	res, err := pk.Pick(balancer.PickInfo{})
	if err != nil {
		return err
	}
	if res.Done != nil {
		res.Done(balancer.DoneInfo{})
	}
	return nil
}

func benchmarkPick(b *testing.B, parallel bool) {
	const js = `{"live": [{"round_robin": {}}], "candidate": [{"pickwise_p2c": {}}], "sampleRate": %v}`
	for _, rate := range []float64{0, 0.1, 1} {
		cc := testkit.NewClientConn()
		cc.Metrics = nil
		_, cc = readyShadowWith(b, cc, engine.SystemRand{}, 10, fmt.Sprintf(js, rate))
		p := cc.State().Picker.(*picker)
		run := func(name string, pk balancer.Picker) {
			b.Run(name, func(b *testing.B) {
				b.ReportAllocs()
				if !parallel {
					for b.Loop() {
						if err := pickAndFinish(pk); err != nil {
							b.Fatal(err)
						}
					}
					return
				}
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						if err := pickAndFinish(pk); err != nil {
							b.Error(err) // not Fatal: this is not the benchmark's goroutine
							return
						}
					}
				})
			})
		}
		if rate == 0 {
			run("live=round_robin", p.live)
			run("candidate=pickwise_p2c", p.candidate)
			if !parallel {
				b.Run("candidate=pickwise_p2c/in-flight", func(b *testing.B) {
					b.ReportAllocs()
					var late [16]func(balancer.DoneInfo)
					i := 0
					for b.Loop() {
						res, err := p.candidate.Pick(balancer.PickInfo{})
						if err != nil {
							b.Fatal(err)
						}
						if done := late[i]; done != nil {
							done(balancer.DoneInfo{Err: errNotSent})
						}
						late[i] = res.Done
						i = (i + 1) % len(late)
					}
					for _, done := range late {
						if done != nil {
							done(balancer.DoneInfo{Err: errNotSent})
						}
					}
				})
			}
		}
		run(fmt.Sprintf("shadow/sampleRate=%v", rate), p)
	}
}

// TestCandidateLearnsFromLive: live's calls on one endpoint fail, and the
// candidate, a pickwise policy, which is fed the outcomes of live's calls
// (engine.OutcomeObserver), stops choosing it, while live still sends it
// its round-robin share. A candidate from grpc gets no feed.
func TestCandidateLearnsFromLive(t *testing.T) {
	b, cc := readyShadow(t, 4, `{"live": [{"round_robin": {}}], "candidate": [{"pickwise_p2c": {}}], "sampleRate": 1}`)
	bad := cc.SubConns()[0]
	forEachConn(b, func(rc *realConn) {
		if rc.candidateFeed.Load() == nil {
			t.Errorf("%s: the pickwise candidate's engine bound no outcome feed", rc.addr)
		}
	})
	p := cc.State().Picker.(*picker)
	failure := status.Error(codes.Unavailable, "backend down")
	run := func(n int) {
		for range n {
			res, err := p.Pick(balancer.PickInfo{})
			if err != nil {
				t.Fatal(err)
			}
			var info balancer.DoneInfo
			if res.SubConn == bad {
				info = balancer.DoneInfo{Err: failure, BytesSent: true, BytesReceived: true}
			}
			res.Done(info)
		}
	}
	// The candidate's penalty judges an endpoint against the fleet's
	// failure rate, which its health timer updates: give it wall time.
	deadline := time.Now().Add(10 * time.Second)
	for {
		before := b.rec.summary()
		run(1000)
		after := b.rec.summary()
		var live, cand float64
		for i, e := range after.Endpoints {
			if e.Addr == bad.Addr() {
				live = float64(e.Live-before.Endpoints[i].Live) / 1000
				cand = float64(e.Candidate-before.Endpoints[i].Candidate) / 1000
			}
		}
		if live < 0.2 {
			t.Fatalf("failing endpoint: live share %.3f, want round_robin's 0.25", live)
		}
		if cand < 0.05 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("failing endpoint: the candidate's share is still %.3f after 10 s of failures fed to it", cand)
		}
		time.Sleep(20 * time.Millisecond)
	}

	grpcCand, cc2 := readyShadow(t, 2, `{"live": [{"pickwise_p2c": {}}], "candidate": [{"round_robin": {}}]}`)
	_ = cc2
	forEachConn(grpcCand, func(rc *realConn) {
		if rc.candidateFeed.Load() != nil {
			t.Errorf("%s: an outcome feed bound for round_robin", rc.addr)
		}
	})
}

// TestSampledPickAllocatesNothing: with sampleRate 1, once the pools are
// warm, a sampled pick and its Done allocate nothing of the shadow's (the
// metrics recorder is off: what grpc's own recorder costs is its own).
func TestSampledPickAllocatesNothing(t *testing.T) {
	cc := testkit.NewClientConn()
	cc.Metrics = nil
	_, cc = readyShadowWith(t, cc, engine.SystemRand{}, 8, `{"live": [{"round_robin": {}}], "candidate": [{"pickwise_p2c": {}}], "sampleRate": 1}`)
	p := cc.State().Picker
	pick := func() {
		res, err := p.Pick(balancer.PickInfo{})
		if err != nil {
			t.Fatal(err)
		}
		res.Done(balancer.DoneInfo{})
	}
	for range 1000 {
		pick()
	}
	if allocs := testing.AllocsPerRun(1000, pick); allocs != 0 {
		t.Errorf("%v allocations per sampled pick, want 0", allocs)
	}
}

// update gives b the endpoints at addrs and the config js, as the
// channel would.
func update(t testing.TB, b *shadowBalancer, addrs []string, js string) {
	t.Helper()
	cfg, err := ParseConfig([]byte(js))
	if err != nil {
		t.Fatal(err)
	}
	if err := b.UpdateClientConnState(balancer.ClientConnState{ResolverState: resolver.State{Endpoints: testkit.Endpoints(addrs)}, BalancerConfig: cfg}); err != nil {
		t.Fatal(err)
	}
}

// forEachConn calls f on each of b's real SubConns, under the table's
// lock.
func forEachConn(b *shadowBalancer, f func(rc *realConn)) {
	b.conns.mu.Lock()
	defer b.conns.mu.Unlock()
	for rc := range b.conns.all {
		f(rc)
	}
}
