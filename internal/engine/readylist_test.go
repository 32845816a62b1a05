package engine

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	v3orcapb "github.com/cncf/xds/go/xds/data/orca/v3"

	"github.com/pickwise/pickwise/internal/fakecc"
	"github.com/pickwise/pickwise/lbconfig"
	"github.com/pickwise/pickwise/orcaweight"
	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/experimental/balancer/weight"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/serviceconfig"
)

// recordingPolicy keeps the last snapshot it was given.
type recordingPolicy struct {
	last     **Snapshot
	settings Settings
}

func (p recordingPolicy) Configure(serviceconfig.LoadBalancingConfig) (Settings, error) {
	return p.settings, nil
}

func (p recordingPolicy) NewPicker(s *Snapshot) balancer.Picker {
	*p.last = s
	return fixedPicker{}
}

// TestReadyListMatchesScan drives a balancer through random connectivity
// changes, resolver updates (endpoints added, removed, reordered,
// reweighted), ejections and readmissions, and checks after each step
// that the READY list kept between publishes is the one a walk over
// every endpoint gives, and that the last snapshot was built from it;
// with and without slow start, whose ramps the list leaves out. Under a
// lazy policy it checks the member list the same way: endpoints connect
// when the test wakes them, as keys would. Over more endpoints than are
// published at once, changes wait for the coalescing window's timer,
// which the test fires now and then: the lists are then edited several
// times between publishes.
func TestReadyListMatchesScan(t *testing.T) {
	slow := &SlowStartConfig{Enabled: true, Window: lbconfig.Duration(time.Second), Aggression: 1, MinWeightPercent: 10}
	weights := &WeightsConfig{UpdatePeriod: time.Second} // no blackout, no expiry
	for _, tc := range []struct {
		name     string
		settings Settings
		lazy     bool
		pool     int // endpoints an update draws from
	}{
		{"plain", Settings{}, false, 40},
		{"slowStart", Settings{SlowStart: slow}, false, 40},
		{"weights", Settings{Weights: weights}, false, 40},
		{"coalesced", Settings{}, false, 2 * publishAtOnceUpTo},
		{"weightsCoalesced", Settings{Weights: weights}, false, 2 * publishAtOnceUpTo},
		{"lazy", Settings{Ejection: DefaultEjection(), FailurePenalty: DefaultFailurePenalty()}, true, 40},
		{"lazyCoalesced", Settings{Ejection: DefaultEjection(), FailurePenalty: DefaultFailurePenalty()}, true, 2 * publishAtOnceUpTo},
	} {
		t.Run(tc.name, func(t *testing.T) { readyListMatchesScan(t, tc.settings, tc.lazy, tc.pool) })
	}
}

