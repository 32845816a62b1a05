package subsetting

import (
	"encoding/binary"
	"math"
	"slices"
	"strconv"

	"github.com/pickwise/pickwise/internal/mix"
)

// Balanced is mode "balanced": clientIndex's subset of subsetSize backends
// in the balanced global assignment for clientCount clients. Every backend
// gets floor or ceil of clientCount*subsetSize/backends clients (spread
// <= 1), and a change of the backend list moves few pairs (see
// [BalancedAll] for the algorithm and the measured churn; [Stable] trades
// the exact balance for minimal churn). Every client computes the
// assignment up to its own row, so clients agree without talking to each
// other.
//
// Cost: every row up to clientIndex must be computed, because no row can
// be computed without every row before it; with the two-level scores each
// costs about as much as the backends it walks past, not the fleet's size
// (see [BalancedCache]), and as Balanced keeps nothing for a next call, a
// row walks its client's buckets straight into its subset, without
// building a list: about 8 ms for the last of 10,000 clients over 10,000
// backends, 20 ms over 50,000, 14 ms over 100 (BenchmarkBalanced). A
// policy recomputing on every change of the backend list should keep a
// [BalancedCache], which gives the same answer and pays a third to a half
// more on the first call and when half the list changes
// (BenchmarkBalancedCacheFirst), and little on the others: replacing one
// backend then takes about 3 ms at 10,000 backends
// (BenchmarkBalancedCache).
//
// With subsetSize >= the number of distinct backends every backend is
// returned. Errors: ErrSubsetSize, ErrClientIndex.
func Balanced(backends []string, subsetSize, clientIndex, clientCount int) ([]string, error) {
	if err := checkArgs(subsetSize, clientIndex, clientCount); err != nil {
		return nil, err
	}
	bc := BalancedCache{discard: true}
	return bc.Subset(backends, subsetSize, clientIndex, clientCount)
}

// BalancedAll returns the subsets of all clientCount clients under
// [Balanced], row i being client i's: what the fleet as a whole connects
// to, for tests, the simulator and capacity planning.
//
// The algorithm is a capacity-bounded rendezvous assignment:
//
//  1. Every (client, backend) pair gets a score that depends only on the
//     client index and the backend's identity, so a surviving backend keeps
//     all its scores when others join or leave. The score is two-level
//     ([pairScore]): each backend falls in one of 4,096 buckets by its
//     identity, each client ranks the buckets by its own pseudo-random
//     permutation, and within a bucket ranks the backends by a mix of the
//     pair, so that a client's best backends can be found without scoring
//     the whole fleet.
//  2. With q, r = divmod(clientCount*subsetSize, backends), every backend
//     must end with q or q+1 clients (so exactly r end with q+1). Which
//     ones get q+1 is not fixed in advance: whoever fills first. Fixing
//     them (say by a hash of the identity) would force the connections
//     freed by a removed backend onto r particular backends, whatever its
//     clients prefer. (Granting the extras as late as possible instead
//     was measured and is worse: chains then run to the last client.)
//  3. Clients are served in index order, each taking its highest-scoring
//     backends that still have room, except for the picks that keep the
//     rest solvable. By the Gale-Ryser theorem (all rows sum to
//     subsetSize), the clients left can complete the assignment iff no
//     backend is short of q by more than the clients left, the shortfalls
//     fit in their picks, and the room below q+1 (counting at most one per
//     client left) holds their picks. So a backend short by exactly the
//     clients left is taken now ("forced"), some picks may be reserved for
//     backends short of q, and picks of nearly full backends are limited.
//     The last client therefore always finds a valid subset, and the
//     spread is at most 1 by construction.
//
// This greedy is the definition; [BalancedCache] computes it without
// scoring every pair, and the tests compare it, row for row, with a
// direct implementation.
//
// Early clients get exactly their rendezvous subsets; later ones are
// steered by capacity. When a backend leaves, its clients take other
// backends, which then fill earlier than before and displace some later
// clients in turn, and the r backends with q+1 clients change; these
// chains are the churn above the minimum. Measured (TestSpreadAndChurn,
// TestChurnSpread; the minimum is the clients of the removed or added
// backend, who must change):
//
//	fleet (clients x backends, k)   remove  add    replace  remove, 8 samples
//	1,000 x 100, k=20 (q=200)       1.41x   1.40x  2.21x    mean 1.45x, worst 1.51x
//	300 x 100, k=10 (q=30)          2.60x   2.73x  2.87x
//	300 x 300, k=10 (q=10)          5.80x   4.10x  6.10x    mean 5.40x, worst 6.20x
//
// Larger fleets with as few clients per backend churn more, and there the
// buckets hold several backends each (5 at 20,000 backends, 12 at
// 50,000), which adds to it: mean of 16 removals (BenchmarkChurn), with
// the plain rendezvous score (mix of the pair alone) and with the
// two-level one:
//
//	fleet (clients x backends, k)   plain   two-level
//	10,000 x 5,000, k=20 (q=40)     7.7x    7.8x
//	10,000 x 5,000, k=10 (q=20)     9.7x    9.4x
//	10,000 x 10,000, k=20 (q=20)    9.3x    10.4x
//	10,000 x 10,000, k=10 (q=10)    11.7x   12.7x
//	10,000 x 20,000, k=20 (q=10)    10.6x   12.7x
//	10,000 x 20,000, k=10 (q=5)     12.4x   15.8x
//	10,000 x 50,000, k=20 (q=4)     14.5x   14.1x
//	10,000 x 50,000, k=10 (q=2)     13.6x   18.2x
//
// So the 2x target holds when backends have many clients each (q in the
// hundreds) and not when they have few: with q=10 the capacity steering
// of the last clients dominates, more so the more clients there are. SRE
// moves 44x to 281x the minimum in the same cases. Where churn matters more than exact balance use [Stable]
// (exactly the minimum churn, statistical balance).
//
// Errors: ErrSubsetSize, and ErrClientIndex for clientCount < 1.
func BalancedAll(backends []string, subsetSize, clientCount int) ([][]string, error) {
	if err := checkArgs(subsetSize, 0, clientCount); err != nil {
		return nil, err
	}
	ids := Normalize(backends)
	if subsetSize >= len(ids) {
		out := make([][]string, clientCount)
		for i := range out {
			out[i] = slices.Clone(ids)
		}
		return out, nil
	}
	bc := BalancedCache{discard: true}
	return bc.all(ids, subsetSize, clientCount), nil
}

