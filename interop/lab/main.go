// Command lab runs pickwise's scenarios against every policy, side by side.
//
// By default it starts its own fleet of pickwise-backend servers on
// 127.0.0.1 and runs small, real-gRPC versions of the scenarios (a black
// hole, one transient failure, a flapping backend, a retry storm, one slow
// backend, two hardware generations, noisy neighbours, a hot key, a hash
// black hole, a remap storm, graceful drains) through grpc-go's
// round_robin, least_request_experimental, ring_hash_experimental and,
// where backends report their load over ORCA, weighted_round_robin, and
// through pickwise's policies, then prints one table per scenario. The
// whole run takes about seven minutes on a two-core machine, much of it in
// scenarios that run for a fixed time; -scale 0.5 about four. -sim runs
// the simulated scenarios instead (these and those that need more scale
// than a loopback fleet gives), at full scale, in about two and a half minutes.
//
//	go run ./interop/lab                       # the real-gRPC lab
//	go run ./interop/lab -report report.html   # plus an HTML page with tables and charts
//	go run ./interop/lab -scenario black-hole  # one scenario (-h lists them)
//	go run ./interop/lab -scale 0.5            # half the calls (and time) per scenario
//	go run ./interop/lab -sim                  # the simulated scenarios, full scale
//	go run ./interop/lab -target h1:8080,h2:8080,...  # your own pickwise-backend fleet
//	go run ./interop/lab -admin 127.0.0.1:8081  # and the balancers page while it runs
//
// With -target, the addresses must be pickwise-backend servers (see
// interop/server/cmd/pickwise-backend), each answering with its own name:
// the lab changes their behavior over their admin RPC, so point it only at
// a fleet set aside for the test. -h says how many servers each scenario
// needs; those that need more than -target gives are skipped, as is drain,
// which shuts servers down and restarts them, and the lab fails if none
// can run.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strings"
	"time"

	"github.com/pickwise/pickwise/admin"
	"github.com/pickwise/pickwise/sim"
)

const defaultAdminTimeout = 10 * time.Second

func main() {
	var (
		scenario = flag.String("scenario", "", "run only this scenario (default: all): "+scenarioHelp())
		report   = flag.String("report", "", "also write a self-contained HTML report to this file")
		simulate = flag.Bool("sim", false, "run the simulated scenarios at full scale instead of the real-gRPC lab")
		target   = flag.String("target", "", "comma-separated pickwise-backend addresses to use instead of a loopback fleet. "+targetHelp())
		scale    = flag.Float64("scale", 1, "multiply the number of calls per scenario (the real-gRPC lab only)")
		seed     = flag.Uint64("seed", 1, "seed of the open-loop scenarios' Poisson arrivals, the same for every policy of a scenario (the real-gRPC lab only)")
		adminAt  = flag.String("admin", "", "serve the balancers page (package admin) at http://ADDR/debug/pickwise while the lab runs, e.g. 127.0.0.1:8081 (the real-gRPC lab only)")
	)
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: go run ./interop/lab [flags]\n\n"+
			"Runs pickwise's scenarios against every policy, side by side, and prints one table per scenario.\n\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if err := checkFlags(flag.Args(), *simulate, *scale); err != nil {
		fmt.Fprintln(os.Stderr, "lab:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	if *adminAt != "" {
		stopAdmin, err := serveAdmin(*adminAt)
		if err != nil {
			fmt.Fprintln(os.Stderr, "lab:", err)
			os.Exit(1)
		}
		defer stopAdmin()
	}

	var sections []section
	var err error
	if *simulate {
		sections, err = runSim(*scenario)
	} else {
		sections, err = runLab(ctx, *scenario, *target, *scale, *seed)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "lab:", err)
		os.Exit(1)
	}
	if *report != "" {
		if err := writeReportFile(*report, *simulate, sections); err != nil {
			fmt.Fprintln(os.Stderr, "lab:", err)
			os.Exit(1)
		}
		fmt.Fprintf(os.Stderr, "report written to %s\n", *report)
	}
}

// serveAdmin serves the balancers page on addr, for a look at the
// policies' endpoints while a scenario runs, and returns what stops it.
func serveAdmin(addr string) (stop func(), err error) {
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("-admin %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/debug/pickwise", admin.Handler())
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(lis)
	fmt.Fprintf(os.Stderr, "balancers page: http://%s/debug/pickwise\n", lis.Addr())
	return func() { srv.Close() }, nil
}

