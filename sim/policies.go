package sim

import (
	"fmt"

	_ "github.com/pickwise/pickwise/balancer/orcawrr"  // registers pickwise_orca_wrr
	_ "github.com/pickwise/pickwise/balancer/p2c"      // registers pickwise_p2c
	_ "github.com/pickwise/pickwise/balancer/peakewma" // registers pickwise_peak_ewma
	_ "github.com/pickwise/pickwise/balancer/prequal"  // registers pickwise_prequal
	_ "github.com/pickwise/pickwise/balancer/ringhash" // registers pickwise_ring_hash
	_ "google.golang.org/grpc/balancer/leastrequest"
	_ "google.golang.org/grpc/balancer/ringhash"
	_ "google.golang.org/grpc/balancer/roundrobin"
	_ "google.golang.org/grpc/balancer/weightedroundrobin" // built by the weighted_round_robin smoke test
)

// The columns shared by the load-aware scenarios. Later policies add
// themselves here, one entry each.
func loadAwarePolicies() []Policy {
	return []Policy{
		Random(),
		GRPC("round_robin", "round_robin", `{}`),
		GRPC("least_request", "least_request_experimental", `{}`),
		LeastConnections(),
		GRPC("pickwise_p2c", "pickwise_p2c", `{}`),
		GRPC("pickwise_peak_ewma", "pickwise_peak_ewma", `{}`),
		GRPC("pickwise_orca_wrr", "pickwise_orca_wrr", `{}`),
	}
}

// The columns shared by the hash scenarios (hot key, remap storm): plain
// modulo hashing, grpc-go's ring hash, and pickwise_ring_hash over each of
// its tables, all keyed by the request's HashHeader. A scenario where load
// changes placement adds boundedRingHash's columns.
func hashPolicies() []Policy {
	ring := GRPC("ring_hash", "ring_hash_experimental", `{"requestHashHeader":"`+HashHeader+`","minRingSize":1024}`)
	// Every request carries a key, so ring_hash draws no random numbers and
	// its ring depends only on the addresses: the column is reproducible.
	ring.Note = ""
	return []Policy{Modulo(), ring,
		pickwiseRingHash("ring", 0,
			"pickwise_ring_hash (ring): the default table; like ring_hash's, but a median-weight endpoint gets at least 128 entries while the ring is under its budget, so a new endpoint takes only its own share"),
		pickwiseRingHash("maglev", 0,
			"pickwise_ring_hash (maglev): Maglev's 65537-slot lookup table; the most even key shares, a little extra movement when the set changes"),
		pickwiseRingHash("rendezvous", 0,
			"pickwise_ring_hash (rendezvous): highest random weight; exactly minimal movement, O(endpoints) per pick"),
	}
}

// boundedBalanceFactor is the bounded-load columns' balanceFactor: Envoy's
// usual 125%, and the bounded-load paper's.
const boundedBalanceFactor = 1.25

// boundedRingHash returns a pickwise_ring_hash column with bounded load
// for each table.
func boundedRingHash(tables ...string) []Policy {
	out := make([]Policy, len(tables))
	for i, tbl := range tables {
		out[i] = pickwiseRingHash(tbl, boundedBalanceFactor, "")
	}
	if len(out) > 0 {
		out[0].Note = fmt.Sprintf("pickwise_ring_hash (..., bounded %g): balanceFactor %g; a backend is skipped while its in-flight calls from this client would exceed %g times its weight's share of them (the mean, with equal weights), and the key's call goes to the least loaded of the next candidates under that cap",
			boundedBalanceFactor, boundedBalanceFactor, boundedBalanceFactor)
	}
	return out
}

// pickwiseRingHash is a pickwise_ring_hash column over table, keyed by the
// same HashHeader as ring_hash's column, with bounded load when
// balanceFactor is not 0. Its connections are lazy (gRFC A61), as
// ring_hash's are: grpcInstance connects an endpoint when a pick wakes it.
func pickwiseRingHash(table string, balanceFactor float64, note string) Policy {
	label := "pickwise_ring_hash (" + table
	cfg := `{"table":"` + table + `","requestHashHeader":"` + HashHeader + `"`
	if balanceFactor > 0 {
		label += fmt.Sprintf(", bounded %g", balanceFactor)
		cfg += fmt.Sprintf(`,"balanceFactor":%g`, balanceFactor)
	}
	p := GRPC(label+")", "pickwise_ring_hash", cfg+"}")
	p.Note = note
	return p
}

// grpc-go's weighted_round_robin is pickwise_orca_wrr's peer, but the
// simulator cannot run it meaningfully: its column is filled with
// wallClockCell and explained by wallClockNote.
const (
	// wrrName is the name grpc-go registers it under, and its column's.
	wrrName = "weighted_round_robin"
	// wallClockCell fills its cells.
	wallClockCell = "n/a (wall clock)"
	// wallClockNote explains why, under every table that has the column.
	wallClockNote = wrrName + ": " + wallClockCell + `. grpc-go's policy reads the same per-call ORCA reports (it builds and places ` +
		`requests in the simulator: TestWeightedRoundRobinRuns) and computes the same weight, qps / (utilization + eps/qps x ` +
		`errorUtilizationPenalty), from each endpoint's last report, but its blackout (10 s), its weight-update ticker (1 s) and ` +
		`its expiry run on grpc's own wall clock, which cannot be injected. A simulated run covers its virtual time many times ` +
		`faster than real time, so the policy would never leave blackout and would place as round robin does, and on a slower ` +
		`machine its weights would change at arbitrary virtual instants; either way the cells would not describe it. Its ` +
		`formula with raw weights is pickwise_orca_wrr with weightHalfLife "0s" (noisy-reports)`
)

// addWallClockColumn appends the weighted_round_robin column to a finished
// table.
func addWallClockColumn(t *Table) {
	t.Columns = append(t.Columns[:len(t.Columns):len(t.Columns)], wrrName)
	for i := range t.Rows {
		r := &t.Rows[i]
		for len(r.Cells) < len(t.Columns)-1 {
			r.Cells = append(r.Cells, "")
		}
		r.Cells = append(r.Cells[:len(r.Cells):len(r.Cells)], wallClockCell)
	}
	t.AddNote(wallClockNote)
}