func readyListMatchesScan(t *testing.T, settings Settings, lazy bool, pool int) {
	var last *Snapshot
	spec := Spec{
		Name:        "readylist_test",
		ParseConfig: func(json.RawMessage) (serviceconfig.LoadBalancingConfig, error) { return nil, nil },
		NewPolicy:   func() Policy { return recordingPolicy{last: &last, settings: settings} },
		Lazy:        lazy,
	}
	cc := fakecc.NewClientConn()
	var clock Clock = SystemClock{}
	timers := &queueClock{} // weight updates and deferred publishes run when the test says
	coalesced := pool > publishAtOnceUpTo
	if settings.Weights != nil || coalesced {
		clock = timers
	}
	b := newBalancer(spec, cc, balancer.BuildOptions{}, Options{Clock: clock, Rand: NewSeededRand(1)})
	defer b.Close()
	ej := newEjector(DefaultEjection(), newPenalty(DefaultFailurePenalty()))

	rnd := rand.New(rand.NewPCG(3, 5))
	update := func() {
		var eps []resolver.Endpoint
		for _, k := range rnd.Perm(pool)[:1+rnd.IntN(pool)] {
			ep := resolver.Endpoint{Addresses: []resolver.Address{{Addr: fmt.Sprintf("127.0.0.1:%d", 30000+k)}}}
			if rnd.IntN(3) == 0 {
				ep = weight.Set(ep, weight.EndpointInfo{Weight: uint32(1 + rnd.IntN(5))})
			}
			eps = append(eps, ep)
		}
		if err := b.UpdateClientConnState(balancer.ClientConnState{ResolverState: resolver.State{Endpoints: eps}}); err != nil {
			t.Fatal(err)
		}
	}
	update()
	states := []connectivity.State{connectivity.Connecting, connectivity.Ready, connectivity.Ready, connectivity.Idle, connectivity.TransientFailure}
	var held []heldSnapshot
	for step := 0; step < 5000; step++ {
		switch r := rnd.IntN(100); {
		case r < 5:
			update()
		case r < 10 && settings.Weights != nil:
			// Endpoints of the last snapshot report weights through their
			// calls, and a weight update folds them in and publishes.
			b.mu.Lock()
			snap := last // written by NewPicker under b.mu, also from reconnecting children
			b.mu.Unlock()
			if snap != nil && len(snap.Endpoints) > 0 && snap.Endpoints[0].Stats.reportTo.Load() != nil {
				for range 1 + rnd.IntN(5) {
					// Mostly within the median's bound of each other, so
					// that a publish may keep the weights as they are.
					qps := float64(10 + rnd.IntN(20))
					if rnd.IntN(8) == 0 {
						qps = float64(1 + rnd.IntN(500))
					}
					snap.Endpoints[rnd.IntN(len(snap.Endpoints))].Stats.weightedDone(balancer.DoneInfo{ServerLoad: &v3orcapb.OrcaLoadReport{RpsFractional: qps, CpuUtilization: 0.5}})
				}
			}
			timers.fire()
		case r < 12:
			b.mu.Lock()
			e := b.order[rnd.IntN(len(b.order))]
			switch {
			case e.ejection.ejected:
				b.ejection.readmit(e, 1)
				b.pub.publish(b.clock.Nanotime())
			case e.state == connectivity.Ready:
				b.ejection.eject(e, ej, 1)
				b.pub.publish(b.clock.Nanotime())
			}
			b.mu.Unlock()
		case r < 14:
			// A READY endpoint's child hands over a new picker: the
			// endpoint takes it, and the list is as it was.
			b.mu.Lock()
			if e := b.order[rnd.IntN(len(b.order))]; e.state == connectivity.Ready && !e.ejection.ejected {
				b.childStateLocked(e, balancer.State{ConnectivityState: connectivity.Ready, Picker: &replacedPicker{step: step}})
			}
			b.mu.Unlock()
		case r < 20:
			// An endpoint's connection drops and comes back READY: a
			// flap, when it was READY, whose removal from the list is
			// called off before a publish (readyOut) or undone after
			// one (readyUndo).
			var live []*fakecc.SubConn
			for _, sc := range cc.SubConns() {
				if !sc.IsShutdown() {
					live = append(live, sc)
				}
			}
			if len(live) > 0 {
				sc := live[rnd.IntN(len(live))]
				sc.UpdateState(balancer.SubConnState{ConnectivityState: connectivity.Connecting})
				if rnd.IntN(2) == 0 {
					timers.fire() // published in between, or not
				}
				sc.UpdateState(balancer.SubConnState{ConnectivityState: connectivity.Ready})
			}
		case r < 24 && lazy:
			// A key wakes an endpoint: its child connects, outside the
			// balancer's lock, as a picker's ExitIdle makes it.
			b.mu.Lock()
			c := b.children[b.order[rnd.IntN(len(b.order))]]
			b.mu.Unlock()
			c.exitIdle()
		default:
			var live []*fakecc.SubConn
			for _, sc := range cc.SubConns() {
				if !sc.IsShutdown() {
					live = append(live, sc)
				}
			}
			if len(live) > 0 {
				live[rnd.IntN(len(live))].UpdateState(balancer.SubConnState{ConnectivityState: states[rnd.IntN(len(states))]})
			}
		}
		// A deferred publish is due now and then; until it runs, only the
		// kept lists are checked.
		deferred := coalesced && rnd.IntN(4) != 0
		if coalesced && !deferred {
			timers.fire()
			if lazy {
				settleWakes(b, &last, timers)
			}
		}
		checkReadyList(t, b, &last, step, deferred)
		// A snapshot shares the kept list's array until the list's next
		// edit, which must copy it first: the snapshots of the last few
		// steps still hold what they were built with. The weights, the
		// balancer's buffers, are read by NewPicker only: no published
		// snapshot keeps them.
		b.mu.Lock()
		if last != nil && (len(held) == 0 || held[len(held)-1].snap != last) {
			held = append(held, heldSnapshot{last, slices.Clone(last.Endpoints), slices.Clone(last.Members), slices.Clone(last.States)})
			if len(held) > 8 {
				held = held[1:]
			}
		}
		b.mu.Unlock()
		for _, h := range held {
			if !sameReady(h.snap.Endpoints, h.endpoints) {
				t.Fatalf("step %d: a published snapshot's endpoints changed under it", step)
			}
			if h.snap.Weights != nil {
				t.Fatalf("step %d: a published snapshot still holds the balancer's weights", step)
			}
			if !sameMembers(h.snap.Members, h.members) || !slices.Equal(h.snap.States, h.states) {
				t.Fatalf("step %d: a published snapshot's members or their states changed under it", step)
			}
		}
	}
}

