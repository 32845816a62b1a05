// Package subsetting holds the pure subsetting algorithms behind
// pickwise_subset: given the identities of all backends (for example their
// addresses), each function returns the few backends one client should
// connect to. Nothing here touches grpc. The policy calls them, and the
// tests and the simulator call them to measure balance and churn at fleet
// scale; users choose among them by the policy's mode, so they stay
// internal.
//
// The algorithms, named after the modes:
//
//   - [Balanced] (and [BalancedAll]), mode "balanced": every client knows
//     its index among clientCount clients and computes the same global
//     assignment. Each backend gets the same number of clients, +-1,
//     always; one backend joining or leaving moves 1.4x the minimum number
//     of (client, backend) pairs when backends have hundreds of clients
//     each, about 6x when they have ten among 300 clients, and 10x to 18x
//     when they have 2 to 20 among 10,000 (see BalancedAll for the
//     numbers).
//   - [Stable], mode "stable", for the same index: rendezvous hashing on
//     the index. Churn is exactly the minimum, balance only statistical.
//     No design here gets both +-1 balance and churn within 2x of the
//     minimum at every fleet shape, so the policy offers both modes.
//   - [Rendezvous]: without an index, a client ranks the backends by a hash
//     of (clientID, backend) and keeps the best subsetSize, as gRFC A68
//     (grpc-go's random_subsetting_experimental) does with a random seed.
//     Churn is minimal, balance is only statistical.
//   - [SRE]: the deterministic subsetting of Google's SRE book ("Load
//     Balancing in the Datacenter"), kept as the baseline ours is measured
//     against (here and in the simulator): exact balance, but a change of
//     backend count reshuffles nearly every client. No mode uses it.
//
// All functions depend on the set of backend identities only, never on the
// order in which the resolver listed them: every client must reach the same
// answer from its own copy of the list. Duplicate identities are dropped
// (the set is what counts; a resolver that repeats an address must not give
// that backend a double share). Returned subsets are sorted.
//
// docs/design/subsetting.md has the balanced mode's argument, its
// measurements and the alternatives tried.
package subsetting

import (
	"cmp"
	"errors"
	"fmt"
	"slices"

	"github.com/cespare/xxhash/v2"
	"github.com/pickwise/pickwise/internal/mix"
)

// Errors returned for bad input. They are wrapped with the offending values,
// so compare with errors.Is. Their texts start with "subset:" because
// pickwise_subset passes them on to its user, to whom the package name
// subsetting means nothing.
var (
	// ErrSubsetSize is returned for a subsetSize below 1: a client with no
	// backend cannot send anything, so it is a configuration error rather
	// than something to clamp.
	ErrSubsetSize = errors.New("subset: subsetSize must be >= 1")
	// ErrClientIndex is returned when clientIndex is not in [0, clientCount)
	// or clientCount is below 1: the global assignment has no row for such a
	// client, and silently wrapping the index would double the load of
	// another client's subset.
	ErrClientIndex = errors.New("subset: clientIndex must be in [0, clientCount)")
)

// Normalize returns the distinct backend identities in sorted order, the
// common starting point that makes every algorithm independent of the
// resolver's order and of duplicates. The input is not modified. The
// policy uses it too, to key its cache of the last subset on the set of
// backends.
func Normalize[T cmp.Ordered](backends []T) []T {
	if s, ok := any(backends).([]string); ok {
		return any(normalizeStrings(s)).([]T)
	}
	ids := slices.Clone(backends)
	slices.Sort(ids)
	return slices.Compact(ids)
}

// checkArgs validates the arguments shared by the index-based algorithms.
func checkArgs(subsetSize, clientIndex, clientCount int) error {
	if subsetSize < 1 {
		return fmt.Errorf("%w: got %d", ErrSubsetSize, subsetSize)
	}
	if clientCount < 1 || clientIndex < 0 || clientIndex >= clientCount {
		return fmt.Errorf("%w: got index %d, count %d", ErrClientIndex, clientIndex, clientCount)
	}
	return nil
}

// idHashes returns idHash of every identity.
func idHashes(ids []string) []uint64 {
	h := make([]uint64, len(ids))
	for i, id := range ids {
		h[i] = idHash(id)
	}
	return h
}

// idHash is the hash of a backend identity that the balanced mode's scores
// are derived from (xxhash64, cut by hashMask in tests), so that a
// backend's scores depend on its identity alone: a surviving backend keeps
// its scores whatever else joins or leaves, which is what makes rendezvous
// hashing (and the capacity-bounded variant of it) stable.
func idHash(id string) uint64 { return xxhash.Sum64String(id) & hashMask }

// Rendezvous returns the subsetSize backends with the highest rendezvous
// (highest random weight) score for clientID, the approach of gRFC A68
// (grpc-go's random_subsetting_experimental), except that the seed is a
// stable client identity instead of a random number, so the subset
// survives a restart. A surviving backend keeps its score when others join
// or leave, so a change moves only the pairs it must: a removed backend's
// clients each take their next-ranked backend, and a new backend enters
// exactly the subsets where it outranks the current last member. Balance is
// only statistical (connections per backend scatter like balls in bins);
// use [Balanced] when the client index is known.
//
// With subsetSize >= the number of distinct backends, every backend is
// returned. The only error is ErrSubsetSize.
func Rendezvous(backends []string, subsetSize int, clientID string) ([]string, error) {
	if subsetSize < 1 {
		return nil, fmt.Errorf("%w: got %d", ErrSubsetSize, subsetSize)
	}
	ids := Normalize(backends)
	if subsetSize >= len(ids) {
		return ids, nil
	}
	// The seed folds the client identity into every score; hashing the
	// client once and mixing per backend costs one xxhash per backend.
	seed := mix.Mix64(xxhash.Sum64String(clientID))
	type scored struct {
		score uint64
		id    string
	}
	s := make([]scored, len(ids))
	for i, id := range ids {
		s[i] = scored{mix.Mix64(xxhash.Sum64String(id) ^ seed), id}
	}
	slices.SortFunc(s, func(a, b scored) int {
		if a.score != b.score {
			if a.score > b.score {
				return -1
			}
			return 1
		}
		// Ties (astronomically rare) break on identity, never on input
		// order.
		if a.id < b.id {
			return -1
		}
		return 1
	})
	out := make([]string, subsetSize)
	for i := range out {
		out[i] = s[i].id
	}
	slices.Sort(out)
	return out, nil
}
