package engine

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"

	"github.com/cespare/xxhash/v2"
	"google.golang.org/grpc/serviceconfig"
)

// membership follows what a balancer was told to balance over: its
// endpoints and their weights, and its parsed config. Each gets a
// fingerprint that is the same on every client told the same, whatever
// the order of the endpoints, so that a fleet's dashboard can count the
// distinct views of one target (docs/observability.md). A change of
// either is logged once, and counted in the membership's revision.
//
// Guarded by the balancer's mu.
type membership struct {
	name      string // the policy's
	target    string
	revision  uint64 // changes of either fingerprint; 1 after the first update
	endpoints uint64 // fingerprint of the endpoints and weights
	count     int
	config    uint64          // fingerprint of config
	configJS  json.RawMessage // the config as parsed, as JSON
	cfg       serviceconfig.LoadBalancingConfig
	changed   int64 // Clock.Nanotime of the last change
}

// update takes the membership of one resolver update: order, the
// balancer's endpoints in resolver order, and cfg, its parsed config.
func (m *membership) update(order []*Endpoint, cfg serviceconfig.LoadBalancingConfig, now int64) {
	fp, config := membershipFingerprint(order), m.config
	if cfg != m.cfg || m.revision == 0 {
		// grpc hands the same parsed config to every update until the
		// service config changes.
		m.cfg = cfg
		m.configJS, config = configFingerprint(cfg)
	}
	if m.revision != 0 && fp == m.endpoints && config == m.config {
		return
	}
	m.revision++
	m.endpoints, m.config, m.count, m.changed = fp, config, len(order), now
	logger.Infof("%s: %s: membership %s (%d endpoints), config %s, revision %d", m.name, m.target, FormatFingerprint(fp), len(order), FormatFingerprint(config), m.revision)
}

// FormatFingerprint is how fingerprints are written in logs, metrics and
// the introspection page: 16 hex digits.
func FormatFingerprint(fp uint64) string { return fmt.Sprintf("%016x", fp) }

// membershipFingerprint is the fingerprint of endpoints and their weights:
// a sum of each one's hash, so that order does not matter, mixed once
// more with the count. An endpoint's hash is kept until its weight
// changes (its key never does), so that an update over a large fleet
// reads a word per endpoint.
func membershipFingerprint(order []*Endpoint) uint64 {
	var sum uint64
	var buf []byte
	for _, e := range order {
		if e.fingerprint.hash == 0 || e.fingerprint.weight != e.weight {
			buf = append(buf[:0], endpointKey(e.resolved)...)
			buf = append(buf, 0)
			buf = strconv.AppendUint(buf, math.Float64bits(e.weight), 16)
			e.fingerprint.hash, e.fingerprint.weight = xxhash.Sum64(buf)|1, e.weight
		}
		sum += e.fingerprint.hash
	}
	buf = strconv.AppendUint(append(buf[:0], "n"...), sum, 16)
	buf = strconv.AppendInt(append(buf, ':'), int64(len(order)), 10)
	return xxhash.Sum64(buf)
}

// configFingerprint is cfg as JSON, and its fingerprint. encoding/json
// writes struct fields in their order and map keys sorted, so that equal
// configs give equal JSON; a config it cannot write is named by its type.
func configFingerprint(cfg serviceconfig.LoadBalancingConfig) (json.RawMessage, uint64) {
	js, err := json.Marshal(cfg)
	if err != nil {
		js, _ = json.Marshal(fmt.Sprintf("%T", cfg))
	}
	return js, xxhash.Sum64(js)
}