// replacedPicker is a child's new picker for a READY endpoint; step makes
// each one a distinct value.
type replacedPicker struct{ step int }

func (*replacedPicker) Pick(balancer.PickInfo) (balancer.PickResult, error) {
	return balancer.PickResult{}, balancer.ErrNoSubConnAvailable
}

// heldSnapshot is a published snapshot and copies of its endpoints and
// members as they were when it was published.
type heldSnapshot struct {
	snap      *Snapshot
	endpoints []Ready
	members   []Member
	states    []MemberState
}

func checkReadyList(t *testing.T, b *engineBalancer, lastp **Snapshot, step int, deferred bool) {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	last := *lastp // written by NewPicker, under b.mu
	ready, ejected := scanReady(b.order)
	if l := &b.pub.readyList; l.valid {
		// An endpoint whose removal is put off is still in the array, and
		// no longer READY.
		kept := l.ready
		if o := l.out; o.e != nil {
			if o.e.state == connectivity.Ready || kept[o.i].Stats != o.e {
				t.Fatalf("step %d: the endpoint out, at %d, is %v, and the list holds %p there, want it not READY and there", step, o.i, o.e.state, kept[o.i].Stats)
			}
			kept = slices.Delete(slices.Clone(kept), o.i, o.i+1)
		}
		if !sameReady(kept, ready) || !sameReady(l.ejected, ejected) {
			t.Fatalf("step %d: the kept list (%d READY, %d ejected) differs from a walk's (%d, %d)", step, len(kept), len(l.ejected), len(ready), len(ejected))
		}
	}
	if w := &b.pub.readyList.weights; w.valid {
		var fresh readyWeights
		fresh.fill(b.pub.readyList.ready)
		if !slices.Equal(w.ws, fresh.ws) || !slices.Equal(w.usable, fresh.usable) {
			t.Fatalf("step %d: the kept weights %v (usable %v) differ from the endpoints' %v (%v)", step, w.ws, w.usable, fresh.ws, fresh.usable)
		}
	}
	// Every READY endpoint's picks go through its child's READY picker
	// (its conn), whatever the last snapshot holds; and under a lazy
	// policy an endpoint that is not READY has none, so that its picks
	// follow the child.
	lazy := b.mode.followsChild()
	for _, e := range b.order {
		c := e.conn.Load()
		switch {
		case e.state == connectivity.Ready && (c == nil || !samePicker(c.picker, e.picker)):
			t.Fatalf("step %d: READY endpoint %s picks through %v, not its child's picker %v", step, e.addr, c, e.picker)
		case e.state != connectivity.Ready && lazy && c != nil:
			t.Fatalf("step %d: a lazy policy's %v endpoint %s picks through its last READY picker", step, e.state, e.addr)
		}
	}
	if b.pub.memberList.valid || last != nil && last.Members != nil {
		checkMemberList(t, b, last, step, deferred)
	}
	if deferred {
		return
	}
	if len(ready) == 0 && last != nil && last.Members == nil {
		ready = ejected // an eager policy's fallback
	}
	if len(ready) > 0 && (last == nil || !sameReady(last.Endpoints, ready)) {
		t.Fatalf("step %d: the last snapshot is not over the %d READY endpoints", step, len(ready))
	}
}