// Stable is mode "stable" of the index-based subsetting: client
// clientIndex takes the [Rendezvous] subset for a client identity derived
// from its index. A backend change moves exactly the pairs it must (the
// removed backend's clients, or those the new backend outranks), but the
// balance is only statistical, as with gRFC A68: at 300 clients x 300
// backends, subsets of 10, backends get 2 to 19 clients instead of 10; at
// 1,000 x 100, subsets of 20, 164 to 227 instead of 200.
// Choose it over [Balanced] when connections are expensive to move and
// the fleet tolerates that spread.
//
// Errors: ErrSubsetSize, ErrClientIndex.
func Stable(backends []string, subsetSize, clientIndex, clientCount int) ([]string, error) {
	if err := checkArgs(subsetSize, clientIndex, clientCount); err != nil {
		return nil, err
	}
	return Rendezvous(backends, subsetSize, stableID(clientIndex))
}

// stableID is the client identity Stable hashes; a fixed prefix keeps index
// identities apart from identities that callers pass to Rendezvous.
func stableID(clientIndex int) string {
	return "pickwise-subset-index:" + strconv.Itoa(clientIndex)
}

// clientSeed is the per-client half of a pair's score: the client's index
// stepped by the golden ratio, so that consecutive indices land far apart
// before mixing.
func clientSeed(c int) uint64 { return mix.Mix64(uint64(c)*mix.Golden + 0x632be59bd9b4e019) }

// The scores are two-level so that a client's best backends can be found
// without scoring every backend. Each backend falls in one of buckets
// buckets by its identity alone; each client orders the buckets by its own
// pseudo-random permutation and, within a bucket, the backends by the
// rendezvous mix of the pair. A client's top candidates are then the
// members of its first few buckets, which the permutation's inverse lists
// in order at a few table reads each.
//
// The number of buckets is fixed, not derived from the number of backends,
// so that a surviving backend keeps its bucket, and with it every score,
// when others join or leave. 4,096 keeps buckets small (2.4 backends each
// at 10,000 backends, 12 at 50,000), so that sorting a bucket is nearly
// free, and keeps the correlation between a client's picks low: fewer,
// larger groups raised the churn at 2,000 to 10,000 backends (64 buckets,
// and also 4,096 ranked in two levels, a client ranking 64 groups of 64
// buckets and then the buckets within each group), while 256 and 1,024
// buckets matched the plain rendezvous score. Ranking that many buckets by a mix each would cost
// 4,096 mixes per client, so the rank is a permutation whose inverse is
// as cheap as the rank itself: a client reads its buckets in order.
const (
	bucketBits = 12
	buckets    = 1 << bucketBits
	halfBits   = bucketBits / 2
	halfMask   = 1<<halfBits - 1
	rounds     = 4 // Feistel rounds: with random round functions, enough for an unbiased-looking order
)

