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
	Cost:    "In-flight calls of the endpoint, which bounded load caps at balanceFactor times its weight's share of the load.",
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
	// table's config changed, so that connectivity changes, which publish
	// a picker each, never rebuild a table.
	tbl      table
	tblCfg   tableConfig
	tblEps   []endpoint     // what the table was built over, in that order
	tblIndex map[string]int // identity -> index into tblEps; built on first need
	// tblWeights are bounded load's weights, aligned with tblEps; built on
	// first need (see loadWeights).
	tblWeights []uint32
	// The last snapshot's members array (in), and the members the table
	// is over (members), which are in's own when aligned and else taken
	// from in by perm (table index -> index in in).
	in      []engine.Member
	members []engine.Member
	perm    []int32
	// warnedSize says the size warning for tbl's endpoint count was
	// logged (see warnRendezvousSize).
	warnedSize bool

	// load is bounded load's balancer-wide in-flight count; dones are the
	// per-endpoint Done callbacks that keep it, built once per endpoint.
	// lastDones is the last picker's, aligned with its members, whose
	// Stats were lastStats: the next picker reuses the slice when they
	// are the same.
	rejoin rejoins // the rejoin hold's memory

	load      *loadCounter
	dones     map[*engine.Endpoint]func(balancer.DoneInfo)
	lastDones []func(balancer.DoneInfo)
	lastStats []*engine.Endpoint
}

// tableConfig is the part of Config a table is built from: a change to any
// other field (the header, bounded load, ejection) keeps the table.
type tableConfig struct {
	table                         string
	minRing, maxRing, maglevSlots uint64
	maxWeightRatio                uint64
}

// tableConfig returns c's table-building fields.
func (c *Config) tableConfig() tableConfig {
	return tableConfig{c.Table, c.MinRingSize, c.MaxRingSize, c.MaglevTableSize, c.MaxWeightRatio}
}

// warningf logs a warning; a variable so that tests can see what is
// logged.
var warningf = logger.Warningf

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
//
// A connectivity change publishes a picker over the members array of the
// last snapshot (Snapshot.Members), which then needs no check at all; a
// new array with the same members in the same order is checked next, in
// one pass with no map and no copy: the snapshot's members are then
// already aligned with the table and the picker uses them as they are
// (BenchmarkConnectivityChange).
func (p *policy) NewPicker(snap *engine.Snapshot) balancer.Picker {
	// The engine never writes a snapshot's slices after handing them
	// over, so the picker may keep them.
	if !p.sameInputs(snap.Members) {
		p.in, p.members, p.perm = nil, nil, nil
		if p.alignedWith(snap.Members) {
			p.members = snap.Members
		} else {
			members, perm, err := p.alignMembers(snap.Members)
			if err != nil {
				return engine.ErrPicker(err)
			}
			p.members, p.perm = members, perm
		}
		p.in = snap.Members
	}
	members, states := p.members, snap.States
	if p.perm != nil {
		states = make([]engine.MemberState, len(p.perm))
		for i, j := range p.perm {
			states[i] = snap.States[j]
		}
	}
	connecting := false
	for _, st := range states {
		connecting = connecting || st.State() == connectivity.Connecting
	}
	var adm []admission
	// A snapshot built by hand, without a clock, has no time to hold by.
	if hold, ramp := int64(p.cfg.RejoinHold), int64(p.cfg.RejoinRamp); (hold > 0 || ramp > 0) && snap.Clock != nil {
		now := snap.Clock.Nanotime()
		if len(p.rejoin.for_) != len(p.tblEps) || (len(p.tblEps) > 0 && &p.rejoin.for_[0] != &p.tblEps[0]) {
			p.rejoin.align(p.tblEps, now, hold)
		}
		adm = p.rejoin.update(members, states, now, hold, ramp)
	} else {
		p.rejoin = rejoins{}
	}
	pk := &picker{
		tbl:        p.tbl,
		members:    members,
		states:     states,
		header:     p.cfg.RequestHashHeader,
		rand:       snap.Rand,
		connecting: connecting,
		snap:       snap,
		strict:     p.cfg.StrictAffinity,
		adm:        adm,
	}
	if bf := p.cfg.BalanceFactor; bf != 0 {
		if p.load == nil {
			p.load = &loadCounter{}
		}
		pk.dones = p.donesFor(members)
		pk.weights = p.loadWeights()
		pk.load, pk.factor = p.load, bf/float64(placingWeight(pk.weights, states))
	} else {
		p.dones, p.lastDones, p.lastStats = nil, nil, nil
	}
	return pk
}

