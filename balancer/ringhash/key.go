package ringhash

import (
	"context"

	"github.com/cespare/xxhash/v2"
	"google.golang.org/grpc/metadata"
)

// keyContextKey is the context key WithKey stores a key's hash under. A
// zero-size struct, so that looking it up allocates nothing.
type keyContextKey struct{}

// WithKey returns a context whose RPCs pickwise_ring_hash places by key:
// every RPC with the same key goes to the same endpoint while the endpoint
// set is unchanged. The key is hashed here, once, so the pick itself reads
// a number from the context and allocates nothing. A key set with WithKey
// wins over the requestHashHeader.
func WithKey(ctx context.Context, key string) context.Context {
	return context.WithValue(ctx, keyContextKey{}, hashKey(key))
}

// requestHash returns the key hash of an RPC and whether it has a key:
// the context's (WithKey) first, then the header's if header is set (gRFC
// A76: the header's values joined with ","), else none, and the picker
// draws a random hash.
func requestHash(ctx context.Context, header string) (uint64, bool) {
	if ctx == nil {
		return 0, false
	}
	if h, ok := ctx.Value(keyContextKey{}).(uint64); ok {
		return h, true
	}
	if header == "" {
		return 0, false
	}
	// FromOutgoingContext copies the whole outgoing metadata; grpc-go
	// v1.85's ValueFromOutgoingContext copies only the header's values, but
	// would make v1.85 the oldest grpc-go the library builds with. A pick
	// with WithKey reads no metadata.
	md, _ := metadata.FromOutgoingContext(ctx)
	vals := md.Get(header)
	switch len(vals) {
	case 0:
		return 0, false
	case 1:
		return hashKey(vals[0]), true
	}
	// Several values hash as one string joined with ",", as grpc-go does,
	// streamed so that the join is never built.
	var d xxhash.Digest
	d.Reset()
	for i, v := range vals {
		if i > 0 {
			_, _ = d.WriteString(",")
		}
		_, _ = d.WriteString(v)
	}
	return d.Sum64(), true
}
