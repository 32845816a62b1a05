// Package xdsenv starts, on 127.0.0.1, a set of gRPC backends and a
// go-control-plane xDS management server that serves one Listener, one
// (inline) RouteConfiguration, one EDS Cluster and one
// ClusterLoadAssignment per service. The Cluster's load_balancing_policy
// names a pickwise policy through an xds.type.v3.TypedStruct (gRFC A52),
// with the policy's JSON config as the TypedStruct's value.
package xdsenv

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strconv"
	"sync"

	xdstypev3 "github.com/cncf/xds/go/xds/type/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	wrrlocalityv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/load_balancing_policies/wrr_locality/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/pickwise/pickwise/interop/server"
)

// NodeID is the node id the bootstrap gives the client.
const NodeID = "pickwise-example-client"

// Endpoint is one entry of a service's ClusterLoadAssignment.
type Endpoint struct {
	Addr   string // host:port
	Weight uint32 // EDS load_balancing_weight; 0 leaves it unset
}

// Service is what the management server serves for one xds:///Name target.
type Service struct {
	Name      string
	Policy    string // registered policy name, e.g. "pickwise_p2c"
	Config    string // the policy's JSON config, e.g. `{}`
	Endpoints []Endpoint
	// PerLocality wraps the policy in Envoy's WrrLocality, as control
	// planes do when traffic is split across localities first: grpc then
	// runs one instance of the policy per locality (weighted_target), and
	// each knows its locality (the grpc.lb.locality metrics label).
	PerLocality bool
}

// Env is a running management server and its backends.
type Env struct {
	Backends []*server.Server
	Addrs    []string // Addrs[i] is Backends[i]'s address

	cache   cachev3.SnapshotCache
	srv     *grpc.Server
	addr    string
	mu      sync.Mutex
	version int
	svcs    map[string]Service
}

// Start starts n backends named backend-0 ... and the management server.
func Start(n int) (*Env, error) {
	e := &Env{svcs: map[string]Service{}}
	for i := range n {
		b, err := server.New(fmt.Sprintf("backend-%d", i), server.Behavior{})
		if err != nil {
			e.Stop()
			return nil, err
		}
		addr, err := b.Start("127.0.0.1:0")
		if err != nil {
			e.Stop()
			return nil, err
		}
		e.Backends = append(e.Backends, b)
		e.Addrs = append(e.Addrs, addr)
	}
	e.cache = cachev3.NewSnapshotCache(false, cachev3.IDHash{}, nil)
	xs := serverv3.NewServer(context.Background(), e.cache, nil)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		e.Stop()
		return nil, err
	}
	e.addr = lis.Addr().String()
	e.srv = grpc.NewServer()
	discoveryv3.RegisterAggregatedDiscoveryServiceServer(e.srv, xs)
	go e.srv.Serve(lis)
	return e, nil
}

// Bootstrap returns the xDS bootstrap JSON pointing at the management
// server, for GRPC_XDS_BOOTSTRAP_CONFIG.
func (e *Env) Bootstrap() string {
	b, _ := json.Marshal(map[string]any{
		"xds_servers": []any{map[string]any{
			"server_uri":      e.addr,
			"channel_creds":   []any{map[string]any{"type": "insecure"}},
			"server_features": []string{"xds_v3"},
		}},
		"node": map[string]any{"id": NodeID},
	})
	return string(b)
}

// Patch changes backend i's behavior with f, the way the tests and the
// program set a backend's latency or its ORCA reports.
func (e *Env) Patch(i int, f func(*server.Behavior)) error {
	b := e.Backends[i].Behavior()
	f(&b)
	return e.Backends[i].SetBehavior(b)
}

// Stop stops the management server and the backends.
func (e *Env) Stop() {
	if e.srv != nil {
		e.srv.Stop()
	}
	for _, b := range e.Backends {
		b.Stop()
	}
}

// Set adds or replaces a service and pushes a new snapshot.
func (e *Env) Set(ctx context.Context, s Service) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.svcs[s.Name] = s
	e.version++
	res := map[resource.Type][]types.Resource{}
	for _, s := range e.svcs {
		l, c, cla, err := resources(s)
		if err != nil {
			return err
		}
		res[resource.ListenerType] = append(res[resource.ListenerType], l)
		res[resource.ClusterType] = append(res[resource.ClusterType], c)
		res[resource.EndpointType] = append(res[resource.EndpointType], cla)
	}
	snap, err := cachev3.NewSnapshot(strconv.Itoa(e.version), res)
	if err != nil {
		return err
	}
	return e.cache.SetSnapshot(ctx, NodeID, snap)
}

