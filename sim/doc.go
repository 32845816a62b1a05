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
//
// Scenarios (see Scenarios) reproduce the failure modes load balancers are
// known for: balls into bins, the black hole, cold-start herding, two
// hardware generations, one slow backend, a hot key, a remap storm and
// subsetting. Each prints one table with policies as columns.
//
// Where a policy cannot run in virtual time or with a fixed seed (grpc-go's
// built-ins draw from the global random source; some use wall-clock
// timers), its column says so.
package sim
