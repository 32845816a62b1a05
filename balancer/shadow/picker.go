package shadow

import (
	"google.golang.org/grpc/balancer"
)

// picker places calls through live, except the canary's share, which the
// candidate places; on a sample of live's calls it also asks the candidate
// where it would have sent the call, and records both answers.
type picker struct {
	live      balancer.Picker
	candidate balancer.Picker // nil until the candidate reports
	rates     rates
	rec       *recorder
	// canaryRuns: a canary share is set and the candidate can take it,
	// so live's calls are counted in the candidate's load (load).
	canaryRuns bool
}

// Pick draws once: the low half decides the canary, the high half the
// sample, and the low bits of the two together whether a recorded call is
// timed (a fair coin whatever the rates: the low bits of a draw below a
// threshold are as good as uniform). A pick that is neither costs live's
// pick, the draw and the translation of live's SubConn, and allocates
// nothing. When every pick is compared and none is a canary's, there is
// nothing to draw for, and the P's shard gives the spare bits. While a
// canary runs, every live pick on an endpoint a load-comparing candidate
// holds is also counted in its in-flight calls (load): two atomic adds on
// that endpoint, and a pooled record if live's call has a Done. A
// canary's call, which has its record anyway, is counted in a
// load-comparing live's: one atomic add at its start, one at its end.
func (p *picker) Pick(info balancer.PickInfo) (balancer.PickResult, error) {
	if p.rates == (rates{}) {
		// Nothing sampled, no canary (a rollback, or a shadow paused):
		// live's pick and the translation, without a draw.
		return p.pickLive(info)
	}
	if p.rates == everySample && p.candidate != nil {
		// Every pick compared, none a canary: no draw to take, the
		// shard's bits choose which calls are timed.
		res, err := p.live.Pick(info)
		if err != nil {
			return res, err
		}
		rc, ok := realOf(res.SubConn)
		if !ok {
			return res, nil
		}
		res.SubConn = rc.sc
		return p.compare(info, res, rc, 0, false, false), nil
	}
	draw := p.rec.rnd.Uint64()
	canary, sample := uint32(draw), uint32(draw>>32)
	bits := canary ^ sample
	if p.candidate != nil && canary < p.rates.canary {
		res, err := p.candidate.Pick(info)
		if err == nil {
			if rc, ok := realOf(res.SubConn); ok {
				res.SubConn = rc.sc
				return p.rec.track(res, armCanary, rc, bits, false), nil
			}
		}
		if res.Done != nil {
			res.Done(balancer.DoneInfo{Err: errNotSent})
		}
		// The candidate cannot place it (not ready yet, or failing): live
		// does, so that a canary never costs a call.
		p.rec.fallbacks.Add(1)
	}
	res, err := p.live.Pick(info)
	if err != nil {
		return res, err
	}
	rc, ok := realOf(res.SubConn)
	if !ok {
		return res, nil // not a SubConn of the shadow's: grpc judges it
	}
	res.SubConn = rc.sc
	if sample >= p.rates.sample && sample >= p.rates.canary {
		if p.canaryRuns {
			return load(res, rc), nil
		}
		return res, nil
	}
	if sample >= p.rates.sample || p.candidate == nil {
		// Only the outcome is sampled, so that the live arm of a canary
		// has figures to compare with.
		return p.rec.track(res, armLive, rc, bits, p.canaryRuns), nil
	}
	return p.compare(info, res, rc, bits, true, p.canaryRuns), nil
}

// everySample are the rates at which every pick is compared and none is a
// canary's.
var everySample = rates{sample: ^uint32(0)}

// compare asks the candidate where it would have placed a call live placed
// on rc, and records both answers (recorder.compare). bits are the pick's
// spare draw bits if drawn is set; canary says a canary runs.
func (p *picker) compare(info balancer.PickInfo, res balancer.PickResult, rc *realConn, bits uint32, drawn, canary bool) balancer.PickResult {
	cres, cerr := p.candidate.Pick(info)
	if cerr != nil {
		p.rec.noPredictionFor()
		return p.rec.track(res, armLive, rc, p.spareBits(bits, drawn), canary)
	}
	crc, ok := realOf(cres.SubConn)
	if !ok {
		if cres.Done != nil {
			cres.Done(balancer.DoneInfo{Err: errNotSent})
		}
		p.rec.noPredictionFor()
		return p.rec.track(res, armLive, rc, p.spareBits(bits, drawn), canary)
	}
	return p.rec.compare(res, rc, crc, cres.Done, bits, drawn, canary)
}

// spareBits returns bits if they were drawn, and a draw's otherwise: a
// pick the candidate could not answer takes one after all.
func (p *picker) spareBits(bits uint32, drawn bool) uint32 {
	if drawn {
		return bits
	}
	return uint32(p.rec.rnd.Uint64())
}

// pickLive is live's pick through the shadow, nothing recorded.
func (p *picker) pickLive(info balancer.PickInfo) (balancer.PickResult, error) {
	res, err := p.live.Pick(info)
	if err != nil {
		return res, err
	}
	if rc, ok := realOf(res.SubConn); ok {
		res.SubConn = rc.sc
	}
	return res, nil
}