// checkFlags rejects what the flags cannot mean: arguments besides flags,
// real-gRPC flags with -sim, a scale that sends no calls.
func checkFlags(args []string, simulate bool, scale float64) error {
	if len(args) > 0 {
		return fmt.Errorf("unexpected argument %q (to run one scenario: -scenario %s)", args[0], args[0])
	}
	var err error
	flag.Visit(func(f *flag.Flag) {
		if simulate && (f.Name == "target" || f.Name == "scale" || f.Name == "seed" || f.Name == "admin") {
			err = fmt.Errorf("-%s is for the real-gRPC lab; -sim runs the simulator at full scale", f.Name)
		}
	})
	if err != nil {
		return err
	}
	if !(scale > 0) || math.IsInf(scale, 0) {
		return fmt.Errorf("-scale %v: must be a positive number", scale)
	}
	return nil
}

// labNames are the real-gRPC scenarios' names, in the order they run.
func labNames() []string {
	out := make([]string, len(labScenarios))
	for i, s := range labScenarios {
		out[i] = s.name
	}
	return out
}

// simOnly are the simulated scenarios with no real-gRPC form: they need
// scale or long-lived streams a loopback lab cannot give; -sim runs them.
func simOnly() []string {
	var out []string
	for _, s := range sim.Scenarios() {
		if !slices.Contains(labNames(), s.Name) {
			out = append(out, s.Name)
		}
	}
	return out
}

// scenarioHelp lists the scenario names for -scenario's usage and errors.
func scenarioHelp() string {
	return fmt.Sprintf("the real-gRPC lab runs %s; -sim also runs %s", strings.Join(labNames(), ", "), strings.Join(simOnly(), ", "))
}

// backendsNeeded is how many backends the scenarios in list need between
// them: the most any one of them uses.
func backendsNeeded(list []labScenario) int {
	need := 0
	for _, s := range list {
		need = max(need, s.backends)
	}
	return need
}

// targetHelp says how many servers -target needs, for -target's usage.
func targetHelp() string {
	var each []string
	for _, s := range labScenarios {
		each = append(each, fmt.Sprintf("%s %d", s.name, s.backends))
	}
	return fmt.Sprintf("All scenarios need %d servers between them (%s)", backendsNeeded(labScenarios), strings.Join(each, ", "))
}

func writeReportFile(path string, simulated bool, sections []section) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	title := "pickwise lab: real gRPC on loopback"
	if simulated {
		title = "pickwise lab: simulated scenarios"
	}
	if err := writeReport(f, title, sections); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// runSim runs the simulator's scenarios at full scale.
func runSim(only string) ([]section, error) {
	var list []sim.Scenario
	if only != "" {
		i := slices.IndexFunc(sim.Scenarios(), func(s sim.Scenario) bool { return s.Name == only })
		if i < 0 {
			var names []string
			for _, s := range sim.Scenarios() {
				names = append(names, s.Name)
			}
			return nil, fmt.Errorf("no simulated scenario %q; -sim runs: %s", only, strings.Join(names, ", "))
		}
		list = []sim.Scenario{sim.Scenarios()[i]}
	} else {
		list = sim.Scenarios()
	}
	var out []section
	for _, s := range list {
		start := time.Now()
		fmt.Fprintf(os.Stderr, "simulating %s ...", s.Name)
		t, err := s.Run(sim.Full)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", s.Name, err)
		}
		fmt.Fprintf(os.Stderr, " %v\n", time.Since(start).Round(time.Millisecond))
		fmt.Println(t)
		out = append(out, section{Name: s.Name, Table: t})
	}
	return out, nil
}

// lab is one real-gRPC run.
type lab struct {
	fleet    *labFleet
	progress *progress
	scale    float64
	seed     uint64 // of open-loop arrivals (traffic.seed)
	// only, when set for a scenario, names the policies of it to run; the
	// others are left out. Tests use it to spend their time on the columns
	// they check.
	only map[string][]string
	// calm and calmRetries: noisy-neighbours runs a column again, up to
	// calmRetries times, while its timers' p99 lateness is above calm,
	// and keeps the calmest run. A real-time lab on a machine busy with
	// other work measures the machine; tests use it to wait that out.
	calm        time.Duration
	calmRetries int
	// drain is the drain scenario's load per channel (zero: its
	// default): tests under the race detector lower it, since the
	// scenario runs every policy's channel at once.
	drain drainLoad
}

// keep returns the policies of ps that only lets scenario run, in order.
func (l *lab) keep(scenario string, ps []labPolicy) []labPolicy {
	var out []labPolicy
	for _, p := range ps {
		if l.runs(scenario, p.name) {
			out = append(out, p)
		}
	}
	return out
}

