package subsetting

import (
	"encoding/binary"
	"math"

	"github.com/pickwise/pickwise/internal/mix"
)

// This file is the balanced mode's score of a (client, backend) pair, and
// each client's order of the buckets it is built on. The scores are
// two-level so that a client's best backends can be found without scoring
// the fleet: each backend falls in one of 4,096 buckets by its identity,
// each client ranks the buckets by its own permutation, and within a
// bucket ranks the backends by a mix of the pair. The bucket count is
// fixed so that a surviving backend keeps its bucket, and every score,
// when others join or leave. docs/design/subsetting.md has why 4,096.

// clientSeed is the per-client half of a pair's score: the index stepped
// by the golden ratio, so that consecutive indices land far apart before
// mixing.
func clientSeed(c int) uint64 { return mix.Mix64(uint64(c)*mix.Golden + 0x632be59bd9b4e019) }

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

// Set only by tests, which restore them: bucketMask crowds the backends
// into few buckets, and hashMask makes identities hash alike so that
// scores tie. The reference derives its scores from the same functions,
// so the answers must still agree.
var (
	bucketMask uint16 = buckets - 1
	hashMask   uint64 = math.MaxUint64
)

// roundWord holds eight values of round i of client seed's permutation,
// those at inputs 8w..8w+7, one per byte. The tables and the direct
// evaluation in the tests both read these words, so they cannot disagree.
func roundWord(seed uint64, i, w int) uint64 {
	return mix.Mix64(seed ^ uint64(8*i+w+1)*0xD6E8FEB86659FD93)
}

// pairScore is the score of a backend with identity hash h for the client
// with seed seed, rank being the rank of the backend's bucket for that
// client: the rank in the top bits, so a client's order is its buckets in
// its own order, then the pair's mix within a bucket. It is the one
// definition of the score, which the reference in the tests shares.
func pairScore(rank uint16, seed, h uint64) uint64 {
	return uint64(rank)<<(64-bucketBits) | pairMix(seed, h)>>bucketBits
}

// pairMix is the rendezvous mix of the pair, whose top bits order a
// bucket's members in pairScore.
func pairMix(seed, h uint64) uint64 { return mix.Mix64(h ^ seed) }

// bucketOrder is one client's bucket permutation, a balanced Feistel
// network over the bucket number's two halves (a permutation whatever its
// round functions), whose round functions are tabled a byte per input,
// so that a rank, or the bucket of a rank, costs a few table reads
// instead of a mix per round. The last two rounds are filled on demand
// (start, need): a client that walks only its first buckets reads few of
// their words. Callers that read arbitrary ranks or buckets call full.
type bucketOrder struct {
	f8   [rounds][1 << halfBits]uint8 // round i's function at x: f8[i][x]
	seed uint64
	// have[i] has bit w set once round lazyFrom+i's word w is filled;
	// the rounds before lazyFrom are always filled.
	have [rounds - lazyFrom]uint8
}

// words is the number of words of a round function.
const words = 1 << (halfBits - 3)

// lazyFrom is the first round that bucketOrder fills on demand.
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

// need fills round i's word w (inputs 8w..8w+7) if not yet filled;
// i >= lazyFrom.
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
	const mask = halfMask * 0x0101010101010101 // each byte cut to a half
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

// rank is bucket g's rank in the order (buckets-1 first); o must be full.
// It does not check: a check per call costs a quarter of a small fleet's
// computation, and an unfilled word would read as 0.
func (o *bucketOrder) rank(g uint16) uint16 {
	l, r := g>>halfBits, g&halfMask
	for i := range rounds {
		l, r = r, l^o.f(i, r)
	}
	return l<<halfBits | r
}

// buckets fills gs with the buckets of ranks from, from-1, ...
// (from-len(gs) >= -1), filling the words of the last two rounds that
// they read. The inverse starts at the last round, whose input is a
// rank's top half, the same for a block of 64 ranks, so that round is
// read once per block, and the words of the round before it that a run
// of ranks reads follow from the run's bounds.
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

// bucket is the bucket of the given rank, the network run backwards; o
// must be full, as for rank.
func (o *bucketOrder) bucket(rank uint16) uint16 {
	l, r := rank>>halfBits, rank&halfMask
	for i := rounds - 1; i >= 0; i-- {
		l, r = r^o.f(i, l), l
	}
	return l<<halfBits | r
}
