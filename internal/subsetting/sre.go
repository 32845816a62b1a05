package subsetting

import (
	"cmp"
	"math/rand/v2"
	"slices"
)

// SRE returns clientIndex's subset under the deterministic subsetting of
// Google's SRE book ("Load Balancing in the Datacenter"), kept as the
// baseline [Balanced] is compared against. Clients are grouped into
// rounds of len(backends)/subsetSize; all clients of a round shuffle the
// sorted backend list with the round number as the seed and take
// consecutive slices of subsetSize. Each round uses every backend at most
// once, so balance is exact when the backend count is a multiple of
// subsetSize and the client count a multiple of the round size, and good
// otherwise; but any change of the backend list changes every round's
// shuffle, so nearly every client's subset changes.
//
// It takes any ordered identity, not only strings, because the simulator
// runs it over its integer backend ids: the shuffle permutes the sorted
// list, so converting the ids to strings would sort them differently and
// give other subsets than the simulator's figures were measured with.
//
// With subsetSize >= the number of distinct backends, every backend is
// returned. clientCount only bounds clientIndex. Errors: ErrSubsetSize,
// ErrClientIndex.
func SRE[T cmp.Ordered](backends []T, subsetSize, clientIndex, clientCount int) ([]T, error) {
	if err := checkArgs(subsetSize, clientIndex, clientCount); err != nil {
		return nil, err
	}
	ids := Normalize(backends)
	if subsetSize >= len(ids) {
		return ids, nil
	}
	perRound := len(ids) / subsetSize
	round := clientIndex / perRound
	// The book's seed is the round, so the clients of one round agree on
	// the shuffle without talking to each other, and rounds differ so that
	// the backends left over by len%subsetSize are not always the same
	// ones; PCG makes it portable.
	r := rand.New(rand.NewPCG(uint64(round), 0))
	r.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
	start := (clientIndex % perRound) * subsetSize
	return slices.Sorted(slices.Values(ids[start : start+subsetSize])), nil
}