// runs reports whether only lets scenario run the policy called name.
func (l *lab) runs(scenario, name string) bool {
	names, ok := l.only[scenario]
	return !ok || slices.Contains(names, name)
}

// calls scales a scenario's call count.
func (l *lab) calls(n int) int { return max(1, int(float64(n)*l.scale)) }

func runLab(ctx context.Context, only, target string, scale float64, seed uint64) ([]section, error) {
	list := labScenarios
	if only != "" {
		i := slices.IndexFunc(list, func(s labScenario) bool { return s.name == only })
		if i < 0 {
			if slices.Contains(simOnly(), only) {
				return nil, fmt.Errorf("scenario %q needs scale or long-lived streams a loopback lab cannot give: run it with -sim", only)
			}
			return nil, fmt.Errorf("no scenario %q: %s", only, scenarioHelp())
		}
		list = list[i : i+1]
	}
	need := backendsNeeded(list)
	var (
		fleet *labFleet
		err   error
	)
	if target != "" {
		addrs, err := parseTargets(target)
		if err != nil {
			return nil, err
		}
		if list, err = runnable(list, len(addrs), only); err != nil {
			return nil, err
		}
		if fleet, err = targetFleet(addrs); err != nil {
			return nil, err
		}
	} else if fleet, err = startFleet(need); err != nil {
		return nil, err
	}
	defer fleet.close()
	l := &lab{fleet: fleet, progress: newProgress(os.Stderr), scale: scale, seed: seed}
	var out []section
	for _, s := range list {
		sec, err := s.run(ctx, l)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", s.name, err)
		}
		fmt.Println(sec.Table)
		out = append(out, sec)
	}
	if only == "" {
		fmt.Printf("Simulated only (go run ./interop/lab -sim):\n  %s.\n", strings.Join(simOnly(), ", "))
	}
	return out, nil
}

// runnable says up front how many servers the scenarios of list need, and
// returns those that servers given servers can run, or an error if none.
func runnable(list []labScenario, servers int, only string) ([]labScenario, error) {
	need := backendsNeeded(list)
	if only != "" {
		if list[0].local {
			return nil, fmt.Errorf("%s shuts servers down and restarts them, which it can do only to the lab's own: run it without -target", only)
		}
		fmt.Fprintf(os.Stderr, "-target: %d servers given; %s needs %d\n", servers, only, need)
		if servers < need {
			return nil, fmt.Errorf("-target gives %d servers; %s needs %d", servers, only, need)
		}
		return list, nil
	}
	fmt.Fprintf(os.Stderr, "-target: %d servers given; all scenarios need %d between them\n", servers, need)
	var out []labScenario
	fewest := list[0]
	for _, s := range list {
		if s.backends < fewest.backends {
			fewest = s
		}
		if s.backends <= servers && !s.local {
			out = append(out, s)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("-target gives %d servers, too few for any scenario: the smallest, %s, needs %d; all of them need %d",
			servers, fewest.name, fewest.backends, need)
	}
	for _, s := range list {
		switch {
		case s.local:
			fmt.Fprintf(os.Stderr, "skipping %s: it shuts servers down and restarts them, which it can do only to the lab's own\n", s.name)
		case s.backends > servers:
			fmt.Fprintf(os.Stderr, "skipping %s: it needs %d servers, -target gives %d\n", s.name, s.backends, servers)
		}
	}
	return out, nil
}

// progress shows which scenario and policy is running and how far along it
// is: updated in place on a terminal, one line per run otherwise.
type progress struct {
	w   io.Writer
	tty bool
}

func newProgress(f *os.File) *progress {
	st, err := f.Stat()
	return &progress{w: f, tty: err == nil && st.Mode()&os.ModeCharDevice != 0}
}

type run struct {
	p                *progress
	label            string
	total            int
	start, lastPrint time.Time
}

func (p *progress) start(scenario, policy string, total int) *run {
	return &run{p: p, label: fmt.Sprintf("%-22s %-24s", scenario, policy), total: total, start: time.Now()}
}

// update is called from many goroutines; it prints at most every 200ms.
func (r *run) update(done int) {
	if !r.p.tty {
		return
	}
	if now := time.Now(); now.Sub(r.lastPrint) > 200*time.Millisecond || done == r.total {
		r.lastPrint = now
		fmt.Fprintf(r.p.w, "\r%s %5d/%d calls", r.label, done, r.total)
	}
}

func (r *run) finish() {
	if r.p.tty {
		fmt.Fprint(r.p.w, "\r")
	}
	fmt.Fprintf(r.p.w, "%s %5d calls in %v\n", r.label, r.total, time.Since(r.start).Round(10*time.Millisecond))
}
