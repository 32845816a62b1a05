// Command lab runs pickwise's scenarios against every policy, side by side.
//
// By default it starts its own fleet of pickwise-backend servers on
// 127.0.0.1 and runs small, real-gRPC versions of the scenarios (a black
// hole, one slow backend, two hardware generations, a hot key, a remap
// storm) through grpc-go's round_robin, least_request_experimental and, where
// backends report their load over ORCA, weighted_round_robin, and through
// pickwise's policies, then prints one table per scenario. The whole run
// takes a little over a minute.
//
//	go run ./interop/lab                       # the real-gRPC lab
//	go run ./interop/lab -report report.html   # plus an HTML page with plots
//	go run ./interop/lab -scenario black-hole  # one scenario
//	go run ./interop/lab -sim                  # the simulated scenarios, full scale
//	go run ./interop/lab -target h1:8080,h2:8080,...  # your own pickwise-backend fleet
//
// With -target, the addresses must be pickwise-backend servers (see
// interop/server/cmd/pickwise-backend): the lab changes their behavior over
// their admin RPC, so point it only at a fleet set aside for the test.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"time"

	"github.com/pickwise/pickwise/sim"
)

const defaultAdminTimeout = 10 * time.Second

func main() {
	var (
		scenario = flag.String("scenario", "", "run only this scenario (default: all)")
		report   = flag.String("report", "", "also write a self-contained HTML report to this file")
		simulate = flag.Bool("sim", false, "run the simulated scenarios at full scale instead of the real-gRPC lab")
		target   = flag.String("target", "", "comma-separated pickwise-backend addresses to use instead of a loopback fleet")
		scale    = flag.Float64("scale", 1, "multiply the number of calls per scenario (the real-gRPC lab only)")
	)
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	var sections []section
	var err error
	if *simulate {
		sections, err = runSim(*scenario)
	} else {
		sections, err = runLab(ctx, *scenario, *target, *scale)
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
		s, err := sim.Lookup(only)
		if err != nil {
			return nil, err
		}
		list = []sim.Scenario{s}
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
}

// calls scales a scenario's call count.
func (l *lab) calls(n int) int { return max(1, int(float64(n)*l.scale)) }

func runLab(ctx context.Context, only, target string, scale float64) ([]section, error) {
	list := labScenarios
	if only != "" {
		i := slices.IndexFunc(list, func(s labScenario) bool { return s.name == only })
		if i < 0 {
			if slices.Contains(simOnly, only) {
				return nil, fmt.Errorf("scenario %q needs scale or long-lived streams a loopback lab cannot give: run it with -sim", only)
			}
			return nil, fmt.Errorf("no scenario %q", only)
		}
		list = list[i : i+1]
	}
	need := 0
	for _, s := range list {
		need = max(need, s.backends)
	}
	var (
		fleet *labFleet
		err   error
	)
	if target != "" {
		fleet, err = targetFleet(target)
	} else {
		fleet, err = startFleet(need)
	}
	if err != nil {
		return nil, err
	}
	defer fleet.close()
	l := &lab{fleet: fleet, progress: newProgress(os.Stderr), scale: scale}
	var out []section
	for _, s := range list {
		if len(fleet.names) < s.backends {
			fmt.Fprintf(os.Stderr, "skipping %s: it needs %d backends, the fleet has %d\n", s.name, s.backends, len(fleet.names))
			continue
		}
		sec, err := s.run(ctx, l)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", s.name, err)
		}
		fmt.Println(sec.Table)
		out = append(out, sec)
	}
	if only == "" {
		fmt.Printf("Simulated only (go run ./interop/lab -sim): %s.\n", strings.Join(simOnly, ", "))
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