func mustAny(m proto.Message) *anypb.Any {
	a, err := anypb.New(m)
	if err != nil {
		panic(err)
	}
	return a
}

func resources(s Service) (*listenerv3.Listener, *clusterv3.Cluster, *endpointv3.ClusterLoadAssignment, error) {
	cluster := "cluster-" + s.Name
	hcm := &hcmv3.HttpConnectionManager{
		RouteSpecifier: &hcmv3.HttpConnectionManager_RouteConfig{RouteConfig: &routev3.RouteConfiguration{
			Name: "route-" + s.Name,
			VirtualHosts: []*routev3.VirtualHost{{
				Name:    "vh-" + s.Name,
				Domains: []string{"*"},
				Routes: []*routev3.Route{{
					Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}},
					Action: &routev3.Route_Route{Route: &routev3.RouteAction{
						ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: cluster},
					}},
				}},
			}},
		}},
		HttpFilters: []*hcmv3.HttpFilter{{
			Name:       "router",
			ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustAny(&routerv3.Router{})},
		}},
	}
	l := &listenerv3.Listener{
		Name:        s.Name,
		ApiListener: &listenerv3.ApiListener{ApiListener: mustAny(hcm)},
	}

	var cfg map[string]any
	if err := json.Unmarshal([]byte(s.Config), &cfg); err != nil {
		return nil, nil, nil, fmt.Errorf("xdsenv: %s config: %w", s.Policy, err)
	}
	st, err := structpb.NewStruct(cfg)
	if err != nil {
		return nil, nil, nil, err
	}
	policy := &clusterv3.LoadBalancingPolicy{Policies: []*clusterv3.LoadBalancingPolicy_Policy{{
		TypedExtensionConfig: &corev3.TypedExtensionConfig{
			Name: s.Policy,
			TypedConfig: mustAny(&xdstypev3.TypedStruct{
				// gRFC A52: the last path component names the policy.
				TypeUrl: "type.googleapis.com/" + s.Policy,
				Value:   st,
			}),
		},
	}}}
	if s.PerLocality {
		policy = &clusterv3.LoadBalancingPolicy{Policies: []*clusterv3.LoadBalancingPolicy_Policy{{
			TypedExtensionConfig: &corev3.TypedExtensionConfig{
				Name:        "wrr_locality",
				TypedConfig: mustAny(&wrrlocalityv3.WrrLocality{EndpointPickingPolicy: policy}),
			},
		}}}
	}
	c := &clusterv3.Cluster{
		Name:                 cluster,
		ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_EDS},
		EdsClusterConfig: &clusterv3.Cluster_EdsClusterConfig{
			EdsConfig: &corev3.ConfigSource{
				ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}},
			},
			ServiceName: cluster,
		},
		LoadBalancingPolicy: policy,
	}

	var lbs []*endpointv3.LbEndpoint
	for _, ep := range s.Endpoints {
		host, portStr, err := net.SplitHostPort(ep.Addr)
		if err != nil {
			return nil, nil, nil, err
		}
		port, _ := strconv.Atoi(portStr)
		lb := &endpointv3.LbEndpoint{
			HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{
				Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
					Address:       host,
					PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: uint32(port)},
				}}},
			}},
			HealthStatus: corev3.HealthStatus_HEALTHY,
		}
		if ep.Weight > 0 {
			lb.LoadBalancingWeight = wrapperspb.UInt32(ep.Weight)
		}
		lbs = append(lbs, lb)
	}
	cla := &endpointv3.ClusterLoadAssignment{
		ClusterName: cluster,
		Endpoints: []*endpointv3.LocalityLbEndpoints{{
			Locality:            &corev3.Locality{Region: "local", Zone: "a"},
			LbEndpoints:         lbs,
			LoadBalancingWeight: wrapperspb.UInt32(1),
			Priority:            0,
		}},
	}
	return l, c, cla, nil
}
