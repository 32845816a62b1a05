package ringhash

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/pickwise/pickwise/internal/engine"
	"github.com/pickwise/pickwise/lbconfig"
	"google.golang.org/grpc/serviceconfig"
)

// Table names accepted in Config.Table.
const (
	TableRing       = "ring"
	TableMaglev     = "maglev"
	TableRendezvous = "rendezvous"
)

// Config is pickwise_ring_hash's service-config object. Build one in Go from
// DefaultConfig: the fields a struct literal leaves at zero are settings,
// not the defaults, and most of them turn a feature off.
type Config struct {
	serviceconfig.LoadBalancingConfig `json:"-"`

	// Table is the algorithm that maps a key to endpoints: "ring" (the
	// default), "maglev" or "rendezvous".
	Table string `json:"table"`
	// MinRingSize and MaxRingSize bound the ring's entries (table "ring"
	// only); 0 means the default, as in grpc-go. Defaults 1024 (Envoy's,
	// gRFC A42's and grpc-go's) and 131072 (ours: a memory budget of about
	// 0.9 MB; Envoy's and gRFC A42's default is 8M entries, grpc-go's
	// ring_hash_experimental defaults to 4096 and clamps both sizes to
	// GRPC_RING_HASH_CAP, 4096 unless set); each at most 8M (8388608),
	// Envoy's upper bound, which grpc-go enforces too. Within
	// them an endpoint of the median weight gets 128 to 255 entries, the
	// others in proportion to their weights, and a fleet or weights that
	// would need more than MaxRingSize share MaxRingSize instead: the ring
	// never grows with weight skew.
	MinRingSize uint64 `json:"minRingSize"`
	MaxRingSize uint64 `json:"maxRingSize"`
	// MaglevTableSize is the Maglev lookup table's size (table "maglev"
	// only): a prime, default 65537 (Envoy's default), at most 262139
	// (ours, the largest prime table that fills within about 20 ms; Envoy
	// accepts up to 5000011); 0 means the default. It must be at least
	// the number of endpoints, or the balancer falls back to rendezvous.
	MaglevTableSize uint64 `json:"maglevTableSize"`
	// MaxWeightRatio caps every endpoint's weight at this many times the
	// (upper) median weight before placement, in every table, so that a
	// single absurd weight (EDS allows up to 2^32-1) gets at most
	// MaxWeightRatio / (MaxWeightRatio + ceil(n/2) - 1) of n endpoints'
	// total weight. Default 16 (ours; neither Envoy nor grpc-go caps
	// weights), in [1, 4294967295]; 0 means the default, 1 flattens every
	// weight above the median to it.
	MaxWeightRatio uint64 `json:"maxWeightRatio"`
	// RequestHashHeader names the request header whose value is the key
	// when the RPC's context carries none (gRFC A76). Lowercased; must be a
	// valid metadata key and not a binary ("-bin") one. Empty: no header.
	RequestHashHeader string `json:"requestHashHeader"`
	// BalanceFactor turns on bounded load (Envoy's hash_balance_factor as
	// a ratio, 1.25 for 125): an endpoint of weight w is skipped for the
	// next candidate while its in-flight count would exceed
	// ceil(BalanceFactor * (total in-flight + 1) * w / W), W the total
	// weight of the READY endpoints that are not ejected. 0, the default,
	// turns it off; otherwise it must be at least 1.
	BalanceFactor float64 `json:"balanceFactor"`
	// FailurePenalty steers the calls that have no endpoint of their own
	// away from endpoints with recent server-side failures: bounded load's
	// overflow and calls without a key. It never moves a key by itself;
	// its counts are the evidence Ejection acts on. On by default (the
	// same object as pickwise_p2c's); {"enabled": false} turns it off, and
	// with it ejection.
	FailurePenalty lbconfig.FailurePenaltyConfig `json:"failurePenalty"`
	// Ejection takes an endpoint whose failures stand far above the
	// fleet's out of placement for a while (the same object as
	// pickwise_p2c's): its keys go to their next candidate, a probe call
	// now and then goes home, and the keys come back on readmission. On
	// by default.
	Ejection lbconfig.EjectionConfig `json:"ejection"`
	// StrictAffinity keeps every key on its own endpoint while that
	// endpoint is READY, however it fails: no ejection, and retries go
	// where the first attempt went. For users whose correctness, not just
	// a cache, depends on a key's endpoint. Default false.
	StrictAffinity bool `json:"strictAffinity"`
	// RejoinHold is how long an endpoint that left (removed by the
	// resolver, or in TRANSIENT_FAILURE after it was READY) and came back
	// must stay present and READY before it gets its keys back: until
	// then its keys stay on the endpoints that took them, so a node that
	// flaps does not move its keys twice per flap, and a cache behind it
	// is not refilled on every return. An endpoint never seen before takes
	// its keys at once. Default DefaultRejoinHold; "0s" gives keys back
	// the moment the endpoint is READY, as grpc-go's ring_hash does.
	RejoinHold lbconfig.Duration `json:"rejoinHold"`
	// RejoinRamp is how long, after the hold, the endpoint takes to get
	// all its keys back: each key returns at its own moment in the ramp
	// (a hash of the key and the endpoint), so each moves once and the
	// endpoint's cache warms gradually. Default DefaultRejoinRamp; "0s"
	// gives them all back at once.
	RejoinRamp lbconfig.Duration `json:"rejoinRamp"`
}

