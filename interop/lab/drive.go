package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pickwise/pickwise/interop/server"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/experimental/balancer/weight"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"
)

// keyHeader carries a call's hash key to ring_hash_experimental (its
// requestHashHeader option).
const keyHeader = "x-lab-key"

// channel is a client channel to the fleet through a manual resolver, so a
// scenario can set endpoint weights and change membership.
type channel struct {
	conn *grpc.ClientConn
	res  *manual.Resolver
	// nameOf maps a backend address to its name, to attribute calls that
	// failed before the backend could say who it is (a deadline).
	nameOf map[string]string
}

var schemeSeq atomic.Int64

// dial opens a channel to the fleet's backends listed in members, with the
// given service config and, if weights is not nil, per-backend weights;
// opts are added to the channel's (an interceptor).
func dial(f *labFleet, serviceConfig string, members []int, weights map[int]uint32, opts ...grpc.DialOption) (*channel, error) {
	r := manual.NewBuilderWithScheme(fmt.Sprintf("pickwise-lab-%d", schemeSeq.Add(1)))
	r.InitialState(endpointsState(f, members, weights))
	conn, err := grpc.NewClient(r.Scheme()+":///lab", append([]grpc.DialOption{
		grpc.WithResolvers(r),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultServiceConfig(serviceConfig)}, opts...)...)
	if err != nil {
		return nil, err
	}
	conn.Connect()
	nameOf := map[string]string{}
	for i, a := range f.addrs {
		nameOf[a] = f.names[i]
	}
	return &channel{conn: conn, res: r, nameOf: nameOf}, nil
}

func endpointsState(f *labFleet, members []int, weights map[int]uint32) resolver.State {
	var eps []resolver.Endpoint
	for _, i := range members {
		ep := resolver.Endpoint{Addresses: []resolver.Address{{Addr: f.addrs[i]}}}
		if w, ok := weights[i]; ok {
			ep = weight.Set(ep, weight.EndpointInfo{Weight: w})
		}
		eps = append(eps, ep)
	}
	return resolver.State{Endpoints: eps}
}

// setMembers changes the channel's endpoints.
func (c *channel) setMembers(f *labFleet, members []int) {
	c.res.UpdateState(endpointsState(f, members, nil))
}

// warm makes calls until every member has answered once, so a scenario
// measures placement rather than connection setup.
func (c *channel) warm(ctx context.Context, want int) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	seen := map[string]bool{}
	for len(seen) < want {
		if ctx.Err() != nil {
			return fmt.Errorf("only %d of %d backends answered while warming up", len(seen), want)
		}
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		// A backend that answers with an error still answered: it names
		// itself in the trailer.
		if b, _ := server.Call(cctx, c.conn, "", grpc.WaitForReady(true)); b != "" {
			seen[b] = true
		}
		cancel()
	}
	return nil
}

// traffic is what a scenario sends.
type traffic struct {
	calls int
	// rate, when positive, sends calls open-loop at that many per second,
	// as independent users would; otherwise workers callers loop.
	rate float64
	// seed seeds the gaps between open-loop arrivals (lab.run sets the
	// lab's).
	seed    uint64
	workers int
	// deadline bounds each call (0: a generous default).
	deadline time.Duration
	// key names call i's hash key; nil sends none.
	key func(i int) string
	// duration, when positive, bounds the run by time instead of by
	// calls (closed-loop workers only).
	duration time.Duration
	// window, when positive, also counts calls per backend in windows of
	// that length from the run's start (outcome.windows).
	window time.Duration
	// until, when not nil, ends an open-loop run once closed: no call
	// arrives after it, and calls is only a bound.
	until <-chan struct{}
	// trace keeps every call's backend and times (outcome.trace).
	trace bool
}

// outcome is what the channel saw.
type outcome struct {
	total, failed int
	perBackend    map[string]int
	latencies     []time.Duration // successful calls, sorted
	// keyBackend is the backend of each key's calls; keySplit marks keys
	// whose calls went to more than one backend.
	keyBackend map[string]string
	keySplit   map[string]bool
	// windows, with traffic.window, count each window's calls: per
	// backend, failed and in all.
	windows []window
	// trace, with traffic.trace, is every call in the order they ended.
	trace []callTrace
}