// sameInputs reports whether in is the members array the last picker was
// built from, by the current table config: the engine hands the same
// array to every snapshot until the set of endpoints changes.
func (p *policy) sameInputs(in []engine.Member) bool {
	return p.tbl != nil && len(in) > 0 && len(in) == len(p.in) && &in[0] == &p.in[0] && p.tblCfg == p.cfg.tableConfig()
}

// alignedWith reports whether the cached table was built, by the current
// config, over exactly members' identities and weights in members' order.
// It costs one identity and weight comparison per member.
func (p *policy) alignedWith(members []engine.Member) bool {
	if p.tbl == nil || len(members) != len(p.tblEps) || p.tblCfg != p.cfg.tableConfig() {
		return false
	}
	for i := range members {
		if members[i].Weight != p.tblEps[i].weight || identity(members[i].Endpoint) != p.tblEps[i].id {
			return false
		}
	}
	return true
}

// alignMembers returns members deduped and in the order of the table's
// endpoints, with the index in all of each (nil when that is all's own
// order), building a new table first unless the cached one was built over
// the same set of (identity, weight) pairs in another order.
func (p *policy) alignMembers(all []engine.Member) ([]engine.Member, []int32, error) {
	// Dedupe by identity: two endpoints with one identity would be one
	// point owning two shares. The first in resolver order wins.
	ids := make([]string, 0, len(all))
	byID := make(map[string]int, len(all))
	for i := range all {
		id := identity(all[i].Endpoint)
		if _, dup := byID[id]; dup {
			continue
		}
		byID[id] = i
		ids = append(ids, id)
	}
	rebuilt := !p.tableFits(ids, byID, all)
	if rebuilt {
		eps := make([]endpoint, len(ids))
		for i, id := range ids {
			eps[i] = endpoint{id: id, weight: all[byID[id]].Weight}
		}
		tbl, err := p.cfg.buildTable(eps, p.tbl, p.tblEps)
		if err != nil {
			// A table the config cannot express (more endpoints than
			// Maglev slots or ring entries): rendezvous can hold any set.
			warningf("%s: %v; using a rendezvous table", Name, err)
			if tbl, err = newRendezvous(eps, uint32(p.cfg.MaxWeightRatio)); err != nil {
				return nil, nil, err
			}
		}
		p.tbl, p.tblCfg, p.tblEps, p.tblIndex, p.tblWeights = tbl, p.cfg.tableConfig(), eps, nil, nil
		p.warnRendezvousSize()
	}
	if rebuilt && len(ids) == len(all) && p.alignedWith(all) {
		// A new table over all as they are (the usual case): no copy. (A
		// table kept is in another order, or NewPicker would not be here.)
		return all, nil, nil
	}
	members := make([]engine.Member, len(p.tblEps))
	perm := make([]int32, len(p.tblEps))
	for i, ep := range p.tblEps {
		j := byID[ep.id]
		members[i], perm[i] = all[j], int32(j)
	}
	return members, perm, nil
}