// settleWakes lets the endpoints a lazy publish woke connect. While no
// endpoint connects and none is READY, a publish wakes the first IDLE one
// (publisher.publishLazy), and its child connects on a goroutine of its own
// (a child may call back into the balancer): the change it makes is
// published at the next coalescing timer. Until that goroutine has run
// and the timer fired, the last snapshot trails the endpoints by that one
// change, so this waits for the wakes and fires the timers until the
// snapshot is current with none in flight (or gives up, and leaves the
// mismatch to checkMemberList).
func settleWakes(b *engineBalancer, lastp **Snapshot, timers *queueClock) {
	for range 100 {
		b.wakes.Wait()
		b.mu.Lock()
		last := *lastp
		_, states, _ := walkMembers(b)
		current := last != nil && slices.Equal(last.States, states)
		b.mu.Unlock()
		if current {
			return
		}
		timers.fire()
	}
}

// walkMembers is a lazy policy's members, their states and the counts
// by state, from a walk over every endpoint, as the kept member list
// should have them. b.mu must be held.
func walkMembers(b *engineBalancer) (members []Member, states []MemberState, counts stateCounts) {
	for _, e := range b.order {
		if e.picker != nil {
			members = append(members, Member{Conn: Ready{Stats: e, InvWeight: 1 / e.weight}, Endpoint: e.resolved, Weight: uint32(e.weight)})
			states = append(states, MemberStateOf(e.state, e.ejection.ejected))
			counts.move(noStateYet, e.state)
		}
	}
	return members, states, counts
}

// checkMemberList checks a lazy policy's kept member list, states and
// counts, and the last snapshot's members and states, against a walk over
// every endpoint.
func checkMemberList(t *testing.T, b *engineBalancer, last *Snapshot, step int, deferred bool) {
	t.Helper()
	members, states, counts := walkMembers(b)
	if l := &b.pub.memberList; l.valid && (!sameMembers(l.members, members) || !slices.Equal(l.states, states) || l.counts != counts) {
		t.Fatalf("step %d: the kept members (%d, states %v, counts %v) differ from a walk's (%d, %v, %v)", step, len(l.members), l.states, l.counts, len(members), states, counts)
	}
	if deferred {
		return
	}
	if len(members) > 0 && (last == nil || !sameMembers(last.Members, members) || !slices.Equal(last.States, states)) {
		t.Fatalf("step %d: the last snapshot is not over the %d members as they are", step, len(members))
	}
	// Until the set of endpoints changes, every snapshot has the kept
	// members array: a policy tells by it that its inputs are unchanged.
	if l := &b.pub.memberList; l.valid && len(l.members) > 0 && &last.Members[0] != &l.members[0] {
		t.Fatalf("step %d: the last snapshot's members are a copy of the kept ones", step)
	}
}

func sameMembers(a, b []Member) bool {
	return slices.EqualFunc(a, b, func(x, y Member) bool {
		return sameReady([]Ready{x.Conn}, []Ready{y.Conn}) && x.Weight == y.Weight && x.Endpoint.Addresses[0] == y.Endpoint.Addresses[0]
	})
}

