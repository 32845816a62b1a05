package ringhash

import (
	"math/bits"

	"github.com/cespare/xxhash/v2"
	"github.com/pickwise/pickwise/internal/mix"
)

// This file holds the hash functions every table shares.
//
// Keys and endpoint identities both go through 64-bit xxHash (XXH64, seed 0),
// the function Envoy's ring hash defaults to and the one grpc-go uses for the
// gRFC A76 request-hash header, so a key read from a header hashes to the
// same 64-bit value here as it does there. What the tables then do with that
// value is their own and is not compatible with grpc-go's or Envoy's ring:
// a different policy name, a different placement.
//
// A table needs many well-spread values per endpoint (ring positions, the
// Maglev offset and skip), and one per (key, endpoint) pair (rendezvous
// scores). Re-running xxHash over "identity_i" strings for each of them costs
// an allocation and a pass over the string every time; instead the identity
// is hashed once and the extra values are drawn from a SplitMix64 stream
// seeded with that hash. The stream is a bijective mixer over a Weyl
// sequence, so an endpoint's values are distinct from each other. Two
// endpoints' streams share values only if their identity hashes differ by a
// small multiple of the increment; summed over all pairs the chance is about
// endpoints x entries / 2^64, below 2^-18 even for an 8M-entry ring, and a
// shared position would only be a tie, which the ring breaks by identity.

// hashKey is the 64-bit hash of a request key given as a string.
func hashKey(key string) uint64 { return xxhash.Sum64String(key) }

// hashKeyBytes is hashKey for a key held in a byte slice (a binary header, a
// protobuf field), without converting it to a string first.
func hashKeyBytes(key []byte) uint64 { return xxhash.Sum64(key) }

// hashIdentity is the 64-bit hash of an endpoint identity. It is the same
// function as hashKey so that the two spaces are one and a test can reason
// about them together; the tables never compare a key hash with an identity
// hash directly, they only feed both into mix64.
func hashIdentity(id string) uint64 { return xxhash.Sum64String(id) }

// golden is 2^64 divided by the golden ratio, the Weyl increment of
// SplitMix64: successive multiples of it are spread as evenly as possible
// over the 64-bit space, and it is odd, so the sequence only repeats after
// 2^64 steps.
const golden = mix.Golden

// derive returns value i of the SplitMix64 stream seeded with seed: the
// per-endpoint sequence from which ring positions and Maglev permutation
// parameters are drawn. Value i depends only on the seed and i, so an
// endpoint's first k ring positions are the same whatever k is, and a ring
// that gives it more entries keeps the old ones.
func derive(seed, i uint64) uint64 { return mix.Mix64(seed + (i+1)*golden) }

// reduce maps a uniformly distributed 64-bit value onto [0, n) with one
// multiplication (Lemire's multiply-shift), where a modulo would cost a
// division. Each result covers floor or ceil(2^64/n) inputs, so the bias is
// below n/2^64.
func reduce(x, n uint64) uint64 {
	hi, _ := bits.Mul64(x, n)
	return hi
}