// warnRendezvousSize logs a warning when a rendezvous table holds more
// endpoints than it is meant for (rendezvousMaxEndpoints): its picks cost
// O(n). Once per crossing of the limit, not once per rebuild, so that a
// fleet that scales often does not flood the log.
func (p *policy) warnRendezvousSize() {
	_, isRendezvous := p.tbl.(*rendezvous)
	n := p.tbl.size()
	if !isRendezvous || n <= rendezvousMaxEndpoints {
		p.warnedSize = false
		return
	}
	if p.warnedSize {
		return
	}
	p.warnedSize = true
	warningf("%s: rendezvous table over %d endpoints, more than the %d it is meant for: every pick scores all %d endpoints (1 to 2 ns each); use table %q or %q for large sets",
		Name, n, rendezvousMaxEndpoints, n, TableRing, TableMaglev)
}

// tableFits reports whether the cached table was built over exactly the
// identities in ids with the weights in members, by the current config.
func (p *policy) tableFits(ids []string, byID map[string]int, members []engine.Member) bool {
	if p.tbl == nil || len(ids) != len(p.tblEps) || p.tblCfg != p.cfg.tableConfig() {
		return false
	}
	if p.tblIndex == nil {
		p.tblIndex = make(map[string]int, len(p.tblEps))
		for i, ep := range p.tblEps {
			p.tblIndex[ep.id] = i
		}
	}
	for _, id := range ids {
		i, ok := p.tblIndex[id]
		if !ok || p.tblEps[i].weight != members[byID[id]].Weight {
			return false
		}
	}
	return true
}

// donesFor returns bounded load's Done callbacks aligned with members: the
// last picker's slice when the members' endpoints are the same, else one
// built from the callbacks kept per endpoint.
func (p *policy) donesFor(members []engine.Member) []func(balancer.DoneInfo) {
	if len(members) == len(p.lastStats) {
		same := true
		for i := range members {
			if members[i].Conn.Stats != p.lastStats[i] {
				same = false
				break
			}
		}
		if same {
			return p.lastDones
		}
	}
	dones := make(map[*engine.Endpoint]func(balancer.DoneInfo), len(members))
	out := make([]func(balancer.DoneInfo), len(members))
	stats := make([]*engine.Endpoint, len(members))
	for i := range members {
		e := members[i].Conn.Stats
		d := p.dones[e]
		if d == nil {
			d = p.load.doneFor(e)
		}
		dones[e], out[i], stats[i] = d, d, e
	}
	p.dones, p.lastDones, p.lastStats = dones, out, stats
	return out
}

// loadWeights returns the weights bounded load shares its caps by, aligned
// with the table's endpoints. They are the weights the table places by
// (capped, see capWeights), so that an endpoint's cap follows its share of
// the keys, divided by their greatest common divisor, so that the caps of
// equal weights are computed exactly as if there were no weights at all.
func (p *policy) loadWeights() []uint32 {
	if p.tblWeights != nil {
		return p.tblWeights
	}
	w := make([]uint32, len(p.tblEps))
	for i, ep := range p.tblEps {
		w[i] = max(ep.weight, 1)
	}
	capWeights(w, uint32(p.tblCfg.maxWeightRatio))
	g := w[0]
	for _, x := range w[1:] {
		for x != 0 {
			g, x = x, g%x
		}
	}
	if g > 1 {
		for i := range w {
			w[i] /= g
		}
	}
	p.tblWeights = w
	return w
}

// placingWeight is the total weight bounded load shares out: that of the
// READY endpoints that are not ejected. Counting any other would leave the
// caps of those that take calls summing to less than balanceFactor times
// the load. A returning endpoint held by its rejoin (rejoin.go) counts:
// its hold ends by the clock, with no new picker to count it then.
// Should none be READY, no cap is read.
func placingWeight(weights []uint32, states []engine.MemberState) uint64 {
	var placing uint64
	weights = weights[:len(states)]
	serving := engine.MemberStateOf(connectivity.Ready, false) // READY, not ejected
	for i, st := range states {
		if st == serving {
			placing += uint64(weights[i])
		}
	}
	return max(placing, 1)
}
