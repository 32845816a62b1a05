package engine

import (
	"slices"
	"sync/atomic"
)

// MaxLoadPool bounds pickwise_prequal's pool of recent answers.
const MaxLoadPool = 32

// loadPool is Prequal's pool: the endpoints whose servers answered
// recently, whose answers a pick compares. It holds endpoints, not copies
// of answers: an answer that arrives for a pooled endpoint refreshes it in
// place. Picks read it without a lock; answers, the expiry tick and a
// picker's build (keep) change it with atomic swaps. A race between
// two of them can leave an endpoint in two slots, or out of the pool a
// little early: a pick then sees one candidate twice, or one fewer.
type loadPool struct {
	slots [MaxLoadPool]atomic.Pointer[Endpoint]
	size  int32         // slots in use; immutable
	next  atomic.Uint32 // where the next newcomer goes when no slot is free
	// hot is the RIF above which an answer is hot: the pool's answers'
	// hotQuantile, recomputed as answers arrive and expire.
	hot atomic.Uint32
}

func newLoadPool(size int) *loadPool {
	return &loadPool{size: int32(min(max(size, 2), MaxLoadPool))}
}

// holds reports whether e is in the pool.
func (p *loadPool) holds(e *Endpoint) bool {
	s := e.load.slot.Load()
	return s > 0 && s <= p.size && p.slots[s-1].Load() == e
}

// offer puts e, whose answer has just been set, in the pool: into a free
// slot if there is one; else, when evict, in place of an answer spent
// (its reuse budget used up) or the oldest newcomer; else not at all. A
// call's report does not evict: it would fill the pool with the endpoints
// this client already picks, and the probes' random draws would never get
// in.
func (p *loadPool) offer(e *Endpoint, evict bool, budget int) bool {
	if p.holds(e) {
		return true
	}
	for k := range p.size {
		if p.slots[k].Load() == nil && p.slots[k].CompareAndSwap(nil, e) {
			e.load.slot.Store(k + 1)
			return true
		}
	}
	if !evict {
		return false
	}
	k := int32(p.next.Add(1) % uint32(p.size))
	for j := range p.size {
		if o := p.slots[j].Load(); o != nil && usesOf(o.spent.Load()) >= budget {
			k = j
			break
		}
	}
	if old := p.slots[k].Swap(e); old != nil && old != e {
		old.load.slot.CompareAndSwap(k+1, 0)
	}
	e.load.slot.Store(k + 1)
	return true
}

// keep takes out of the pool the endpoints that are not in ready, the
// newest picker's endpoints, whose indexes were just set.
func (p *loadPool) keep(ready []Ready) {
	for k := range p.size {
		if e := p.slots[k].Load(); e != nil && !isAt(ready, e) {
			p.clear(k, e)
		}
	}
}

// clear takes e out of slot k, where it may be a second copy (see
// loadPool).
func (p *loadPool) clear(k int32, e *Endpoint) {
	if p.slots[k].CompareAndSwap(e, nil) {
		e.load.slot.CompareAndSwap(k+1, 0)
	}
}

// isAt reports whether e is in ready at the index it holds.
func isAt(ready []Ready, e *Endpoint) bool {
	i := e.indexOf(e.spent.Load())
	return uint(i) < uint(len(ready)) && ready[i].Stats == e
}

// poolState is what expire found in the pool.
type poolState struct {
	// usable counts the answers picks can still use.
	usable int
	// served counts the servers' own answers (not local ones); rif and
	// base sum their RIFs and the in-flight counts they were taken at,
	// and latency is their median latency.
	served    int
	rif, base float64
	latency   float32
}

// expire removes the answers older than maxAge at now, then sets the hot
// line at quantile q of the RIFs left, and says what is left.
func (p *loadPool) expire(now, maxAge int64, q float64, budget int) poolState {
	var rifs [MaxLoadPool]uint32
	var lats [MaxLoadPool]float32
	var st poolState
	n := 0
	for k := range p.size {
		e := p.slots[k].Load()
		if e == nil {
			continue
		}
		spent := e.spent.Load()
		if answerAge(spent, now) > maxAge {
			p.clear(k, e)
			continue
		}
		if usesOf(spent) < budget {
			st.usable++
		}
		rif, base, lat, local := answerOf(e.answer.Load())
		rifs[n] = rif
		n++
		if !local {
			lats[st.served] = lat
			st.served++
			st.rif += float64(rif)
			st.base += float64(base)
		}
	}
	p.hot.Store(quantileOf(rifs[:n], q))
	if st.served > 0 {
		l := lats[:st.served]
		slices.Sort(l)
		st.latency = l[len(l)/2]
	}
	return st
}

// quantileOf is the nearest-rank q-quantile of v, which it sorts; the
// largest uint32 when v is empty, so that nothing is hot.
func quantileOf(v []uint32, q float64) uint32 {
	if len(v) == 0 {
		return ^uint32(0)
	}
	slices.Sort(v)
	i := int(q*float64(len(v))+0.999999) - 1
	return v[min(max(i, 0), len(v)-1)]
}