// bucketOf is the bucket of the backend with identity hash h. It has its
// own mix so that bucket membership says nothing about the pair mixes
// that order a bucket's members.
func bucketOf(h uint64) uint16 {
	return uint16(mix.Mix64(h^0x3c6ef372fe94f82b)>>(64-bucketBits)) & bucketMask
}

// Test hooks, set only by tests (and restored after them): bucketMask
// crowds the backends into few buckets, so that buckets hold hundreds of
// members and whole buckets can leave at once, and hashMask makes many
// identities hash alike, so that scores tie and the ties are broken by
// identity. Both apply to the reference too, which derives its scores
// from the same functions, so the answers must still agree.
var (
	bucketMask uint16 = buckets - 1
	hashMask   uint64 = math.MaxUint64
)

// roundWord holds eight round-function values of client seed's
// permutation: round i's at inputs 8w..8w+7, one per byte, read by
// roundByte. Both the per-client tables and the direct evaluation use
// these words, so the two cannot disagree.
func roundWord(seed uint64, i, w int) uint64 {
	return mix.Mix64(seed ^ uint64(8*i+w+1)*0xD6E8FEB86659FD93)
}

// roundByte is the round function's value at x from the word holding it.
func roundByte(word uint64, x uint16) uint16 { return uint16(word>>(8*(x&7))) & halfMask }

// roundValue is round i's function at x for client seed.
func roundValue(seed uint64, i int, x uint16) uint16 {
	return roundByte(roundWord(seed, i, int(x>>3)), x)
}

// bucketRank is bucket g's rank in client seed's order (buckets-1 first):
// a balanced Feistel network over the bucket number's two halves, which is
// a permutation whatever its round functions, here pseudo-random per
// client. It costs one mix per round; a client ranking many buckets fills
// a [bucketOrder] instead.
func bucketRank(seed uint64, g uint16) uint16 {
	l, r := g>>halfBits, g&halfMask
	for i := range rounds {
		l, r = r, l^roundValue(seed, i, r)
	}
	return l<<halfBits | r
}

// bucketRankFrom returns bucketRank(seed, g) and true if that rank is at
// least least, and false otherwise, then often without computing the rank:
// its top half is the output of the network's third round, the last round
// filling in the bottom half, so a rank whose top half is below least's is
// ruled out at three mixes instead of four. The updates of the cache ask
// this of every client, and it rules out most of them.
func bucketRankFrom(seed uint64, g, least uint16) (rank uint16, ok bool) {
	l, r := g>>halfBits, g&halfMask
	for i := range rounds - 1 {
		l, r = r, l^roundValue(seed, i, r)
	}
	if r < least>>halfBits {
		return 0, false
	}
	l, r = r, l^roundValue(seed, rounds-1, r)
	rank = l<<halfBits | r
	return rank, rank >= least
}

// pairScore is the score of a backend with identity hash h for the client
// with seed seed, rank being the rank of the backend's bucket for that
// client: the rank in the top bits, so a client's order is its buckets in
// its own order, then the rendezvous mix of the pair within a bucket. It
// is the one definition of the score; the reference in the tests and
// every path of [BalancedCache] go through it.
func pairScore(rank uint16, seed, h uint64) uint64 {
	return uint64(rank)<<(64-bucketBits) | pairMix(seed, h)>>bucketBits
}

// pairMix is the rendezvous mix of the pair, whose top bits order a
// bucket's members in pairScore: the walks sort a bucket by it directly
// (memberKey).
func pairMix(seed, h uint64) uint64 { return mix.Mix64(h ^ seed) }

// bucketOrder is one client's bucket permutation as the values of its
// round functions, one byte per input, filled a word (eight inputs, see
// roundWord) at a time: filling it costs rounds x 8 mixes, after which a
// rank, or a bucket from its rank, is a few byte reads. The value at x is
// byte x%8 of word x/8, little-endian, which is the byte roundByte reads,
// so the tables and the direct evaluation agree.
//
// A client that only walks its first buckets reads few words of the last
// two rounds: the inverse starts at the last round, whose input is the
// rank's top half, the same for 64 consecutive ranks, and the input of
// the round before it is the rank's bottom half XORed with one value (the
// last round's output), so a run of a dozen ranks reads one word of the
// last round and two or three of the one before. Those rounds are
// therefore filled on demand (start, need), saving about 12 of the 32
// mixes per client, and a caller that reads arbitrary ranks or buckets
// fills the rest first (full).
type bucketOrder struct {
	f8   [rounds][1 << halfBits]uint8 // round i's function at x: f8[i][x]
	seed uint64
	// have[i] has bit w set once round lazyFrom+i's word w is filled;
	// the rounds before lazyFrom are always filled.
	have [rounds - lazyFrom]uint8
}