// Defaults of the fields above.
const (
	// DefaultMinRingSize is Envoy's default minimum_ring_size, which gRFC
	// A42 adopts and grpc-go uses both as its ring_hash_experimental JSON
	// default and for an xDS cluster that sets none.
	DefaultMinRingSize = 1024
	// DefaultMaxRingSize is ours, a memory budget: 2^17 entries of 6
	// bytes, about 0.9 MB with the bucket index, so that 10000 endpoints
	// keep 13 entries each within 1 MB. Envoy's default maximum_ring_size
	// is 8M entries, as is gRFC A42's and grpc-go's for an xDS cluster;
	// grpc-go's ring_hash_experimental JSON default is 4096, and it clamps
	// both sizes to GRPC_RING_HASH_CAP, 4096 unless that is set.
	DefaultMaxRingSize = 1 << 17
	// DefaultMaglevTableSize is Envoy's default table_size, the smallest
	// prime above 2^16: M > 100n keeps every share within 1% of 1/n for
	// up to 655 endpoints, which the paper gives as its sizing rule.
	DefaultMaglevTableSize = 65537
	// DefaultMaxWeightRatio: no endpoint is placed with more than 16
	// times the median weight. It is ours (neither Envoy nor grpc-go caps
	// weights): wide enough for the capacity ratios of mixed hardware
	// generations, narrow enough that a single absurd weight (EDS allows
	// up to 2^32-1) gets at most 16/(16+ceil(n/2)-1) of the total weight,
	// and so, to within each table's own error, of the keys: 3.1% at 1000
	// endpoints, 24% at 100, 64% at 20.
	DefaultMaxWeightRatio = 16
)

// The rejoin defaults: long enough to outlast the flaps of a node that
// restarts or loses its network for seconds at a time, short against a
// deploy's pace.
const (
	DefaultRejoinHold = 30 * time.Second
	DefaultRejoinRamp = 10 * time.Second
)

// maxRejoin bounds RejoinHold and RejoinRamp: a returning endpoint kept
// out for longer would be as good as gone.
const maxRejoin = time.Hour

// DefaultConfig returns the config used for an empty JSON object.
func DefaultConfig() *Config {
	return &Config{
		RejoinHold:      lbconfig.Duration(DefaultRejoinHold),
		RejoinRamp:      lbconfig.Duration(DefaultRejoinRamp),
		Table:           TableRing,
		MinRingSize:     DefaultMinRingSize,
		MaxRingSize:     DefaultMaxRingSize,
		MaglevTableSize: DefaultMaglevTableSize,
		MaxWeightRatio:  DefaultMaxWeightRatio,
		FailurePenalty:  lbconfig.DefaultFailurePenalty(),
		Ejection:        lbconfig.DefaultEjection(),
	}
}

