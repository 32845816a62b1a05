package sim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	v3orcapb "github.com/cncf/xds/go/xds/data/orca/v3"
	"github.com/pickwise/pickwise/internal/engine"
	"github.com/pickwise/pickwise/internal/fakecc"
	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/experimental/balancer/weight"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/serviceconfig"
)

// Policy is one column of a scenario table: a load-balancing policy and
// how to build it for a simulated client.
type Policy struct {
	// Name is the column header.
	Name string
	// Note is printed under the table when not empty: what about this
	// column a reader must know (unseeded randomness, wall-clock timers).
	Note string

	newInstance func(env *env) (instance, error)
}

// instance is one client's balancer as the simulator drives it.
type instance interface {
	// setBackends replaces the endpoint list.
	setBackends(ids []int) error
	// pick chooses a backend; done reports the outcome when the request
	// ends: err nil for success, load the backend's ORCA report when the
	// answer carried one (see report.go), nil otherwise.
	pick(req *Request) (backend int, done finishFunc, err error)
	close()
}

// finishFunc ends a call at the balancer that placed it: err is nil for
// success, and load is the ORCA report the backend's answer carried (nil
// when none did).
type finishFunc = func(err error, load *v3orcapb.OrcaLoadReport)

// env is what an instance may use: the virtual clock, a seeded source and
// the backend specs (for weights).
type env struct {
	loop     *Loop
	rand     *rand.Rand
	seed     uint64
	backends []Backend
	prober   engine.LoadProber // the backends' answers to load probes
	// servers is the backends' true state, indexed like backends. Only
	// the oracle baseline reads it: a real policy knows what its own calls
	// told it.
	servers []*server
}

// HashHeader is the request metadata key that carries a request's hash key
// to grpc-go's ring_hash_experimental (its requestHashHeader option).
const HashHeader = "x-sim-key"

// GRPC is a column for the policy registered in grpc's balancer registry
// under name, with the given JSON config. pickwise's own policies are built
// with the simulator's virtual clock and a seeded random source; others run
// as grpc-go ships them, and their column says that their randomness is not
// seeded.
func GRPC(label, name, config string) Policy {
	p := Policy{Name: label}
	_, ours := engine.Lookup(name)
	if _, parent := engine.LookupParent(name); !ours && !parent {
		p.Note = label + ": grpc-go's own code; its random choices come from the global source, not the run's seed"
	}
	p.newInstance = func(e *env) (instance, error) { return newGRPCInstance(e, name, config) }
	return p
}

// grpcInstance is a real grpc balancer over a fake ClientConn whose SubConns
// the simulator connects instantly, whenever the balancer asks: at an
// endpoint update, when a pick is queued (ErrNoSubConnAvailable) and after
// every pick. A lazy policy's endpoints, which connect only when a pick
// needs them, are woken by warm at every endpoint update, so that the run's
// placements depend on its seed alone.
type grpcInstance struct {
	env     *env
	cc      *fakecc.ClientConn
	bal     balancer.Balancer
	cfg     serviceconfig.LoadBalancingConfig
	handled map[*fakecc.SubConn]int // connect requests already served
	ids     map[balancer.SubConn]int
	lazy    bool   // a pickwise policy that connects endpoints only for picks (Spec.Lazy)
	target  string // the balancer's channel target, unique to the instance
}

// instanceSeq numbers instances, for their targets. Runs build their
// instances on one goroutine each; a scenario's runs may overlap, hence
// the lock.
var (
	instanceMu  sync.Mutex
	instanceSeq int
)

