package engine

import (
	"encoding/json"
	"math"
	"slices"
	"sync"
	"time"

	"google.golang.org/grpc/connectivity"
)

// Introspection: what the admin page shows of each balancer, read on
// demand under the balancer's lock from the feature owners. Nothing here
// runs on a pick or a Done: the pick counts it reads are the ones picks
// keep anyway, and the samples it compares them with are its own.

// BalancerInfo is one balancer as the introspection page shows it; the
// JSON is documented in docs/observability.md.
type BalancerInfo struct {
	Target            string          `json:"target"`
	Policy            string          `json:"policy"`
	State             string          `json:"state"`
	Config            json.RawMessage `json:"config"`
	ConfigFingerprint string          `json:"configFingerprint"`
	Membership        MembershipInfo  `json:"membership"`
	// ShareWindowSeconds is the span that Picks and Share cover: since an
	// earlier reading the balancer kept (inspector), or since it was
	// built. ShareFrom says how Share is known: "picks" counted, or
	// "schedule", a weighted round robin's planned share.
	ShareWindowSeconds float64 `json:"shareWindowSeconds"`
	ShareFrom          string  `json:"shareFrom"`
	Picks              uint64  `json:"picks"`
	Ejected            int     `json:"ejected"`
	// Candidates is how many endpoints a pick compares, where the
	// policy's picker is the engine's: choiceCount for a d-choice picker,
	// the pool for pickwise_prequal, 1 for a weighted round robin (2 with
	// its in-flight check).
	Candidates int `json:"candidates,omitempty"`
	// Retries are the picks of calls' second, third, and fourth or later
	// attempts since the balancer was built (with the attempts
	// interceptor).
	Retries   [3]uint64      `json:"retries"`
	Endpoints []EndpointInfo `json:"endpoints"`
}

// MembershipInfo is a balancer's view of its membership.
type MembershipInfo struct {
	Revision    uint64    `json:"revision"`
	Fingerprint string    `json:"fingerprint"`
	Endpoints   int       `json:"endpoints"`
	Changed     time.Time `json:"changed"`
}

// EndpointInfo is one endpoint's row.
type EndpointInfo struct {
	Address string `json:"address"`
	State   string `json:"state"`
	// InPicker says the current picker places calls on it (READY and not
	// ejected).
	InPicker bool `json:"inPicker"`
	// Weight is the configured weight (xDS, the weight attribute);
	// ReportedWeight the backend-reported one and its status, where the
	// policy keeps them; EffectiveWeight what placement follows: the
	// weight the picker uses, times the slow-start ramp and the share
	// failure avoidance leaves.
	Weight          float64  `json:"weight"`
	ReportedWeight  *float64 `json:"reportedWeight,omitempty"`
	WeightStatus    string   `json:"weightStatus,omitempty"`
	EffectiveWeight float64  `json:"effectiveWeight"`
	InFlight        int64    `json:"inFlight"`
	// Cost is what the picker compares, where it compares one.
	Cost *float64 `json:"cost,omitempty"`
	// FailureRate is failures over Outcomes, decayed counts of recent
	// outcomes; Avoidance the share of picks that pass the endpoint over
	// for them.
	FailureRate float64 `json:"failureRate"`
	Outcomes    float64 `json:"outcomes"`
	Avoidance   float64 `json:"avoidance"`
	Ejected     bool    `json:"ejected"`
	// EjectedSince is when an ejected endpoint was ejected; EjectedUntil
	// when it may be readmitted, after successful probes.
	EjectedSince *time.Time `json:"ejectedSince,omitempty"`
	EjectedUntil *time.Time `json:"ejectedUntil,omitempty"`
	Probing      bool       `json:"probing,omitempty"`
	// Ramp is the slow-start factor of an endpoint in its ramp, which ends
	// at RampEnds at the latest.
	Ramp      *float64   `json:"ramp,omitempty"`
	RampEnds  *time.Time `json:"rampEnds,omitempty"`
	Picks     uint64     `json:"picks"`
	Share     float64    `json:"share"`
	FairShare float64    `json:"fairShare"`
	// LatencyMs is the latency average the policy keeps, if it keeps one.
	LatencyMs *float64 `json:"latencyMs,omitempty"`
	// Load is the server's last load answer, under pickwise_prequal.
	Load *LoadInfo `json:"load,omitempty"`
}

// LoadInfo is a server's last answer about its load.
type LoadInfo struct {
	RIF        uint32  `json:"rif"`
	LatencyMs  float64 `json:"latencyMs"`
	AgeSeconds float64 `json:"ageSeconds"`
	Local      bool    `json:"local,omitempty"` // estimated by this client: the server serves no probes
	Pooled     bool    `json:"pooled"`
}

// live are the balancers grpc built, for the introspection page.
var live struct {
	mu sync.Mutex
	m  map[*engineBalancer]struct{}
}

