package server

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// Service and method names. The services live in the pickwise namespace so
// they never collide with a real service a caller registers beside them,
// and they are spelled out here because there is no .proto file: the
// descriptors below are written by hand and the payloads are well-known
// types, which the default proto codec already marshals.
const (
	// BackendService serves the traffic that load-balancing policies place.
	BackendService = "pickwise.interop.Backend"
	// AdminService changes and inspects the server; the lab calls it on
	// the same port as the traffic, so one address is all it needs.
	AdminService = "pickwise.interop.Admin"

	// CallMethod is the traffic RPC: request *wrapperspb.StringValue (an
	// optional request key, only logged), reply *wrapperspb.StringValue
	// holding the server's name.
	CallMethod = "/" + BackendService + "/Call"
	// SetBehaviorMethod patches the behavior: request StringValue holding a
	// JSON patch (see Behavior.Patch), reply StringValue holding the full
	// resulting Behavior as JSON. A bad patch fails with InvalidArgument
	// and changes nothing.
	SetBehaviorMethod = "/" + AdminService + "/SetBehavior"
	// StatsMethod reads the counters: request *emptypb.Empty, reply
	// StringValue holding Stats as JSON.
	StatsMethod = "/" + AdminService + "/Stats"
	// ResetMethod zeroes the counters: request StringValue holding "" or
	// {"coldRestart": true} to also restart the cold-start clock (see
	// ResetRequest), reply StringValue holding Stats as JSON, taken just
	// after the reset.
	ResetMethod = "/" + AdminService + "/Reset"

	// TrailerBackend is the trailer key every Call sets to the server's
	// name, on success and failure alike: a failed RPC has no reply, and
	// the lab must still attribute the failure to a backend.
	TrailerBackend = "x-backend"
)

// handlers is what both service descriptors dispatch to. Its methods are
// unexported so that the RPC entry points do not widen Server's API.
type handlers interface {
	rpcCall(context.Context, *wrapperspb.StringValue) (proto.Message, error)
	rpcSetBehavior(context.Context, *wrapperspb.StringValue) (proto.Message, error)
	rpcStats(context.Context, *emptypb.Empty) (proto.Message, error)
	rpcReset(context.Context, *wrapperspb.StringValue) (proto.Message, error)
}

var backendDesc = grpc.ServiceDesc{
	ServiceName: BackendService,
	HandlerType: (*handlers)(nil),
	Methods: []grpc.MethodDesc{
		{MethodName: "Call", Handler: unary(CallMethod, handlers.rpcCall)},
	},
	Metadata: "pickwise/interop/server (hand-written)",
}

var adminDesc = grpc.ServiceDesc{
	ServiceName: AdminService,
	HandlerType: (*handlers)(nil),
	Methods: []grpc.MethodDesc{
		{MethodName: "SetBehavior", Handler: unary(SetBehaviorMethod, handlers.rpcSetBehavior)},
		{MethodName: "Stats", Handler: unary(StatsMethod, handlers.rpcStats)},
		{MethodName: "Reset", Handler: unary(ResetMethod, handlers.rpcReset)},
	},
	Metadata: "pickwise/interop/server (hand-written)",
}

// unary builds the method handler generated code would: decode the request,
// then call fn through the server's interceptor chain if there is one. The
// chain matters here, because grpc's per-call ORCA support is an
// interceptor and only sees calls that pass through it.
func unary[Req any, PReq interface {
	*Req
	proto.Message
}](fullMethod string, fn func(handlers, context.Context, PReq) (proto.Message, error)) grpc.MethodHandler {
	return func(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
		req := PReq(new(Req))
		if err := dec(req); err != nil {
			return nil, err
		}
		h := srv.(handlers)
		if interceptor == nil {
			return fn(h, ctx, req)
		}
		info := &grpc.UnaryServerInfo{Server: srv, FullMethod: fullMethod}
		return interceptor(ctx, req, info, func(ctx context.Context, req any) (any, error) {
			return fn(h, ctx, req.(PReq))
		})
	}
}