func newGRPCInstance(e *env, name, config string) (*grpcInstance, error) {
	builder := balancer.Get(name)
	if builder == nil {
		return nil, fmt.Errorf("sim: no balancer registered as %q", name)
	}
	in := &grpcInstance{env: e, cc: fakecc.NewClientConn(), handled: map[*fakecc.SubConn]int{}, ids: map[balancer.SubConn]int{}}
	instanceMu.Lock()
	instanceSeq++
	seq := instanceSeq
	instanceMu.Unlock()
	bOpts := balancer.BuildOptions{Target: resolver.Target{URL: url.URL{Scheme: "sim", Path: fmt.Sprintf("/instance-%d", seq)}}}
	in.target = bOpts.Target.String()
	if parser, ok := builder.(balancer.ConfigParser); ok {
		cfg, err := parser.ParseConfig(json.RawMessage(config))
		if err != nil {
			return nil, err
		}
		in.cfg = cfg
	}
	if build, parent := engine.LookupParent(name); parent {
		// A pickwise parent passes the run's clock and source on to its
		// pickwise children.
		in.cc.Metrics = nil
		in.bal = build(in.cc, bOpts, engine.Options{
			Clock:      e.loop.clock(),
			Rand:       engine.NewSeededRand(e.rand.Uint64()),
			LoadProber: e.prober,
		})
	} else if spec, ours := engine.Lookup(name); ours {
		in.lazy = spec.Lazy
		// No recorder: a run's metrics would only pile up in memory, and
		// their flushes would add events to the loop.
		in.cc.Metrics = nil
		in.bal = spec.Build(in.cc, bOpts, engine.Options{
			Clock:      e.loop.clock(),
			Rand:       engine.NewSeededRand(e.rand.Uint64()),
			LoadProber: e.prober,
		})
	} else {
		in.bal = builder.Build(in.cc, bOpts)
	}
	return in, nil
}

// grpcDone adapts a pick's Done to the simulator's outcome, as grpc fills
// DoneInfo: ServerLoad holds the trailer's ORCA report, and is a nil
// interface, not a nil pointer, when there was none.
func grpcDone(done func(balancer.DoneInfo)) finishFunc {
	return func(err error, load *v3orcapb.OrcaLoadReport) {
		if done == nil {
			return
		}
		info := balancer.DoneInfo{Err: err, BytesSent: true, BytesReceived: true}
		if load != nil {
			info.ServerLoad = load
		}
		done(info)
	}
}

func backendAddr(id int) string { return "backend-" + strconv.Itoa(id) }

func (in *grpcInstance) setBackends(ids []int) error {
	eps := make([]resolver.Endpoint, len(ids))
	for i, id := range ids {
		eps[i] = resolver.Endpoint{Addresses: []resolver.Address{{Addr: backendAddr(id)}}}
		if w := in.env.backends[id].Weight; w > 0 {
			eps[i] = weight.Set(eps[i], weight.EndpointInfo{Weight: w})
		}
	}
	err := in.bal.UpdateClientConnState(balancer.ClientConnState{
		ResolverState:  resolver.State{Endpoints: eps},
		BalancerConfig: in.cfg,
	})
	in.quiesce()
	if len(ids) == 0 {
		return nil // the balancer reports TRANSIENT_FAILURE; picks fail
	}
	if err == nil && in.lazy {
		err = in.warm(ids)
	}
	return err
}

// warmKeys bounds the keys warm tries: with n endpoints, n x 100 random
// keys miss one whose share is 1/n with a chance of e^-100.
const warmKeys = 100

// warm connects every endpoint of a lazy policy before the run uses it, as
// a client's first calls would, with keyed calls that end at once. A pick
// on an IDLE endpoint wakes it on a goroutine of grpc's (balancer/lazy):
// when the pick queues, pick waits for that, but a pick that wakes one
// endpoint and is placed on another (pickwise_ring_hash's bounded load
// walking past a full endpoint) would leave the wake to land at a
// wall-clock moment, and the placements after it would depend on the
// scheduler rather than the seed. With no call in flight every key goes to
// its first choice, so here every wake is one that queues its pick. (A
// change of a lazy policy's endpoints while its calls are in flight could
// still wake one without queuing; no scenario makes one.)
func (in *grpcInstance) warm(ids []int) error {
	want := make(map[int]bool, len(ids))
	for _, id := range ids {
		want[id] = true
	}
	for k := 0; len(want) > 0 && k < warmKeys*len(ids); k++ {
		// Keys of their own, so that no scenario's key stream is touched.
		id, done, err := in.pick(&Request{Key: keyID(-1 - k), HasKey: true})
		if err != nil {
			return fmt.Errorf("sim: warming up: %w", err)
		}
		done(nil, nil)
		delete(want, id)
	}
	return nil
}

