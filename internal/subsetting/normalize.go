package subsetting

import (
	"cmp"
	"slices"
	"strings"
	"sync"
)

// normalizeStrings is Normalize for strings: the same result, sorted by a
// radix sort of the identities' bytes instead of by comparisons. Sorting
// by comparisons would be a tenth of a call of Balanced at 10,000
// backends (BenchmarkBalanced): each comparison of two addresses
// ("10.0.12.137:8080") is a call and a walk down their common prefix,
// about 14 of them per identity, while the radix sort reads each
// identity's bytes once per 8 and moves its key once per byte position
// that varies, in about two thirds of the time at 10,000 and 50,000
// addresses.
//
// Each identity gets a key of its first 8 bytes (see strKey); the keys
// are sorted by a least-significant-digit radix sort over the byte
// positions where they differ, and identities whose keys tie are sorted
// by their next 8 bytes in turn (keysort), or by comparisons where few
// tie or none is longer than its key. The keys and the sort's scratch
// take 32 bytes per identity, twice the result, which keyBufs keeps from
// one call to the next.
// maxPooledKeys is the largest key buffer keyBufs keeps: two keys an
// identity for 64k identities, 2 MB.
const maxPooledKeys = 1 << 17

func normalizeStrings(backends []string) []string {
	n := len(backends)
	if n < minRadix || n > 1<<31-1 {
		ids := slices.Clone(backends)
		slices.Sort(ids)
		return slices.Compact(ids)
	}
	bp, _ := keyBufs.Get().(*[]strKey)
	if bp == nil {
		bp = new([]strKey)
	}
	if cap(*bp) < 2*n {
		*bp = make([]strKey, 2*n)
	}
	defer func() {
		// A buffer sized for an exceptional fleet is not kept for the
		// next, which would hold it until two collections pass.
		if cap(*bp) <= maxPooledKeys {
			keyBufs.Put(bp)
		}
	}()
	keys, tmp := (*bp)[:n], (*bp)[n:2*n]
	for i, s := range backends {
		keys[i] = strKey{chunk(s, 0), int32(i)}
	}
	keysort(backends, keys, tmp, 0)
	out := make([]string, 0, n)
	for i, k := range keys {
		s := backends[k.idx]
		if i > 0 && s == out[len(out)-1] {
			continue // a duplicate
		}
		out = append(out, s)
	}
	return out
}

// keyBufs holds normalizeStrings' keys and scratch (a *[]strKey) between
// calls, so that a call allocates only its result, as sorting a copy
// does: the policy normalizes on every change of the backend list.
var keyBufs sync.Pool

// minRadix is the fewest identities worth a radix sort: below it, setting
// up the passes costs more than comparing.
const minRadix = 64

// strKey is one identity's sort key at some depth d: its bytes d..d+7,
// big-endian, 0 past its end (so a key orders identities as their bytes
// do, except that one which is a prefix of another up to trailing zero
// bytes ties with it), and its index in the input.
type strKey struct {
	key uint64
	idx int32
}

// chunk is bytes d..d+7 of s as a big-endian number, 0 past its end.
func chunk(s string, d int) uint64 {
	if d+8 <= len(s) {
		_ = s[d+7]
		return uint64(s[d])<<56 | uint64(s[d+1])<<48 | uint64(s[d+2])<<40 | uint64(s[d+3])<<32 |
			uint64(s[d+4])<<24 | uint64(s[d+5])<<16 | uint64(s[d+6])<<8 | uint64(s[d+7])
	}
	var k uint64
	for i := d; i < len(s); i++ {
		k |= uint64(s[i]) << (56 - 8*(i-d))
	}
	return k
}

// keysort sorts keys, those of ids at depth d, into the order of the
// identities they stand for, using tmp (as long) as scratch.
func keysort(ids []string, keys, tmp []strKey, d int) {
	if len(keys) < minRadix {
		slices.SortFunc(keys, func(a, b strKey) int { return compareKeys(ids, a, b) })
		return
	}
	// Only the byte positions where some key differs from the first need
	// a pass: in a fleet of addresses, most bytes of the first 8 are the
	// same in every one.
	var vary uint64
	for _, k := range keys {
		vary |= k.key ^ keys[0].key
	}
	src, dst := keys, tmp[:len(keys)]
	for shift := uint(0); shift < 64; shift += 8 {
		if byte(vary>>shift) != 0 {
			radixPass(src, dst, shift)
			src, dst = dst, src
		}
	}
	if &src[0] != &keys[0] {
		copy(keys, src)
	}
	// Ties: the same 8 bytes. If one of them is longer, they go on at
	// the next 8; if not, they differ only in trailing zero bytes (or
	// are duplicates), which a comparison settles.
	for i := 0; i < len(keys); {
		j := i + 1
		for j < len(keys) && keys[j].key == keys[i].key {
			j++
		}
		if run := keys[i:j]; len(run) > 1 {
			if !slices.ContainsFunc(run, func(k strKey) bool { return len(ids[k.idx]) > d+8 }) {
				slices.SortFunc(run, func(a, b strKey) int { return strings.Compare(ids[a.idx], ids[b.idx]) })
			} else {
				for i, k := range run {
					run[i].key = chunk(ids[k.idx], d+8)
				}
				keysort(ids, run, tmp, d+8)
			}
		}
		i = j
	}
}

// compareKeys orders two keys of the same depth as their identities.
func compareKeys(ids []string, a, b strKey) int {
	if c := cmp.Compare(a.key, b.key); c != 0 {
		return c
	}
	return strings.Compare(ids[a.idx], ids[b.idx])
}

// radixPass moves src to dst sorted (stably) by the byte at shift of
// each key.
func radixPass(src, dst []strKey, shift uint) {
	var count [256]int32
	for _, k := range src {
		count[byte(k.key>>shift)]++
	}
	var sum int32
	for i, c := range count {
		count[i] = sum
		sum += c
	}
	for _, k := range src {
		b := byte(k.key >> shift)
		dst[count[b]] = k
		count[b]++
	}
}
