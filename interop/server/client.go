package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	v3orcapb "github.com/cncf/xds/go/xds/data/orca/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// ORCATrailerKey is the trailer key that carries a per-call ORCA load
// report, a binary OrcaLoadReport (gRFC A51).
const ORCATrailerKey = "endpoint-load-metrics-bin"

// SetBehavior patches the behavior of the server behind conn through the
// admin RPC and returns the resulting behavior. patchJSON holds only the
// fields to change, for example `{"latency":"50ms","orca":{"perCall":true}}`;
// see Behavior.Patch. An invalid patch fails with codes.InvalidArgument and
// changes nothing. conn must reach one server: through a balancer, each
// admin call would go to whichever backend the policy picks.
func SetBehavior(ctx context.Context, conn grpc.ClientConnInterface, patchJSON string) (Behavior, error) {
	reply := new(wrapperspb.StringValue)
	if err := conn.Invoke(ctx, SetBehaviorMethod, wrapperspb.String(patchJSON), reply); err != nil {
		return Behavior{}, err
	}
	var b Behavior
	if err := decodeStrict(reply.GetValue(), &b); err != nil {
		return Behavior{}, fmt.Errorf("%sdecode SetBehavior reply: %w", errPrefix, err)
	}
	return b, nil
}

// FetchStats reads the Stats of the server behind conn.
func FetchStats(ctx context.Context, conn grpc.ClientConnInterface) (Stats, error) {
	reply := new(wrapperspb.StringValue)
	if err := conn.Invoke(ctx, StatsMethod, new(emptypb.Empty), reply); err != nil {
		return Stats{}, err
	}
	return decodeStats(reply)
}

// Reset zeroes the counters of the server behind conn, also restarting its
// cold-start clock if coldRestart is set, and returns its Stats just after.
func Reset(ctx context.Context, conn grpc.ClientConnInterface, coldRestart bool) (Stats, error) {
	req, err := json.Marshal(ResetRequest{ColdRestart: coldRestart})
	if err != nil {
		return Stats{}, err
	}
	reply := new(wrapperspb.StringValue)
	if err := conn.Invoke(ctx, ResetMethod, wrapperspb.String(string(req)), reply); err != nil {
		return Stats{}, err
	}
	return decodeStats(reply)
}

func decodeStats(reply *wrapperspb.StringValue) (Stats, error) {
	var st Stats
	if err := decodeStrict(reply.GetValue(), &st); err != nil {
		return Stats{}, fmt.Errorf("%sdecode Stats reply: %w", errPrefix, err)
	}
	return st, nil
}

// Call makes one Backend/Call with request key key and reports which
// server handled it: the reply on success, the x-backend trailer on
// failure, "" if the call never reached a server. opts are passed to
// Invoke, for example grpc.Trailer to read the ORCA report too.
func Call(ctx context.Context, conn grpc.ClientConnInterface, key string, opts ...grpc.CallOption) (backend string, err error) {
	var trailer metadata.MD
	// The full slice expression forces a copy, so callers sharing one opts
	// slice across goroutines never append into the same array.
	opts = append(opts[:len(opts):len(opts)], grpc.Trailer(&trailer))
	reply := new(wrapperspb.StringValue)
	if err := conn.Invoke(ctx, CallMethod, wrapperspb.String(key), reply, opts...); err != nil {
		if v := trailer.Get(TrailerBackend); len(v) > 0 {
			return v[0], err
		}
		return "", err
	}
	return reply.GetValue(), nil
}

// ParseLoadReport decodes the per-call ORCA report in a call's trailer. It
// returns nil and no error when there is none (per-call ORCA is off).
// grpc's own decoder for this lives in an internal package, so clients of
// this module need their own.
func ParseLoadReport(trailer metadata.MD) (*v3orcapb.OrcaLoadReport, error) {
	vs := trailer.Get(ORCATrailerKey)
	switch len(vs) {
	case 0:
		return nil, nil
	case 1:
	default:
		return nil, fmt.Errorf("%s%d ORCA load reports in one trailer, want 1", errPrefix, len(vs))
	}
	r := new(v3orcapb.OrcaLoadReport)
	if err := proto.Unmarshal([]byte(vs[0]), r); err != nil {
		return nil, fmt.Errorf("%sdecode ORCA load report: %w", errPrefix, err)
	}
	return r, nil
}

// decodeStrict decodes exactly one JSON value into v, rejecting unknown
// fields and trailing data, so that a client and server from different
// versions fail loudly instead of silently dropping a field.
func decodeStrict(s string, v any) error {
	dec := json.NewDecoder(strings.NewReader(s))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return errors.New(strings.TrimPrefix(err.Error(), "json: "))
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("unexpected data after the JSON value")
	}
	return nil
}