var (
	connecting = balancer.SubConnState{ConnectivityState: connectivity.Connecting}
	ready      = balancer.SubConnState{ConnectivityState: connectivity.Ready}
)

func (in *grpcInstance) close() { in.bal.Close() }

// settle connects every SubConn the balancer asked to connect, until it
// asks for nothing more: connection setup takes no virtual time. It reports
// whether it connected any.
func (in *grpcInstance) settle() bool {
	connected := false
	for changed := true; changed; {
		changed = false
		for _, sc := range in.cc.SubConns() {
			if sc.IsShutdown() || sc.Connects() == in.handled[sc] {
				continue
			}
			in.handled[sc] = sc.Connects()
			sc.UpdateState(connecting)
			sc.UpdateState(ready)
			changed, connected = true, true
		}
	}
	return connected
}

// quiesce lets a pickwise balancer's wakes (the goroutines that ask its
// children to connect) return, and connects what they and the balancer
// asked for, until neither is left. A wake runs the balancer's code, which
// reads the virtual clock, so none may be left running while the loop
// moves the clock on; and its connection comes up at once, as settle's
// always do, so that the run does not depend on when the goroutine ran. It
// reports whether it connected any.
func (in *grpcInstance) quiesce() bool {
	connected := false
	for {
		if w, ok := in.bal.(interface{ WaitWakes() }); ok {
			w.WaitWakes()
		}
		if !in.settle() {
			return connected
		}
		connected = true
	}
}

// awaitBalancer waits, in wall time, until the balancer asks for a
// connection or reports a state newer than the `seen`-th. Some balancers
// leave idle on a goroutine of their own (ring_hash's lazy children call
// ExitIdle with go), so the work a pick caused comes after the pick
// returned; a real RPC would block until then.
func (in *grpcInstance) awaitBalancer(seen int) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return in.cc.WaitFor(ctx, func(balancer.State) error {
		if in.cc.Updates() > seen || in.connectRequested() {
			return nil
		}
		return errors.New("sim: the balancer queued a pick and never acted on it")
	})
}

// connectRequested reports whether a SubConn asked to connect since settle
// last ran.
func (in *grpcInstance) connectRequested() bool {
	for _, sc := range in.cc.SubConns() {
		if !sc.IsShutdown() && sc.Connects() != in.handled[sc] {
			return true
		}
	}
	return false
}

func (in *grpcInstance) pick(req *Request) (int, finishFunc, error) {
	info := balancer.PickInfo{FullMethodName: "/sim.Backend/Call", Ctx: context.Background()}
	if req.ctx != nil {
		info.Ctx = req.ctx
	}
	if req.HasKey {
		info.Ctx = metadata.AppendToOutgoingContext(info.Ctx, HashHeader, strconv.FormatUint(req.Key, 10))
	}
	for attempt := 0; ; attempt++ {
		seen := in.cc.Updates()
		p := in.cc.State().Picker
		if p == nil {
			return -1, nil, errors.New("no picker")
		}
		res, err := p.Pick(info)
		if errors.Is(err, balancer.ErrNoSubConnAvailable) && attempt < 8 {
			// grpc would block the RPC until the next picker; here the
			// balancer's connections come up at once, or, when it has not
			// asked for one yet, as soon as it does.
			if !in.quiesce() {
				if err := in.awaitBalancer(seen); err != nil {
					return -1, nil, err
				}
			}
			continue
		}
		if err != nil {
			return -1, nil, err
		}
		// A lazy policy (gRFC A61) may wake an IDLE endpoint during a pick
		// that succeeds elsewhere (pickwise_ring_hash does, for a bounded
		// key that walks past a full endpoint): a connection it has asked
		// for comes up at once, as settle's always do.
		in.quiesce()
		id, ok := in.ids[res.SubConn]
		if !ok {
			id, err = strconv.Atoi(strings.TrimPrefix(res.SubConn.(*fakecc.SubConn).Addr(), "backend-"))
			if err != nil {
				return -1, nil, err
			}
			in.ids[res.SubConn] = id
		}
		return id, grpcDone(res.Done), nil
	}
}
