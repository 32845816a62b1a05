package fleet

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// ServiceName is the fully qualified name of the test service. It lives in the
// pickwise namespace so it can never collide with a real service registered on
// the same server by a caller.
const ServiceName = "pickwise.fleet.Backend"

// CallMethod is the full method name of the single RPC. Clients pass it to
// grpc.ClientConn.Invoke directly because there is no generated stub.
const CallMethod = "/" + ServiceName + "/Call"

// TrailerBackend is the trailer key every backend sets to its own name. A
// failed RPC has no reply message, so the trailer is the only way a client can
// tell which backend a failure came from.
const TrailerBackend = "x-backend"

// BackendServer is what a type must implement to be registered with
// ServiceDesc. It is exported so tests elsewhere can serve the same method
// with their own logic and still be called by Client.
type BackendServer interface {
	Call(ctx context.Context, req *wrapperspb.StringValue) (*wrapperspb.StringValue, error)
}

// ServiceDesc describes the service by hand so that the fleet needs no protoc
// step; the well-known StringValue type carries the payload, which the
// default proto codec already knows how to marshal.
var ServiceDesc = grpc.ServiceDesc{
	ServiceName: ServiceName,
	HandlerType: (*BackendServer)(nil),
	Methods: []grpc.MethodDesc{{
		MethodName: "Call",
		Handler:    callHandler,
	}},
	Metadata: "pickwise/fleet (hand-written)",
}

// callHandler decodes the request and dispatches to the BackendServer,
// routing through the server's unary interceptor when one is installed so
// interceptors behave as they would for generated code.
func callHandler(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
	req := new(wrapperspb.StringValue)
	if err := dec(req); err != nil {
		return nil, err
	}
	s := srv.(BackendServer)
	if interceptor == nil {
		return s.Call(ctx, req)
	}
	info := &grpc.UnaryServerInfo{Server: srv, FullMethod: CallMethod}
	return interceptor(ctx, req, info, func(ctx context.Context, req any) (any, error) {
		return s.Call(ctx, req.(*wrapperspb.StringValue))
	})
}
