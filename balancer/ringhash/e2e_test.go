package ringhash_test

// End-to-end tests: real gRPC channels over loopback to internal/fleet
// backends, with pickwise_ring_hash selected the way a user selects it (a
// blank import and a service config). The picker tests check placement over
// the fake ClientConn; these check that keys given through the public API
// (WithKey, the request hash header) stick to one backend across the whole
// stack, lazy connections included, and that removing a backend moves its
// keys and no others.

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/pickwise/pickwise/balancer/ringhash"
	"github.com/pickwise/pickwise/internal/fleet"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

// e2eTimeout bounds a whole test; waits end as soon as their condition
// holds, so it matters only when something is broken.
const e2eTimeout = 30 * time.Second

// e2eKeyed sets a call's key through WithKey or the request hash header.
type e2eKeyed func(ctx context.Context, key string) context.Context

func e2eWithKey(ctx context.Context, key string) context.Context { return ringhash.WithKey(ctx, key) }

func e2eHeader(ctx context.Context, key string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "x-user", key)
}

// e2ePlace calls once per key, each call wait-for-ready (the first call to
// an endpoint wakes its connection and waits for it, gRFC A61), and
// returns the backend that answered each key.
func e2ePlace(t *testing.T, ctx context.Context, c *fleet.Client, keyed e2eKeyed, keys []string) map[string]string {
	t.Helper()
	got := make(map[string]string, len(keys))
	for _, k := range keys {
		name, err := c.Call(keyed(ctx, k), grpc.WaitForReady(true))
		if err != nil {
			t.Fatalf("call for key %q: %v", k, err)
		}
		got[k] = name
	}
	return got
}

// TestEndToEndAffinity checks, for the ring and rendezvous tables and
// both key sources, that every key sticks to one backend, that keys
// spread over the fleet, and that removing a backend moves exactly its
// keys. (Maglev trades a little extra movement for its lookup speed, so
// "no other key moves" is not its promise.)
func TestEndToEndAffinity(t *testing.T) {
	keys := make([]string, 300)
	for i := range keys {
		keys[i] = fmt.Sprintf("user-%d", i)
	}
	for _, table := range []string{ringhash.TableRing, ringhash.TableRendezvous} {
		for _, src := range []struct {
			name  string
			keyed e2eKeyed
		}{{"WithKey", e2eWithKey}, {"header", e2eHeader}} {
			t.Run(table+"/"+src.name, func(t *testing.T) {
				ctx := fleet.Context(t, e2eTimeout)
				// Ten backends: at the default minRingSize, a ring of eight
				// or more endpoints gives each a fixed number of entries,
				// so removing one moves nothing else (see ring.go); smaller
				// rings resize every endpoint's share.
				f := fleet.StartT(t, 10)
				cfg := fmt.Sprintf(`{"loadBalancingConfig":[{"pickwise_ring_hash":{"table":%q,"requestHashHeader":"x-user"}}]}`, table)
				c := fleet.DialT(t, f.Addrs(), cfg)

				first := e2ePlace(t, ctx, c, src.keyed, keys)
				perBackend := map[string]int{}
				for _, b := range first {
					perBackend[b]++
				}
				if len(perBackend) != len(f.Backends) {
					t.Fatalf("%d keys reached %d of %d backends: %v", len(keys), len(perBackend), len(f.Backends), perBackend)
				}
				for round := range 2 {
					for k, b := range e2ePlace(t, ctx, c, src.keyed, keys) {
						if b != first[k] {
							t.Fatalf("round %d: key %q answered by %s, before by %s", round, k, b, first[k])
						}
					}
				}

				// Remove the backend of keys[0] from the resolver's list.
				gone := first[keys[0]]
				var rest []string
				for _, b := range f.Backends {
					if b.Name() != gone {
						rest = append(rest, b.Addr())
					}
				}
				c.SetAddrs(rest)
				moved := ringhash.MovedOnlyFrom(t, first, e2ePlace(t, ctx, c, src.keyed, keys), gone)
				if moved != perBackend[gone] {
					t.Fatalf("%d keys moved, want the %d of the removed backend", moved, perBackend[gone])
				}
			})
		}
	}
}

// TestEndToEndRandomKey checks calls without a key: each draws a random
// hash (gRFC A76), they succeed, and they reach every backend.
func TestEndToEndRandomKey(t *testing.T) {
	ctx := fleet.Context(t, e2eTimeout)
	f := fleet.StartT(t, 3)
	c := fleet.DialT(t, f.Addrs(), `{"loadBalancingConfig":[{"pickwise_ring_hash":{}}]}`)
	seen := map[string]bool{}
	fleet.WaitFor(t, ctx, "keyless calls to reach every backend", func() bool {
		name, err := c.Call(ctx, grpc.WaitForReady(true))
		if err != nil {
			t.Fatalf("keyless call: %v", err)
		}
		seen[name] = true
		return len(seen) == len(f.Backends)
	})
}