func sameReady(a, b []Ready) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Stats != b[i].Stats || a[i].InvWeight != b[i].InvWeight {
			return false
		}
	}
	return true
}

// samePicker compares pickers that may be of uncomparable types.
func samePicker(a, b balancer.Picker) bool {
	if reflect.TypeOf(a) != reflect.TypeOf(b) {
		return false
	}
	if a == nil || !reflect.TypeOf(a).Comparable() {
		return fmt.Sprintf("%#v", a) == fmt.Sprintf("%#v", b)
	}
	return a == b
}

// TestReadyWeightsGrowth edits the kept weights as a fleet coming up and
// churning does, from one READY endpoint to hundreds, with a fill (a
// publish after a weight update) between runs of edits, and checks them
// against a fresh fill each time. insert grows the two buffers by
// append, whose capacities drift apart by element size; a fill that sized
// them all by one of them cut the others past their capacity.
func TestReadyWeightsGrowth(t *testing.T) {
	rnd := rand.New(rand.NewPCG(9, 10))
	var ready []Ready
	var w readyWeights
	newReady := func(k int) Ready {
		e := newEndpoint(fmt.Sprint(k), nil, false)
		e.weights.weight = float64(1 + k%7)
		e.weights.status = orcaweight.Usable
		return Ready{Stats: e, InvWeight: 1}
	}
	check := func(what string, w *readyWeights, ready []Ready) {
		t.Helper()
		var fresh readyWeights
		fresh.fill(ready)
		if !slices.Equal(w.ws, fresh.ws) || !slices.Equal(w.usable, fresh.usable) {
			t.Fatalf("%s: kept weights differ from a fresh fill over %d endpoints", what, len(ready))
		}
	}
	// A fleet of 1, 10 or 100 READY endpoints grows to every size up to
	// 300 more, edited in place; then a weight update drops the kept
	// weights, more endpoints turn READY (the list grows, the dropped
	// weights do not), and a publish fills them again.
	var pool []Ready
	for k := range 600 {
		pool = append(pool, newReady(k))
	}
	for _, from := range []int{1, 10, 100} {
		for mid := from + 1; mid <= from+300; mid++ {
			for _, more := range []int{0, 1, 3, 7, 20, 100} {
				var w readyWeights
				w.fill(pool[:from])
				for i := from; i < mid; i++ {
					w.insert(i, pool[i].Stats)
				}
				w.drop()
				to := mid + more
				w.fill(pool[:to])
				check(fmt.Sprintf("fill %d, grow to %d, drop, fill %d", from, mid, to), &w, pool[:to])
			}
		}
	}
	// A random walk of edits and fills.
	ready = append(ready, newReady(0))
	w.fill(ready)
	for step := 1; step < 3000; step++ {
		// As the balancer does: a weight update drops the kept weights,
		// the list is edited without them until a publish fills them.
		switch r := rnd.IntN(100); {
		case r < 3:
			w.drop()
		case r < 10:
			if !w.valid {
				w.fill(ready)
			}
		case r < 75 || len(ready) < 2:
			i := rnd.IntN(len(ready) + 1)
			ready = slices.Insert(ready, i, newReady(step))
			if w.valid {
				w.insert(i, ready[i].Stats)
			}
		default:
			i := rnd.IntN(len(ready))
			ready = slices.Delete(ready, i, i+1)
			if w.valid {
				w.remove(i)
			}
		}
		if w.valid {
			check(fmt.Sprintf("step %d", step), &w, ready)
		}
	}
	if len(ready) < 500 {
		t.Fatalf("the list reached %d endpoints, want hundreds: the test no longer grows it", len(ready))
	}
}

