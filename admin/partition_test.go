package admin_test

import (
	"fmt"
	"math"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/pickwise/pickwise/admin"
	"github.com/pickwise/pickwise/balancer/ringhash"
	"github.com/pickwise/pickwise/internal/fleet"
	"google.golang.org/grpc"
)

// TestPartitionedRingHash freezes one client's resolver while the
// others move on (a scale-out of two backends and a removal of one), and
// measures, for each ring hash table, the share of keys the partitioned
// client places on another backend than the others do: the damage a
// divergent view does to a cache tier. The partitioned client's
// membership fingerprint stays what it was and differs from the others';
// once its resolver catches up, its keys and fingerprint agree again.
func TestPartitionedRingHash(t *testing.T) {
	nKeys := 2000
	if testing.Short() {
		nKeys = 600
	}
	keys := make([]string, nKeys)
	for i := range keys {
		keys[i] = fmt.Sprintf("user-%d", i)
	}
	f := fleet.StartT(t, 12)
	addrs := f.Addrs()
	before, after := addrs[:10], addrs[1:12] // backend 0 leaves, 10 and 11 join
	srv := httptest.NewServer(admin.Handler())
	defer srv.Close()
	fingerprint := func(c *fleet.Client) string {
		p := get(t, srv.URL+"?format=json&target="+target(c))
		if len(p.Balancers) != 1 {
			t.Fatalf("%s: %d balancers on the page, want 1", target(c), len(p.Balancers))
		}
		return p.Balancers[0].Membership.Fingerprint
	}
	for _, table := range []string{ringhash.TableRing, ringhash.TableMaglev, ringhash.TableRendezvous} {
		t.Run(table, func(t *testing.T) {
			ctx := fleet.Context(t, 60*time.Second)
			cfg := fmt.Sprintf(`{"loadBalancingConfig":[{"pickwise_ring_hash":{"table":%q}}]}`, table)
			moving := []*fleet.Client{fleet.DialT(t, before, cfg), fleet.DialT(t, before, cfg)}
			frozen := fleet.DialT(t, before, cfg)
			place := func(c *fleet.Client) []string {
				got := make([]string, len(keys))
				for i, k := range keys {
					name, err := c.Call(ringhash.WithKey(ctx, k), grpc.WaitForReady(true))
					if err != nil {
						t.Fatalf("key %q: %v", k, err)
					}
					got[i] = name
				}
				return got
			}
			differ := func(a, b []string) int {
				n := 0
				for i := range a {
					if a[i] != b[i] {
						n++
					}
				}
				return n
			}
			old := fingerprint(frozen)
			for _, c := range moving {
				c.SetAddrs(after)
			}
			a, b, z := place(moving[0]), place(moving[1]), place(frozen)
			if n := differ(a, b); n != 0 {
				t.Fatalf("the two clients that moved on place %d of %d keys differently, want 0", n, len(keys))
			}
			apart := differ(a, z)
			t.Logf("%s: the partitioned client places %d of %d keys (%.1f%%) on another backend than the others", table, apart, len(keys), 100*float64(apart)/float64(len(keys)))
			if apart == 0 {
				t.Errorf("the partitioned client places every key as the others do, after a change of 3 of 12 backends")
			}
			fa, fz := fingerprint(moving[0]), fingerprint(frozen)
			if fz != old || fa == fz || fa != fingerprint(moving[1]) {
				t.Errorf("fingerprints while partitioned: moved on %s and %s, partitioned %s (before %s): want the partitioned one unchanged and apart", fa, fingerprint(moving[1]), fz, old)
			}

			frozen.SetAddrs(after)
			if n := differ(a, place(frozen)); n != 0 {
				t.Errorf("after the partition healed, %d keys still placed differently", n)
			}
			if fz := fingerprint(frozen); fz != fa {
				t.Errorf("after the partition healed: fingerprint %s, the others' %s", fz, fa)
			}
		})
	}
}

// TestEveryPolicyRows checks each policy's rows after 200 calls: every
// endpoint in the picker at its fair share, the shares adding up to one,
// and, where picks are counted, the rows' picks adding up to the calls.
func TestEveryPolicyRows(t *testing.T) {
	f := fleet.StartT(t, 4)
	srv := httptest.NewServer(admin.Handler())
	defer srv.Close()
	for _, policy := range []string{"pickwise_p2c", "pickwise_peak_ewma", "pickwise_orca_wrr", "pickwise_prequal", ringhash.Name} {
		t.Run(policy, func(t *testing.T) {
			ctx := fleet.Context(t, 30*time.Second)
			c := fleet.DialT(t, f.Addrs(), fmt.Sprintf(`{"loadBalancingConfig":[{%q:{}}]}`, policy))
			for i := range 200 {
				if _, err := c.Call(ringhash.WithKey(ctx, fmt.Sprint(i)), grpc.WaitForReady(true)); err != nil {
					t.Fatal(err)
				}
			}
			p := get(t, srv.URL+"?format=json&target="+target(c))
			if len(p.Balancers) != 1 || p.Balancers[0].Policy != policy {
				t.Fatalf("page %+v, want one %s balancer", p, policy)
			}
			var picks uint64
			var share float64
			for _, r := range p.Balancers[0].Endpoints {
				if !r.InPicker || r.FairShare != 0.25 {
					t.Errorf("row %+v: want in the picker at a fair share of 25%%", r)
				}
				picks += r.Picks
				share += r.Share
			}
			if math.Abs(share-1) > 1e-9 {
				t.Errorf("shares add up to %v, want 1", share)
			}
			if p.Balancers[0].ShareFrom == "picks" && picks != 200 {
				t.Errorf("rows count %d picks, want the 200 calls", picks)
			}
		})
	}
}