// ParseConfig reads a pickwise_ring_hash config: defaults first, then the
// user's fields over them, then the rules below. Unknown fields are
// rejected.
func ParseConfig(js json.RawMessage) (serviceconfig.LoadBalancingConfig, error) {
	// Every policy's ParseConfig has this shape (decode over the
	// defaults, the policy's own rules, then the shared parts' Validate),
	// so that each policy's config reads on its own; the shared parts'
	// rules are written once, in lbconfig.
	cfg := DefaultConfig()
	if err := engine.DecodeConfig(Name, js, cfg); err != nil {
		return nil, err
	}
	switch cfg.Table {
	case TableRing, TableMaglev, TableRendezvous:
	case "":
		cfg.Table = TableRing
	default:
		return nil, fmt.Errorf("%s: table %q: must be %q, %q or %q", Name, cfg.Table, TableRing, TableMaglev, TableRendezvous)
	}
	// grpc-go reads 0 as "use the default" for both ring sizes.
	if cfg.MinRingSize == 0 {
		cfg.MinRingSize = DefaultMinRingSize
	}
	if cfg.MaxRingSize == 0 {
		cfg.MaxRingSize = DefaultMaxRingSize
	}
	// Envoy and grpc-go reject ring sizes above 8M entries.
	if cfg.MinRingSize > maxRingSizeLimit {
		return nil, fmt.Errorf("%s: minRingSize %d: must be <= %d", Name, cfg.MinRingSize, maxRingSizeLimit)
	}
	if cfg.MaxRingSize > maxRingSizeLimit {
		return nil, fmt.Errorf("%s: maxRingSize %d: must be <= %d", Name, cfg.MaxRingSize, maxRingSizeLimit)
	}
	if cfg.MinRingSize > cfg.MaxRingSize {
		return nil, fmt.Errorf("%s: minRingSize %d: must be <= maxRingSize %d", Name, cfg.MinRingSize, cfg.MaxRingSize)
	}
	// Maglev needs a prime, so that every endpoint's permutation visits
	// every slot (Envoy's rule too). The upper bound is ours, lower than
	// Envoy's 5000011: the fill costs O(M log M) whatever the weights, and
	// above it a rebuild would take longer than 20 ms.
	if cfg.MaglevTableSize == 0 {
		cfg.MaglevTableSize = DefaultMaglevTableSize
	}
	if cfg.MaglevTableSize > maxMaglevTableSize || !isPrime(cfg.MaglevTableSize) {
		return nil, fmt.Errorf("%s: maglevTableSize %d: must be a prime <= %d", Name, cfg.MaglevTableSize, maxMaglevTableSize)
	}
	// Ours: 0 is the default, as for the sizes; the cap is applied to
	// 32-bit weights, so a larger ratio would mean nothing.
	if cfg.MaxWeightRatio == 0 {
		cfg.MaxWeightRatio = DefaultMaxWeightRatio
	}
	if cfg.MaxWeightRatio > math.MaxUint32 {
		return nil, fmt.Errorf("%s: maxWeightRatio %d: must be <= %d", Name, cfg.MaxWeightRatio, uint64(math.MaxUint32))
	}
	// gRFC A76 and grpc-go: the header is matched lowercased, must be a
	// valid metadata key, and must not be binary.
	if cfg.RequestHashHeader != "" {
		cfg.RequestHashHeader = strings.ToLower(cfg.RequestHashHeader)
		if err := validateHeaderKey(cfg.RequestHashHeader); err != nil {
			return nil, fmt.Errorf("%s: requestHashHeader %q: %v", Name, cfg.RequestHashHeader, err)
		}
		if strings.HasSuffix(cfg.RequestHashHeader, "-bin") {
			return nil, fmt.Errorf("%s: requestHashHeader %q: must not end with \"-bin\"", Name, cfg.RequestHashHeader)
		}
	}
	// Envoy's hash_balance_factor is at least 100 (a ratio of 1): below it
	// the caps would sum to less than the load and every endpoint could be
	// full. 0 is "off".
	if bf := cfg.BalanceFactor; bf != 0 && (!(bf >= 1) || math.IsInf(bf, 0)) {
		return nil, fmt.Errorf("%s: balanceFactor %v: must be 0 (off) or a finite number >= 1", Name, bf)
	}
	for _, d := range []struct {
		name string
		v    lbconfig.Duration
	}{{"rejoinHold", cfg.RejoinHold}, {"rejoinRamp", cfg.RejoinRamp}} {
		if time.Duration(d.v) < 0 || time.Duration(d.v) > maxRejoin {
			return nil, fmt.Errorf("%s: %s %v: must be in [0s, %v]", Name, d.name, time.Duration(d.v), maxRejoin)
		}
	}
	if err := cfg.FailurePenalty.Validate(Name); err != nil {
		return nil, err
	}
	if err := cfg.Ejection.Validate(Name); err != nil {
		return nil, err
	}
	return cfg, nil
}

// buildTable builds the table cfg names over eps. prev, if not nil, is the
// table eps replaces and prevEps what it was built over: a ring starts
// from the last ring, which it only reads.
func (c *Config) buildTable(eps []endpoint, prev table, prevEps []endpoint) (table, error) {
	ratio := uint32(c.MaxWeightRatio)
	switch c.Table {
	case TableMaglev:
		return newMaglev(eps, c.MaglevTableSize, ratio)
	case TableRendezvous:
		return newRendezvous(eps, ratio)
	default:
		if r, ok := prev.(*ring); ok {
			return updateRing(r, prevEps, eps, c.MinRingSize, c.MaxRingSize, ratio)
		}
		return newRing(eps, c.MinRingSize, c.MaxRingSize, ratio)
	}
}

// validateHeaderKey applies grpc-go's rule for metadata keys (the one its
// ring_hash applies to requestHashHeader): not a pseudo-header, and only
// 0-9, a-z, '-', '_' and '.', the key already lowercased.
func validateHeaderKey(k string) error {
	if strings.HasPrefix(k, ":") {
		return fmt.Errorf("must not start with ':'")
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.') {
			return fmt.Errorf("character %q at %d: a key may hold only 0-9, a-z, '-', '_' and '.'", c, i)
		}
	}
	return nil
}
