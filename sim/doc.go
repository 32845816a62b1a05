// Package sim is a deterministic discrete-event simulator that drives real
// load-balancing pickers, pickwise's and grpc-go's built-ins, in virtual
// time.
//
// Balancers are built through grpc's balancer registry over a fake
// ClientConn, exactly as a channel builds them; pickwise's policies get the
// simulator's virtual clock and a seeded random source, so a run is
// reproducible. Backends are queueing models (servers, a service-time
// distribution, slowdown windows, fast failure, cold start). Requests arrive
// open-loop; each pick's Done runs when the modelled backend finishes, so
// the policy sees in-flight counts and outcomes as it would in production.
// Backends also report their load through ORCA, as a grpc-go server with
// per-call metrics does: each answer's Done carries the backend's last
// published report (DoneInfo.ServerLoad: completions and errors per second
// and the busy share of its workers over a 1 s window, optionally noisy;
// see report.go), which pickwise_orca_wrr turns into weights. A run can
// warm up before it is measured (Run.Warmup), so that a policy that
// learns before it acts is compared in its steady state.
//
// Scenarios (see Scenarios) reproduce the failure modes load balancers are
// known for: balls into bins, the black hole, a transient failure and a
// lone late answer, cold-start herding, a cold and a warm backend joining
// (slow start's two sides), two hardware generations, one slow backend,
// noisy load reports, noisy neighbours (backends slowed at random times),
// a hot key, a remap storm and subsetting. Each prints one table with
// policies as columns. Beside the policies, some tables carry baselines:
// textbook algorithms, and an oracle that reads the backends' true state,
// the reference for what placement can do.
//
// Where a policy cannot run in virtual time or with a fixed seed (grpc-go's
// built-ins draw from the global random source; weighted_round_robin's
// blackout and weight updates follow the wall clock), its column says so.
package sim