func registerLive(b *engineBalancer) {
	live.mu.Lock()
	defer live.mu.Unlock()
	if live.m == nil {
		live.m = map[*engineBalancer]struct{}{}
	}
	live.m[b] = struct{}{}
}

func unregisterLive(b *engineBalancer) {
	live.mu.Lock()
	defer live.mu.Unlock()
	delete(live.m, b)
}

// Inspect returns every live balancer grpc built, as of wall, sorted by
// target and policy.
func Inspect(wall time.Time) []BalancerInfo {
	live.mu.Lock()
	bs := make([]*engineBalancer, 0, len(live.m))
	for b := range live.m {
		bs = append(bs, b)
	}
	live.mu.Unlock()
	out := make([]BalancerInfo, 0, len(bs))
	for _, b := range bs {
		if info, ok := b.inspect(wall); ok {
			out = append(out, info)
		}
	}
	slices.SortFunc(out, func(a, b BalancerInfo) int {
		if a.Target != b.Target {
			return compareStrings(a.Target, b.Target)
		}
		return compareStrings(a.Policy, b.Policy)
	})
	return out
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// inspector keeps the pick counts of earlier readings, so that a reading
// can give each endpoint's picks over the last few seconds rather than
// since the balancer was built. Guarded by the balancer's mu.
type inspector struct {
	built   int64 // Clock.Nanotime the balancer was built
	samples []pickSample
}

// pickSample is every endpoint's pick count at one reading.
type pickSample struct {
	at    int64
	picks map[*Endpoint]uint32
}

// Share windows: a reading compares its counts with the newest sample at
// least shareWindowMin old, so that a page refreshed every second shows
// the last second or two; samples older than sampleKeep go.
const (
	shareWindowMin = int64(time.Second)
	sampleKeep     = int64(30 * time.Second)
	maxSamples     = 16
)

// base is the sample a reading at now compares with: nil for none (since
// the balancer was built).
func (in *inspector) base(now int64) *pickSample {
	var best *pickSample
	for i := range in.samples {
		s := &in.samples[i]
		if now-s.at >= shareWindowMin && (best == nil || s.at > best.at) {
			best = s
		}
	}
	if best == nil && len(in.samples) > 0 {
		best = &in.samples[0] // the oldest: all readings so far are recent
	}
	return best
}

// keep adds a reading's counts at now, and lets the old ones go.
func (in *inspector) keep(now int64, picks map[*Endpoint]uint32) {
	kept := in.samples[:0]
	for _, s := range in.samples {
		if now-s.at <= sampleKeep {
			kept = append(kept, s)
		}
	}
	in.samples = kept
	if n := len(in.samples); n > 0 && now-in.samples[n-1].at < shareWindowMin/4 {
		return // a burst of readings keeps its first
	}
	if len(in.samples) == maxSamples {
		in.samples = slices.Delete(in.samples, 0, 1)
	}
	in.samples = append(in.samples, pickSample{at: now, picks: picks})
}

// totalPicks is e's picks for every reason, modulo 2^32.
func totalPicks(e *Endpoint) uint32 {
	var n uint32
	for i := range e.picks {
		n += e.picks[i].Load()
	}
	return n
}

// inspect is b as of wall; false once b is closed.
func (b *engineBalancer) inspect(wall time.Time) (BalancerInfo, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return BalancerInfo{}, false
	}
	now := b.clock.Nanotime()
	at := func(t int64) time.Time { return wall.Add(time.Duration(t - now)) }
	m := &b.members
	info := BalancerInfo{
		Target:            m.target,
		Policy:            b.name,
		State:             b.mode.aggregate(b.counts, len(b.order)).String(),
		Config:            m.configJS,
		ConfigFingerprint: FormatFingerprint(m.config),
		Membership: MembershipInfo{Revision: m.revision, Fingerprint: FormatFingerprint(m.endpoints),
			Endpoints: m.count, Changed: at(m.changed)},
	}
	info.Endpoints, info.ShareFrom = b.rowsLocked(now, at)
	for i := range info.Retries {
		info.Retries[i] = b.shared.retries[i].Load()
	}
	switch p := b.pub.picker.(type) {
	case *LeastLoaded:
		info.Candidates = p.choices
	case *Prequal:
		info.Candidates = int(p.set.pool.size)
	case *WeightedRR:
		info.Candidates = 1
		if p.opts&optShorter != 0 {
			info.Candidates = 2
		}
	}

	base := b.inspector.base(now)
	from := b.inspector.built
	if base != nil {
		from = base.at
	}
	info.ShareWindowSeconds = float64(now-from) / 1e9
	counts := make(map[*Endpoint]uint32, len(b.order))
	for k, e := range b.order {
		n := totalPicks(e)
		counts[e] = n
		if base != nil {
			n -= base.picks[e] // a newcomer since is missing: 0
		}
		info.Endpoints[k].Picks = uint64(n)
		info.Picks += uint64(n)
		if info.Endpoints[k].Ejected {
			info.Ejected++
		}
	}
	b.inspector.keep(now, counts)
	if info.ShareFrom == "picks" && info.Picks > 0 {
		for k := range info.Endpoints {
			info.Endpoints[k].Share = float64(info.Endpoints[k].Picks) / float64(info.Picks)
		}
	}
	return info, true
}

