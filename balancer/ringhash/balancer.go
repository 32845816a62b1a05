package ringhash

import (
	"github.com/pickwise/pickwise/internal/engine"
	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/grpclog"
	"google.golang.org/grpc/resolver"
	grpcringhash "google.golang.org/grpc/resolver/ringhash"
	"google.golang.org/grpc/serviceconfig"
)

// Name is the policy's name in service configs.
const Name = "pickwise_ring_hash"

var logger = grpclog.Component("pickwise")

// Why a ring hash picker chose an endpoint (engine.PickReason).
const (
	// reasonHome: the key's own endpoint, the first along the table.
	reasonHome engine.PickReason = iota
	// reasonSpilled: the key's own endpoint was at bounded load's cap.
	reasonSpilled
	// reasonUnavailable: the key's own endpoint could not take calls
	// (TRANSIENT_FAILURE), so the call went to the next along the table.
	reasonUnavailable
	// reasonRandom: the call had no key; it went to a random place on the
	// table (gRFC A76).
	reasonRandom
)

// metrics are pickwise.ring_hash.*; see the metrics package.
var metrics = engine.RegisterMetrics(engine.MetricsSpec{
	Policy:  "ring_hash",
	Reasons: []string{"home", "spilled", "unavailable", "random"},
	Cost:    "In-flight calls of the endpoint, which bounded load caps at balanceFactor times the mean.",
})

func init() {
	engine.Register(engine.Spec{
		Name:        Name,
		Metrics:     metrics,
		ParseConfig: ParseConfig,
		NewPolicy:   func() engine.Policy { return &policy{cfg: DefaultConfig()} },
		Lazy:        true,
	})
}

// policy is one balancer's ring hash state. The engine calls Configure and
// NewPicker with its lock held, never concurrently, so the fields below
// are guarded by that lock; load is atomic inside.
type policy struct {
	cfg *Config

	// The table of the last picker and what it was built from: a new
	// picker reuses it unless the set of (identity, weight) pairs or the
	// table config changed, so that connectivity changes, which publish a
	// picker each, never rebuild a table.
	tbl      table
	tblCfg   Config
	tblIDs   []string       // identities in the order the table was built over
	tblIndex map[string]int // identity -> index into tblIDs
	tblW     []uint32       // weights, aligned with tblIDs

	// load is bounded load's balancer-wide in-flight count; dones are the
	// per-endpoint Done callbacks that keep it, built once per endpoint.
	load  *loadCounter
	dones map[*engine.Endpoint]func(balancer.DoneInfo)
}

// Configure keeps the config. Of the engine's settings, ring hash uses
// the failure penalty (for calls without an endpoint of their own, see
// Config.FailurePenalty) and ejection; slow start would move keys.
func (p *policy) Configure(c serviceconfig.LoadBalancingConfig) (engine.Settings, error) {
	cfg, err := engine.ConfigAs(Name, c, DefaultConfig)
	if err != nil {
		return engine.Settings{}, err
	}
	p.cfg = cfg
	ej := cfg.Ejection
	if cfg.StrictAffinity {
		ej.Enabled = false
	}
	return engine.Settings{FailurePenalty: cfg.FailurePenalty, Ejection: ej}, nil
}

// identity is the name an endpoint is placed by: its gRFC A76 hash key
// when the control plane set one (grpc's resolver/ringhash attribute),
// else its first address, as in gRFC A61.
func identity(ep resolver.Endpoint) string {
	if hk := grpcringhash.HashKey(ep); hk != "" {
		return hk
	}
	if len(ep.Addresses) == 0 {
		return ""
	}
	return ep.Addresses[0].Addr
}

// NewPicker builds a picker over every endpoint of snap, reusing the last
// table when the placement inputs are unchanged.
func (p *policy) NewPicker(snap *engine.Snapshot) balancer.Picker {
	// Dedupe by identity: two endpoints with one identity would be one
	// point owning two shares. The first in resolver order wins.
	ids := make([]string, 0, len(snap.Members))
	byID := make(map[string]int, len(snap.Members))
	for i := range snap.Members {
		id := identity(snap.Members[i].Endpoint)
		if _, dup := byID[id]; dup {
			continue
		}
		byID[id] = i
		ids = append(ids, id)
	}
	if !p.tableFits(ids, byID, snap.Members) {
		eps := make([]endpoint, len(ids))
		ws := make([]uint32, len(ids))
		for i, id := range ids {
			ws[i] = snap.Members[byID[id]].Weight
			eps[i] = endpoint{id: id, weight: ws[i]}
		}
		tbl, err := p.cfg.buildTable(eps)
		if err != nil {
			// A table the config cannot express (more endpoints than
			// Maglev slots or ring entries): rendezvous can hold any set.
			logger.Warningf("%s: %v; using a rendezvous table", Name, err)
			if tbl, err = newRendezvous(eps); err != nil {
				return engine.ErrPicker(err)
			}
		}
		p.tbl, p.tblCfg, p.tblIDs, p.tblW = tbl, *p.cfg, ids, ws
		p.tblIndex = make(map[string]int, len(ids))
		for i, id := range ids {
			p.tblIndex[id] = i
		}
	}
	// Members aligned with the table's endpoint indices.
	members := make([]engine.Member, len(p.tblIDs))
	connecting := false
	for i, id := range p.tblIDs {
		members[i] = snap.Members[byID[id]]
		connecting = connecting || members[i].State == connectivity.Connecting
	}
	pk := &picker{
		tbl:        p.tbl,
		members:    members,
		header:     p.cfg.RequestHashHeader,
		rand:       snap.Rand,
		connecting: connecting,
		snap:       snap,
		strict:     p.cfg.StrictAffinity,
	}
	if bf := p.cfg.BalanceFactor; bf != 0 {
		if p.load == nil {
			p.load = &loadCounter{}
		}
		dones := make(map[*engine.Endpoint]func(balancer.DoneInfo), len(members))
		pk.dones = make([]func(balancer.DoneInfo), len(members))
		for i := range members {
			e := members[i].Conn.Stats
			d := p.dones[e]
			if d == nil {
				d = p.load.doneFor(e)
			}
			dones[e] = d
			pk.dones[i] = d
		}
		p.dones = dones
		pk.load, pk.factor = p.load, bf/float64(len(members))
	} else {
		p.dones = nil
	}
	return pk
}

// tableFits reports whether the cached table was built over exactly the
// identities in ids with the weights in members, by the current config.
func (p *policy) tableFits(ids []string, byID map[string]int, members []engine.Member) bool {
	if p.tbl == nil || len(ids) != len(p.tblIDs) || p.tblCfg != *p.cfg {
		return false
	}
	for _, id := range ids {
		i, ok := p.tblIndex[id]
		if !ok || p.tblW[i] != members[byID[id]].Weight {
			return false
		}
	}
	return true
}