// TestReadyListUndo: an endpoint that leaves READY and comes back before
// anything else changes costs the list nothing; one that comes back to
// its place after a publish gets the list back as it was published before
// it left, the same array and no copy; a return after another edit, or to
// a list edited in place, copies as before.
func TestReadyListUndo(t *testing.T) {
	shared := &doneShared{}
	b := &engineBalancer{}
	var eps []*Endpoint
	for i := range 4 {
		e := newEndpoint(fmt.Sprint(i), shared, false)
		e.pos, e.weight, e.state = i, 1, connectivity.Ready
		eps = append(eps, e)
		b.order = append(b.order, e)
	}
	published, _ := b.pub.readyList.take(b.order)
	flip := func(e *Endpoint, s connectivity.State) []Ready {
		e.state = s
		b.pub.readyList.changed(e)
		return b.pub.readyList.ready
	}
	// A flap between publishes: the removal waits, and the return
	// cancels it.
	flip(eps[2], connectivity.Idle)
	flip(eps[2], connectivity.Connecting)
	if back := flip(eps[2], connectivity.Ready); &back[0] != &published[0] || len(back) != 4 || !b.pub.readyList.published || b.pub.readyList.out.e != nil {
		t.Fatalf("a flap between publishes: same array %v, %d endpoints, published %v, one out %v; want the published array, 4, published, none out",
			&back[0] == &published[0], len(back), b.pub.readyList.published, b.pub.readyList.out.e != nil)
	}
	// A change that edits nothing (a READY endpoint's new picker) leaves
	// the removal pending: the later return still copies nothing.
	flip(eps[2], connectivity.Idle)
	flip(eps[0], connectivity.Ready)
	if back := flip(eps[2], connectivity.Ready); &back[0] != &published[0] || b.pub.readyList.out.e != nil {
		t.Fatalf("a flap around another endpoint's change that edits nothing: same array %v, one out %v; want the published array, none out", &back[0] == &published[0], b.pub.readyList.out.e != nil)
	}
	flip(eps[2], connectivity.Idle)
	if out, _ := b.pub.readyList.take(b.order); len(out) != 3 || &out[0] == &published[0] || len(published) != 4 || published[2].Stats != eps[2] {
		t.Fatalf("a publish after a removal from a published list: %d endpoints, same array %v; want 3 in a copy, the published 4 unchanged", len(out), &out[0] == &published[0])
	}
	back := flip(eps[2], connectivity.Ready)
	if &back[0] != &published[0] || len(back) != 4 || !b.pub.readyList.published {
		t.Fatalf("the endpoint's return: same array %v, %d endpoints, published %v; want the published array back, 4, marked published", &back[0] == &published[0], len(back), b.pub.readyList.published)
	}
	// Its next edit copies it, as any published array's, once another
	// change settles the removal.
	flip(eps[0], connectivity.Idle)
	if out := flip(eps[1], connectivity.Idle); &out[0] == &published[0] || published[0].Stats != eps[0] || out[0].Stats != eps[1] {
		t.Fatal("an edit of the array taken back changed it in place")
	}
	// Another endpoint's change in between: the return copies.
	flip(eps[0], connectivity.Ready)
	flip(eps[1], connectivity.Ready)
	before, _ := b.pub.readyList.take(b.order)
	flip(eps[1], connectivity.Idle)
	flip(eps[3], connectivity.Idle)
	if back := flip(eps[1], connectivity.Ready); &back[0] == &before[0] || len(back) != 3 {
		t.Fatalf("a return after another edit: same array %v, %d endpoints; want a list of 3 of its own", &back[0] == &before[0], len(back))
	}
	want := b.pub.readyList.ready
	b.pub.readyList.invalidate()
	if got, _ := b.pub.readyList.take(b.order); !sameReady(got, want) {
		t.Fatal("the list edited differs from a scan of the endpoints")
	}
}

// readyFixed is a READY entry for e, whose child's READY picker is a
// fixedPicker, for pickers built directly on a snapshot.
func readyFixed(e *Endpoint, inv float64) Ready {
	e.followChild(connectivity.Ready, fixedPicker{}, false)
	return Ready{Stats: e, InvWeight: inv}
}
