package fleet

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pickwise/pickwise/interop/server"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"
)

// The names of the traffic RPC, from the server the backends run, for
// callers that build method configs or invoke the method themselves.
const (
	// ServiceName is the fully qualified name of the service backends
	// answer traffic on, for example in a method config's retry policy.
	ServiceName = server.BackendService
	// CallMethod is the full method name of the traffic RPC, for callers
	// that invoke it through grpc.ClientConn.Invoke: request and reply are
	// *wrapperspb.StringValue, the reply holding the backend's name.
	CallMethod = server.CallMethod
	// TrailerBackend is the trailer key every backend sets to its own name.
	// A failed RPC has no reply message, so the trailer is the only way a
	// client can tell which backend a failure came from.
	TrailerBackend = server.TrailerBackend
)

// schemeSeq makes every client's resolver scheme unique. Each manual resolver
// serves exactly one channel, and distinct schemes keep concurrent tests from
// ever resolving through one another's resolver.
var schemeSeq atomic.Uint64

// Client is a channel to fleet backends whose address list the test controls
// directly, through a manual resolver, instead of through DNS. That lets a
// test add, remove or reorder endpoints mid-run and watch the balancer react.
type Client struct {
	// Conn is the underlying channel, exposed for callers that need
	// connectivity state or want to invoke methods themselves.
	Conn *grpc.ClientConn
	// Resolver feeds Conn its endpoints; SetAddrs is the usual way to use it,
	// but tests may push richer state (attributes, weights) directly.
	Resolver *manual.Resolver
}

// Dial creates a client for addrs, one endpoint per address, balanced
// according to serviceConfig (JSON, for example
// `{"loadBalancingConfig":[{"round_robin":{}}]}`; empty means the gRPC
// default, pick_first). The config is installed as the channel's default
// service config and the resolver never sends one of its own, so it applies
// to every resolver update, including those from SetAddrs. The connection is
// plaintext because the backends are loopback test servers. opts are applied
// last and so can override the defaults, for instance to shorten reconnect
// backoff.
func Dial(addrs []string, serviceConfig string, opts ...grpc.DialOption) (*Client, error) {
	scheme := fmt.Sprintf("pickwise-fleet-%d", schemeSeq.Add(1))
	r := manual.NewBuilderWithScheme(scheme)
	r.InitialState(stateFor(addrs))

	dopts := []grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithResolvers(r),
	}
	if serviceConfig != "" {
		dopts = append(dopts, grpc.WithDefaultServiceConfig(serviceConfig))
	}
	dopts = append(dopts, opts...)

	conn, err := grpc.NewClient(scheme+":///test", dopts...)
	if err != nil {
		return nil, fmt.Errorf("fleet: dial: %w", err)
	}
	// Leave idle now rather than on the first RPC, so connections are being
	// set up while the caller prepares its workload.
	conn.Connect()
	return &Client{Conn: conn, Resolver: r}, nil
}

// stateFor builds resolver state with one single-address endpoint per
// backend, the shape modern (endpoint-aware) balancers expect.
func stateFor(addrs []string) resolver.State {
	eps := make([]resolver.Endpoint, len(addrs))
	for i, a := range addrs {
		eps[i] = resolver.Endpoint{Addresses: []resolver.Address{{Addr: a}}}
	}
	return resolver.State{Endpoints: eps}
}

// SetAddrs replaces the endpoint list, as a resolver would when servers join
// or leave. The service config from Dial keeps applying. When SetAddrs
// returns, the balancer has already processed the new list.
func (c *Client) SetAddrs(addrs []string) {
	c.Resolver.UpdateState(stateFor(addrs))
}

// Call makes one RPC and reports which backend answered. On failure it still
// names the backend when the server set the x-backend trailer, and returns ""
// when the call never reached a handler (for example no connection or a
// deadline that expired in the client). It is server.Call without a request
// key, so tests attribute calls exactly as the lab does.
func (c *Client) Call(ctx context.Context, opts ...grpc.CallOption) (backend string, err error) {
	return server.Call(ctx, c.Conn, "", opts...)
}

// Close tears down the channel and its connections.
func (c *Client) Close() error { return c.Conn.Close() }

// LoadResult summarizes a Load run from the client's point of view.
type LoadResult struct {
	// PerBackend counts calls per answering backend name, failures included
	// when the backend identified itself in its trailer.
	PerBackend map[string]int
	// Failed counts calls that returned an error, attributed or not.
	Failed int
	// Total counts calls actually made; it is below the requested total only
	// if ctx ended first.
	Total int
}

// Load sends total calls from workers concurrent goroutines, each call
// bounded by timeout (0 means only ctx bounds it), and tallies which backend
// handled each. Concurrency matters because balancers such as least-request
// only differ from round robin when calls overlap. Load stops early if ctx is
// done, so a stuck fleet cannot hang a test.
func (c *Client) Load(ctx context.Context, total, workers int, timeout time.Duration, opts ...grpc.CallOption) LoadResult {
	workers = max(1, min(workers, total))
	res := LoadResult{PerBackend: make(map[string]int)}
	var (
		mu      sync.Mutex
		claimed atomic.Int64 // calls handed out so far
		wg      sync.WaitGroup
	)
	for range workers {
		wg.Go(func() {
			for ctx.Err() == nil && claimed.Add(1) <= int64(total) {
				backend, err := c.callWithTimeout(ctx, timeout, opts)
				mu.Lock()
				res.Total++
				if backend != "" {
					res.PerBackend[backend]++
				}
				if err != nil {
					res.Failed++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return res
}

// callWithTimeout is Call with its own deadline, so the timer is released as
// soon as the call ends rather than when Load returns.
func (c *Client) callWithTimeout(ctx context.Context, timeout time.Duration, opts []grpc.CallOption) (string, error) {
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	return c.Call(ctx, opts...)
}
