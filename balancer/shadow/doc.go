// Package shadow registers pickwise_shadow, a parent policy for rolling a
// load-balancing change out safely: the candidate policy runs beside the
// live one over the same endpoints and the same connections, is asked on a
// sample of picks where it would send the call, and its answers are
// recorded, never sent. Once its predictions look right, canaryPercent
// lets it place that share of calls for real, with each arm's outcomes
// recorded apart; rolling back is a config push with canaryPercent 0.
//
// Select it with a blank import and a service config:
//
//	import _ "github.com/pickwise/pickwise/balancer/shadow"
//
//	{"loadBalancingConfig": [{"pickwise_shadow": {
//	    "live": [{"round_robin": {}}],
//	    "candidate": [{"pickwise_p2c": {}}],
//	    "sampleRate": 0.1, "canaryPercent": 0}}]}
//
// Both children are built through grpc's balancer registry, so any
// registered policy can be either, and the program must register them (a
// blank import of each pickwise policy it names). Each child list is a
// loadBalancingConfig list: the first registered entry is taken and its
// config is checked by its own parser.
//
// # Connections
//
// The children share one SubConn per address: the shadow opens no
// connection the live policy would not. The candidate's requests to
// connect are held until live connects the address (a lazy live policy,
// such as ring hash, leaves the candidate seeing only the endpoints live
// uses), except during a canary, when the candidate connects what it
// needs. Health reports and ORCA streams are shared too. One case is not
// covered: when live closes a connection the candidate still holds (a
// live pick_first moving to another address, say), the candidate keeps it
// open until it drops the address itself; the endpoint list is the same
// for both, so this lasts only while the two policies disagree on which
// addresses to use.
//
// # What is recorded
//
// On a sampled pick the candidate is asked after live, and the pair is
// counted: agreement (the same endpoint), and each endpoint's picks under
// live and under the candidate, whose ratios to the compared picks are the
// shares each policy gives it. For two policies that route by key (ring
// hash and Maglev, say), 1 - agreement is the share of keyed traffic that a
// switch would move. For others, read the shares: two policies that each
// rotate through the endpoints agree as often as their rotations line up,
// whatever their quality.
//
// A load-aware candidate is kept informed two ways. Its prediction stays
// in its in-flight count for as long as a call on the endpoint it chose
// lasts under live (that endpoint's recent latency), as if it had placed
// the call; its Done is then called with a "not sent" status, which
// policies ignore as evidence. And a pickwise candidate is fed the outcome
// of every recorded live call on each endpoint (its latency, its failure),
// as evidence about the endpoint. What it cannot see is its own effect:
// endpoints' latencies are those live's placement gives them, so it
// predicts its choices under live's load, and at a low sample rate its
// in-flight counts are thin, as one balancer's are among many. In the
// simulator's rollout scenario (round_robin live, pickwise_p2c the
// candidate, two hardware generations at 60% load), one run's predicted
// shares were within 0.05 points of p2c's live shares at sampleRate 1 and
// 1.9 points at 0.1; over real gRPC, within about a point at sampleRate 1.
// The canary is what measures it for real. While a canary runs, a pickwise
// candidate that compares loads (p2c, Peak EWMA) also counts every live
// call in flight on an endpoint as one of its own, so that it places the
// canary's calls knowing the load live puts beside them; its sampled
// predictions are then let go at once rather than held, as that load is now
// counted for real, and say where it sends calls under live's load, not its
// shares on its own.
//
// A pickwise live policy that compares loads counts the canary's calls in
// flight the same way; any other live policy does not see them. Either way
// the arms' latencies are not the policies' own. Where live keeps queues
// short by a schedule, as round_robin does from one client that is its
// backends' whole load, a canary's tenth of the calls has no such
// schedule, and live sends its next calls where the canary's just went:
// over real gRPC the canary arm was slower than live's though p2c live
// was faster than round_robin (README). Judge a canary by its arm's
// errors; read shares from a shadow stage.
//
// Read the counts in Go with Summaries (Summary.Since gives one step's
// alone), or as the pickwise.shadow.* metrics: predictions (by agree,
// disagree, none), endpoint_picks (by policy and endpoint), calls (by arm
// and status code) and call_duration (by arm). The live arm's outcomes
// are recorded on the sampled picks, and on at least a share of picks
// equal to the canary's, so that the two arms' figures compare like with
// like. Durations are those of the timed
// calls: all of them, unless recorded calls come less than about 10 µs
// apart, where reading the clock twice a call would cost more than the
// rest of the recording; then a random one in up to 64.
//
// Changing only sampleRate or canaryPercent keeps both children and their
// state; changing a child's policy or config replaces that child and
// starts the counts over. The candidate's own metrics, if it is a pickwise
// policy, are recorded under its name as usual and count its sampled
// picks.
package shadow
