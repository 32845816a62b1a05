package serverload

import (
	"encoding/binary"
	"math"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/encoding/protowire"
)

// trailerKey is where ORCA clients, grpc's among them, read a call's load
// report: a binary OrcaLoadReport (github.com/cncf/xds, xds.data.orca.v3).
const trailerKey = "endpoint-load-metrics-bin"

// namedMetricsField is OrcaLoadReport's map<string, double> named_metrics.
const namedMetricsField = 8

// The report is two named_metrics entries, in key order as proto.Marshal's
// deterministic mode writes them. Everything but the two values is fixed,
// so it is encoded once: a call's report is these prefixes, each followed
// by its value's 8 bytes.
var (
	latencyPrefix = entryPrefix(LatencyMetric)
	rifPrefix     = entryPrefix(RIFMetric)
)

const reportLen = len(LatencyMetric) + len(RIFMetric) + 2*(5+8)

// trailer is a call's ORCA trailer when grpc's per-call recorder is not
// in use. It is encoded here rather than by proto.Marshal of an
// OrcaLoadReport, which would need a message, a map and reflection; a
// test checks the two agree byte for byte.
func trailer(rif int, latency time.Duration) metadata.MD {
	var buf [reportLen]byte
	b := append(buf[:0], latencyPrefix...)
	b = binary.LittleEndian.AppendUint64(b, math.Float64bits(latency.Seconds()))
	b = append(b, rifPrefix...)
	b = binary.LittleEndian.AppendUint64(b, math.Float64bits(float64(rif)))
	return metadata.MD{trailerKey: []string{string(b)}}
}

// entryPrefix encodes a named_metrics map entry up to its value: the
// entry's tag and length, the key (field 1), and the value's tag (field 2,
// a double).
func entryPrefix(key string) []byte {
	size := protowire.SizeTag(1) + protowire.SizeBytes(len(key)) + protowire.SizeTag(2) + protowire.SizeFixed64()
	b := protowire.AppendTag(nil, namedMetricsField, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(size))
	b = protowire.AppendTag(b, 1, protowire.BytesType)
	b = protowire.AppendString(b, key)
	return protowire.AppendTag(b, 2, protowire.Fixed64Type)
}

// trailerCache holds recent trailers, so that a call whose report equals a
// recent one's shares its metadata instead of allocating a map, a slice
// and a string, which cost more than the rest of the interceptor. Reports
// repeat because latency is reported to 1/32 of an octave (see quantize)
// and RIF takes few values at a time. A trailer is never written to after
// it is built, so calls may share it. Direct-mapped: a collision costs one
// build.
type trailerCache [256]atomic.Pointer[cachedTrailer]

type cachedTrailer struct {
	rif     int
	latency time.Duration
	md      metadata.MD
}

func (c *trailerCache) get(rif int, latency time.Duration) metadata.MD {
	key := uint64(rif)<<20 ^ math.Float64bits(float64(latency))>>(52-quantumBits)
	slot := &c[key*0x9e3779b97f4a7c15>>(64-8)] // Fibonacci hashing
	if e := slot.Load(); e != nil && e.rif == rif && e.latency == latency {
		return e.md
	}
	md := trailer(rif, latency)
	slot.Store(&cachedTrailer{rif: rif, latency: latency, md: md})
	return md
}

// quantumBits is how many mantissa bits of a latency reports keep.
const quantumBits = 5

// quantize rounds a latency to quantumBits bits of mantissa: to 1/32 of
// an octave, within 1.6%, far below the estimate's own noise.
func quantize(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	const drop = 52 - quantumBits
	b := math.Float64bits(float64(d))
	b = (b + 1<<(drop-1)) >> drop << drop
	return time.Duration(math.Float64frombits(b))
}
