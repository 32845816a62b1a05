package engine

import (
	"math"
	"sync/atomic"

	v3orcapb "github.com/cncf/xds/go/xds/data/orca/v3"
	"google.golang.org/grpc/balancer"
)

// The ORCA named metrics a server running serverload's interceptors puts in
// every call's report (docs/design/prequal.md).
const (
	rifMetric     = "pickwise.rif"
	latencyMetric = "pickwise.latency"
)

// What an endpoint's server last said of its own load, in a load probe's
// answer or a call's report: its requests in flight (RIF) and its estimate
// of a new call's latency, in two words of the endpoint's second line,
// which answers write and Prequal's picks read:
//
//   - answer: RIF (16 bits, saturated), the endpoint's in-flight count when
//     the answer arrived (its low 16 bits), and the latency in seconds as
//     float32 bits, whose lowest two say that there is an answer (so that
//     0 means none) and that it is this client's own estimate for a server
//     that serves no probes (answerLocal);
//   - spent: when the answer arrived (Clock.Nanotime in units of 2^16 ns,
//     32 bits, compared with wrapping arithmetic), the endpoint's index in
//     the newest Prequal picker's Endpoints (16 bits; noIndex when it does
//     not fit), and the picks the answer placed (16 bits).
const (
	usesBits  = 16
	indexBits = 16
	timeShift = usesBits + indexBits
	usesMask  = 1<<usesBits - 1
	indexMask = (1<<indexBits - 1) << usesBits
	// noIndex in spent sends a pick to reportedLoad.index.
	noIndex = 1<<indexBits - 1
	// timeUnit is the resolution of an answer's time.
	timeUnit = 1 << 16
	// maxLatency bounds a latency estimate, in seconds.
	maxLatency = 3600
	// The low bits of answer's latency: there is an answer; it is local.
	answerPresent = 1
	answerLocal   = 2
	answerFlags   = answerPresent | answerLocal
)

// reportedLoad is the rest of an endpoint's state for pickwise_prequal,
// read off the pick's common path. Every field is atomic but done.
type reportedLoad struct {
	// slot is 1 + the pool slot that holds the endpoint, 0 if none; a hint
	// that the pool confirms (loadPool.holds).
	slot atomic.Int32
	// index is the endpoint's index in the Endpoints of the newest
	// Prequal picker built over it; picks confirm it against their own.
	index atomic.Int32
	// probing is set while a load probe to the endpoint is out.
	probing atomic.Bool
	// unserved is the connection whose server answered a probe with
	// Unimplemented: it serves no probes, and is not asked again.
	unserved atomic.Pointer[readyConn]
	// done is the Done of a Prequal pick: the engine's, then the call's
	// report folded in. Set once, before the first picker that may place
	// a call with it is published.
	done func(balancer.DoneInfo)
}

// setAnswer records an answer that arrived at now, when e had inflight
// calls in flight.
func (e *Endpoint) setAnswer(rif uint32, latency float64, now int64, inflight uint32) {
	e.setAnswerFlags(rif, latency, now, inflight, answerPresent)
}

// setAnswerFlags is setAnswer with the answer's flags.
func (e *Endpoint) setAnswerFlags(rif uint32, latency float64, now int64, inflight uint32, flags uint32) {
	if !(latency >= 0) || latency > maxLatency {
		latency = 0 // unknown: no server's answer is negative, NaN or days long
	}
	e.spent.Store(uint64(uint32(now/timeUnit))<<timeShift | packIndex(e.load.index.Load()))
	e.answer.Store(uint64(min(rif, math.MaxUint16))<<48 | uint64(uint16(inflight))<<32 | uint64(math.Float32bits(float32(latency))&^answerFlags|flags))
}

// setIndex records e's index in a new Prequal picker's Endpoints. Most
// publishes move few endpoints: the others cost a load.
func (e *Endpoint) setIndex(i int) {
	if e.load.index.Load() == int32(i) && e.indexOf(e.spent.Load()) == i {
		return
	}
	e.load.index.Store(int32(i))
	e.spent.And(^uint64(indexMask))
	e.spent.Or(packIndex(int32(i)))
}

func packIndex(i int32) uint64 { return uint64(min(uint32(i), noIndex)) << usesBits }

// indexOf is e's index in the newest Prequal picker, read from spent.
func (e *Endpoint) indexOf(spent uint64) int {
	if i := int(spent&indexMask) >> usesBits; i != noIndex {
		return i
	}
	return int(e.load.index.Load())
}

// answerAge is how long before now, in Clock.Nanotime, the answer arrived.
func answerAge(spent uint64, now int64) int64 {
	return int64(int32(uint32(now/timeUnit)-uint32(spent>>timeShift))) * timeUnit
}

// usesOf is how many picks the answer placed.
func usesOf(spent uint64) int { return int(spent & usesMask) }

// use counts a pick placed on e's answer.
func (e *Endpoint) use() { e.spent.Add(1) }

// answerOf unpacks an answer word: RIF, the in-flight count it was taken
// at, the latency, and whether it is local.
func answerOf(w uint64) (rif, base uint32, latency float32, local bool) {
	return uint32(w >> 48), uint32(uint16(w >> 32)), math.Float32frombits(uint32(w) &^ answerFlags), uint32(w)&answerLocal != 0
}

// estimate is the RIF and latency (seconds) of e's last answer, the RIF
// moved by the calls this client started and finished since: those it
// placed count at once, as the answer could not have counted them.
// known is false before the first answer.
func (e *Endpoint) estimate() (rif int64, latency float64, known bool) {
	w := e.answer.Load()
	if w == 0 {
		return 0, 0, false
	}
	r, base, lat, _ := answerOf(w)
	return movedRIF(r, base, e.inflight.Load()), float64(lat), true
}

// movedRIF is an answer's RIF moved by this client's calls since: the
// in-flight count is inflight now and was base, its low 16 bits, then.
func movedRIF(rif, base, inflight uint32) int64 {
	return max(int64(rif)+int64(int16(uint16(inflight)-uint16(base))), 0)
}

// reportOf reads the serverload figures from a call's ORCA report, if it
// carries them.
func reportOf(load any) (rif uint32, latency float64, ok bool) {
	r, _ := load.(*v3orcapb.OrcaLoadReport)
	if r == nil {
		return 0, 0, false
	}
	v, ok := r.NamedMetrics[rifMetric]
	if !ok || !(v >= 0) {
		return 0, 0, false
	}
	return uint32(min(v, math.MaxUint32>>1)), r.NamedMetrics[latencyMetric], true
}