// rowsLocked is every endpoint's row in resolver order but for its picks,
// and where shares come from: "picks", which the caller counts, or
// "schedule", a weighted round robin's, which the rows carry. at turns a
// Clock reading into a wall time.
func (b *engineBalancer) rowsLocked(now int64, at func(int64) time.Time) ([]EndpointInfo, string) {
	rows := make([]EndpointInfo, len(b.order))
	from := "picks"
	// What the current picker holds: each endpoint's index in its
	// snapshot, its costs, and a weighted round robin's planned shares.
	var snap *Snapshot
	if s, ok := b.pub.picker.(interface{ Snapshot() *Snapshot }); ok {
		snap = s.Snapshot()
	}
	index := map[*Endpoint]int{}
	var costs []float64
	var planned []float64
	if snap != nil {
		for i := range snap.Endpoints {
			index[snap.Endpoints[i].Stats] = i
		}
		switch cr := b.pub.picker.(type) {
		case *LeastLoaded, *Prequal:
			// Their costs come in the order of their snapshot's
			// endpoints; a policy's own picker's need not.
			costs = make([]float64, 0, len(snap.Endpoints))
			cr.(CostReporter).ReportCosts(now, func(c float64) { costs = append(costs, c) })
		}
		if w, ok := b.pub.picker.(*WeightedRR); ok {
			from = "schedule"
			planned = make([]float64, len(snap.Endpoints))
			for i := range planned {
				planned[i] = w.sched.Share(i)
			}
		}
	}
	var pickerWeight float64 // the configured weights of the endpoints in the picker
	pen := b.shared.penalty.Load()
	fleet := b.shared.fleetRate()
	probing := b.loadProbes.settings.Load() != nil
	for k, e := range b.order {
		row := &rows[k]
		row.Address = e.addr
		row.State = e.state.String()
		row.Weight = e.weight
		row.InFlight = e.inFlight()
		row.Ejected = e.ejection.ejected
		if row.Ejected {
			since, until := at(e.ejection.since), at(e.ejection.until)
			row.EjectedSince, row.EjectedUntil = &since, &until
			row.Probing = e.probe.inFlight.Load()
		}
		o := e.outcomes()
		if pen != nil {
			o = o.Counted(pen.full) // a healthy endpoint's saturated counts are a full window
		}
		if !math.IsInf(float64(o.Total), 0) {
			row.Outcomes = float64(o.Total)
		}
		if o.Total > 0 {
			row.FailureRate = float64(o.Failures / o.Total)
		}
		if pen != nil && o.Failures > 0 {
			row.Avoidance = pen.avoidance(o, fleet)
		}
		if e.weights.tracker != nil {
			w := e.weights.weight
			row.ReportedWeight, row.WeightStatus = &w, e.weights.status.String()
		}
		if v := math.Float64frombits(e.rtt.bits.Load()); v > 0 {
			ms := v / 1e6
			row.LatencyMs = &ms
		}
		if w := e.answer.Load(); w != 0 && probing {
			row.Load = b.loadInfo(e, w, now)
		}
		i, ok := index[e]
		row.InPicker = ok && e.state == connectivity.Ready && !row.Ejected
		if !ok {
			continue
		}
		pickerWeight += row.Weight
		row.EffectiveWeight = row.Weight * snap.RampFactor(i, now) * (1 - row.Avoidance)
		if snap.ramps != nil && snap.ramps[i].end > now {
			f := snap.RampFactor(i, now)
			end := at(snap.ramps[i].end)
			row.Ramp, row.RampEnds = &f, &end
		}
		if i < len(costs) && !math.IsInf(costs[i], 0) && !math.IsNaN(costs[i]) {
			c := costs[i]
			row.Cost = &c
		}
		if planned != nil {
			row.Share = planned[i]
		}
	}
	for k := range rows {
		row := &rows[k]
		if !row.InPicker {
			continue
		}
		row.FairShare = row.Weight / pickerWeight
		if planned != nil {
			// The weight that would give the schedule's share.
			row.EffectiveWeight = row.Share * pickerWeight
		}
	}
	return rows, from
}

// loadInfo is e's last load answer w, for pickwise_prequal.
func (b *engineBalancer) loadInfo(e *Endpoint, w uint64, now int64) *LoadInfo {
	rif, _, lat, local := answerOf(w)
	li := &LoadInfo{RIF: rif, LatencyMs: float64(lat) * 1e3, Local: local,
		AgeSeconds: float64(max(answerAge(e.spent.Load(), now), 0)) / 1e9}
	if s := b.loadProbes.settings.Load(); s != nil {
		li.Pooled = s.pool.holds(e)
	}
	return li
}
