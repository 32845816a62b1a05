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

// reportedLoad is what an endpoint's server last said of its own load, in
// a load probe's answer or a call's report: its requests in flight (RIF)
// and its estimate of a new call's latency. Answers write it; Prequal's
// picks read it. Every field is atomic.
type reportedLoad struct {
	// word packs the answer: RIF in the high half, the latency in seconds
	// as float32 bits in the low; 0 before the first answer.
	word atomic.Uint64
	at   atomic.Int64  // Clock.Nanotime of the answer
	base atomic.Uint32 // the endpoint's in-flight count when the answer arrived
	uses atomic.Int32  // picks placed on the answer
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

// set records an answer that arrived at now, when the endpoint had
// inflight calls in flight.
func (l *reportedLoad) set(rif uint32, latency float64, now int64, inflight uint32) {
	l.base.Store(inflight)
	l.at.Store(now)
	l.uses.Store(0)
	l.word.Store(uint64(rif)<<32 | uint64(math.Float32bits(float32(latency))))
}

// estimate is the RIF and latency (seconds) of the last answer, the RIF
// moved by the calls this client started and finished since: those it
// placed count at once, as the answer could not have counted them.
// known is false before the first answer.
func (l *reportedLoad) estimate(inflight uint32) (rif int64, latency float64, known bool) {
	w := l.word.Load()
	if w == 0 {
		return 0, 0, false
	}
	rif = int64(w>>32) + int64(int32(inflight-l.base.Load()))
	return max(rif, 0), float64(math.Float32frombits(uint32(w))), true
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
	latency = r.NamedMetrics[latencyMetric]
	if !(latency >= 0) || math.IsInf(latency, 1) {
		latency = 0
	}
	return uint32(min(v, math.MaxUint32>>1)), latency, true
}