// words is the number of words of a round function.
const words = 1 << (halfBits - 3)

// lazyFrom is the first round that bucketOrder fills on demand: the last
// two, whose words buckets fills as it reads them.
const lazyFrom = rounds - 2

// init makes o client seed's order, every word filled.
func (o *bucketOrder) init(seed uint64) {
	o.start(seed)
	o.full()
}

// start makes o client seed's order with the rounds from lazyFrom left
// to need or full.
func (o *bucketOrder) start(seed uint64) {
	o.seed = seed
	for i := range lazyFrom {
		for w := range words {
			o.put(i, w)
		}
	}
	o.have = [rounds - lazyFrom]uint8{}
}

// need fills round i's word holding the function's value at inputs
// 8w..8w+7, if not yet filled; i >= lazyFrom.
func (o *bucketOrder) need(i int, w uint16) {
	w &= words - 1
	if have := &o.have[i-lazyFrom]; *have>>w&1 == 0 {
		o.put(i, int(w))
		*have |= 1 << w
	}
}

// put fills round i's word w (the mask of the index, a no-op for w below
// words, spares the bounds check).
func (o *bucketOrder) put(i, w int) {
	const mask = halfMask * 0x0101010101010101 // roundByte's mask, per byte
	binary.LittleEndian.PutUint64(o.f8[i][8*w&(1<<halfBits-8):], roundWord(o.seed, i, w)&mask)
}

// full fills every word not yet filled, for rank and bucket.
func (o *bucketOrder) full() {
	for i := lazyFrom; i < rounds; i++ {
		if o.have[i-lazyFrom] == 0xff {
			continue
		}
		for w := range uint16(words) {
			o.need(i, w)
		}
	}
}

// f is round i's function at x. x is a half, below 64; the mask spares
// the bounds check.
func (o *bucketOrder) f(i int, x uint16) uint16 { return uint16(o.f8[i][x&halfMask]) }

// rank is bucketRank(seed, g) for o's seed; o must be full.
func (o *bucketOrder) rank(g uint16) uint16 {
	// No o.full() here: build and overflow call it once, and a check per
	// call costs a quarter of a small fleet's first computation. An
	// unfilled word would read as 0.
	l, r := g>>halfBits, g&halfMask
	for i := range rounds {
		l, r = r, l^o.f(i, r)
	}
	return l<<halfBits | r
}

// buckets fills gs with the buckets of ranks from, from-1, ... (from-len(gs)
// >= -1), filling the words of the last two rounds that they read.
// Consecutive ranks share their top half, the input of the network's last
// round, which is where the inverse starts, so that round is read once per
// 64 ranks rather than once per rank, and the words of the round before
// it that a block's run of ranks reads follow from the run's bounds.
func (o *bucketOrder) buckets(from int, gs []uint16) {
	for j := 0; j < len(gs); {
		top := from - j
		l := uint16(top) >> halfBits
		// This block's ranks: top down to its start or the run's end.
		bottom := max(top&^halfMask, from-len(gs)+1)
		o.need(rounds-1, l>>3)
		fl := o.f(rounds-1, l)
		for w := uint16(bottom) & halfMask >> 3; w <= uint16(top)&halfMask>>3; w++ {
			o.need(rounds-2, w^fl>>3)
		}
		for ; j <= from-bottom; j++ {
			rank := uint16(from - j)
			l1, r1 := rank&halfMask^fl, l
			for i := rounds - 2; i >= 0; i-- {
				l1, r1 = r1^o.f(i, l1), l1
			}
			gs[j] = l1<<halfBits | r1
		}
	}
}

// bucket is the bucket of the given rank: the network run backwards; o
// must be full.
func (o *bucketOrder) bucket(rank uint16) uint16 {
	// The tables must be full, as for rank.
	l, r := rank>>halfBits, rank&halfMask
	for i := rounds - 1; i >= 0; i-- {
		l, r = r^o.f(i, l), l
	}
	return l<<halfBits | r
}
