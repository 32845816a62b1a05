package main

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/pickwise/pickwise/interop/server"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// labFleet is the set of backends the lab drives: servers it started on
// loopback, or a user's own pickwise-backend servers given with -target.
// Either way the lab talks to each over the admin RPC, so scenarios do not
// care which.
type labFleet struct {
	addrs   []string
	names   []string
	admin   []*grpc.ClientConn
	servers []*server.Server // nil for -target fleets
}

// startFleet starts n backends on 127.0.0.1.
func startFleet(n int) (*labFleet, error) {
	f := &labFleet{}
	for i := 0; i < n; i++ {
		s, err := server.New(fmt.Sprintf("backend-%d", i), server.Behavior{})
		if err != nil {
			f.close()
			return nil, err
		}
		addr, err := s.Start("127.0.0.1:0")
		if err != nil {
			f.close()
			return nil, err
		}
		f.servers = append(f.servers, s)
		f.addrs = append(f.addrs, addr)
	}
	return f, f.connectAdmin()
}

// parseTargets splits -target's comma-separated address list.
func parseTargets(list string) ([]string, error) {
	var addrs []string
	for _, a := range strings.Split(list, ",") {
		if a = strings.TrimSpace(a); a == "" {
			continue
		}
		// The lab tells backends apart by the calls each answers: one
		// server listed twice would count as two.
		if slices.Contains(addrs, a) {
			return nil, fmt.Errorf("-target: %s is listed twice", a)
		}
		addrs = append(addrs, a)
	}
	if len(addrs) == 0 {
		return nil, fmt.Errorf("-target: no addresses in %q", list)
	}
	return addrs, nil
}

// targetFleet uses the servers at addrs.
func targetFleet(addrs []string) (*labFleet, error) {
	f := &labFleet{addrs: addrs}
	return f, f.connectAdmin()
}

func (f *labFleet) connectAdmin() error {
	for _, a := range f.addrs {
		cc, err := grpc.NewClient("passthrough:///"+a, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			f.close()
			return err
		}
		f.admin = append(f.admin, cc)
	}
	ctx, cancel := context.WithTimeout(context.Background(), defaultAdminTimeout)
	defer cancel()
	for i, cc := range f.admin {
		st, err := server.FetchStats(ctx, cc)
		if err != nil {
			f.close()
			return fmt.Errorf("backend %s: admin RPC: %w (is it a pickwise-backend server?)", f.addrs[i], err)
		}
		// Calls are counted by the name a backend answers with.
		if j := slices.Index(f.names, st.Name); j >= 0 {
			f.close()
			return fmt.Errorf("backends %s and %s both answer as %q: give each its own -name, or list a server once", f.addrs[j], f.addrs[i], st.Name)
		}
		f.names = append(f.names, st.Name)
	}
	return nil
}

// configure gives backend i the behavior patch i (JSON, see
// server.Behavior.Patch) after resetting every backend to a plain one, and
// zeroes their counters.
func (f *labFleet) configure(ctx context.Context, patches map[int]string, base string) error {
	for i, cc := range f.admin {
		// Every field a scenario may set, ORCA reporting included, so that
		// no scenario inherits another's.
		full := `{"latency":"0s","latencySpread":0,"capacity":0,"errorRate":0,"errorLatency":"0s","coldStart":"0s","coldFactor":0,"slowdown":0,` +
			`"orca":{"perCall":false,"outOfBand":false,"utilization":"computed","fixedUtilization":0,"ratedQps":0}}`
		if _, err := server.SetBehavior(ctx, cc, full); err != nil {
			return fmt.Errorf("%s: %w", f.names[i], err)
		}
		if base != "" {
			if _, err := server.SetBehavior(ctx, cc, base); err != nil {
				return fmt.Errorf("%s: %w", f.names[i], err)
			}
		}
		if p, ok := patches[i]; ok {
			if _, err := server.SetBehavior(ctx, cc, p); err != nil {
				return fmt.Errorf("%s: %w", f.names[i], err)
			}
		}
		if _, err := server.Reset(ctx, cc, false); err != nil {
			return fmt.Errorf("%s: %w", f.names[i], err)
		}
	}
	return nil
}

func (f *labFleet) close() {
	for _, cc := range f.admin {
		cc.Close()
	}
	for _, s := range f.servers {
		s.Stop()
	}
}