// callTrace is one call: the backend that answered it ("" if none is
// known), when it started and ended, and its error if it failed.
type callTrace struct {
	backend    string
	start, end time.Time
	err        error
}

// window is one stretch of a run.
type window struct {
	perBackend    map[string]int
	failed, total int
}

// drive sends tr through c and reports progress as calls complete.
func drive(ctx context.Context, c *channel, tr traffic, progress func(done int)) outcome {
	var (
		mu   sync.Mutex
		out  = outcome{perBackend: map[string]int{}, keyBackend: map[string]string{}, keySplit: map[string]bool{}}
		done atomic.Int64
		wg   sync.WaitGroup
	)
	deadline := tr.deadline
	if deadline == 0 {
		deadline = 10 * time.Second
	}
	began := time.Now()
	one := func(i int) {
		defer wg.Done()
		cctx, cancel := context.WithTimeout(ctx, deadline)
		defer cancel()
		key := ""
		if tr.key != nil {
			key = tr.key(i)
			cctx = metadata.AppendToOutgoingContext(cctx, keyHeader, key)
		}
		var p peer.Peer
		start := time.Now()
		b, err := server.Call(cctx, c.conn, key, grpc.Peer(&p))
		end := time.Now()
		lat := end.Sub(start)
		if b == "" && p.Addr != nil {
			b = c.nameOf[p.Addr.String()]
		}
		mu.Lock()
		if tr.trace {
			out.trace = append(out.trace, callTrace{backend: b, start: start, end: end, err: err})
		}
		out.total++
		if b != "" {
			out.perBackend[b]++
		}
		if tr.window > 0 {
			w := int(start.Sub(began) / tr.window)
			for len(out.windows) <= w {
				out.windows = append(out.windows, window{perBackend: map[string]int{}})
			}
			out.windows[w].total++
			if b != "" {
				out.windows[w].perBackend[b]++
			}
			if err != nil {
				out.windows[w].failed++
			}
		}
		if err != nil {
			out.failed++
		} else {
			out.latencies = append(out.latencies, lat)
			if key != "" {
				if prev, ok := out.keyBackend[key]; ok && prev != b {
					out.keySplit[key] = true
				}
				out.keyBackend[key] = b
			}
		}
		mu.Unlock()
		progress(int(done.Add(1)))
	}
	if tr.rate > 0 {
		// Open loop: arrivals do not wait for earlier calls, so a slow
		// backend's queue grows as it would under real users. Independent
		// users arrive as a Poisson process: evenly spaced arrivals would
		// hand round_robin a rotation in which each backend's calls come
		// exactly n gaps apart, a queue-free schedule no real traffic
		// gives. The gaps come from tr.seed, so that the policies of a
		// scenario see the same arrivals.
		start := time.Now()
		gaps := rand.New(rand.NewPCG(tr.seed, tr.seed))
		var at float64                   // seconds from start
		sem := make(chan struct{}, 4096) // bounds goroutines if the fleet stalls
		for i := 0; i < tr.calls && ctx.Err() == nil && !closed(tr.until); i++ {
			if i > 0 {
				at += gaps.ExpFloat64() / tr.rate
			}
			if wait := time.Until(start.Add(time.Duration(at * float64(time.Second)))); wait > 0 {
				time.Sleep(wait)
			}
			sem <- struct{}{}
			wg.Add(1)
			go func(i int) {
				defer func() { <-sem }()
				one(i)
			}(i)
		}
	} else {
		next := atomic.Int64{}
		for w := 0; w < max(tr.workers, 1); w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for ctx.Err() == nil {
					i := int(next.Add(1)) - 1
					if tr.duration > 0 {
						if time.Since(began) >= tr.duration {
							return
						}
					} else if i >= tr.calls {
						return
					}
					wg.Add(1)
					one(i)
				}
			}()
		}
	}
	wg.Wait()
	sort.Slice(out.latencies, func(i, j int) bool { return out.latencies[i] < out.latencies[j] })
	return out
}

// closed reports whether ch is closed; a nil ch never is.
func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// shares returns each backend's share of calls, in the fleet's order.
func (o outcome) shares(f *labFleet) []float64 {
	out := make([]float64, len(f.names))
	if o.total == 0 {
		return out
	}
	for i, n := range f.names {
		out[i] = float64(o.perBackend[n]) / float64(o.total)
	}
	return out
}
