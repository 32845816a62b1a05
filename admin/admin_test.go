package admin_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pickwise/pickwise/admin"
	"github.com/pickwise/pickwise/attempts"
	_ "github.com/pickwise/pickwise/balancer/orcawrr"
	_ "github.com/pickwise/pickwise/balancer/p2c"
	_ "github.com/pickwise/pickwise/balancer/peakewma"
	_ "github.com/pickwise/pickwise/balancer/prequal"
	"github.com/pickwise/pickwise/internal/fleet"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/experimental/balancer/weight"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/status"
)

const p2cConfig = `{"loadBalancingConfig":[{"pickwise_p2c":{}}]}`

// page is the part of the JSON the tests read.
type page struct {
	Balancers []struct {
		Target            string    `json:"target"`
		Policy            string    `json:"policy"`
		ShareFrom         string    `json:"shareFrom"`
		ConfigFingerprint string    `json:"configFingerprint"`
		Retries           [3]uint64 `json:"retries"`
		Membership        struct {
			Revision    uint64 `json:"revision"`
			Fingerprint string `json:"fingerprint"`
			Endpoints   int    `json:"endpoints"`
		} `json:"membership"`
		Endpoints []endpointRow `json:"endpoints"`
	} `json:"balancers"`
}

type endpointRow struct {
	Address      string     `json:"address"`
	State        string     `json:"state"`
	InPicker     bool       `json:"inPicker"`
	FailureRate  float64    `json:"failureRate"`
	Ejected      bool       `json:"ejected"`
	EjectedUntil *time.Time `json:"ejectedUntil"`
	Picks        uint64     `json:"picks"`
	Share        float64    `json:"share"`
	FairShare    float64    `json:"fairShare"`
	InFlight     int64      `json:"inFlight"`
}

func get(t testing.TB, url string) page {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, res.Status)
	}
	var p page
	if err := json.NewDecoder(res.Body).Decode(&p); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return p
}

// target is the channel target of c, as the page lists it.
func target(c *fleet.Client) string { return c.Conn.Target() }

// TestBlackHoleVisible shows a black hole on the page as seed 000 names
// its signature: the row is ejected, its failure rate high and its share
// of the calls near zero, while calls flow.
func TestBlackHoleVisible(t *testing.T) {
	ctx := fleet.Context(t, 30*time.Second)
	f := fleet.StartT(t, 5)
	c := fleet.DialT(t, f.Addrs(), p2cConfig)
	srv := httptest.NewServer(admin.Handler())
	defer srv.Close()
	url := srv.URL + "?format=json&target=" + target(c)

	for range 50 {
		if _, err := c.Call(ctx); err != nil {
			t.Fatal(err)
		}
	}
	hole := f.Backends[0]
	hole.SetBehavior(fleet.Behavior{ErrorRate: 1, ErrorCode: codes.Unavailable})
	load, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for load.Err() == nil {
				c.Call(load)
			}
		}()
	}
	start := time.Now()
	var row endpointRow
	fleet.WaitFor(t, ctx, "the black hole's row shows it ejected with a share near 0", func() bool {
		time.Sleep(50 * time.Millisecond)
		p := get(t, url)
		if len(p.Balancers) != 1 {
			t.Fatalf("the page lists %d balancers for %s, want 1", len(p.Balancers), target(c))
		}
		for _, r := range p.Balancers[0].Endpoints {
			if r.Address == hole.Addr() {
				row = r
			}
		}
		return row.Ejected && row.FailureRate > 0.5 && row.Share < 0.02
	})
	t.Logf("visible after %v: %+v", time.Since(start).Round(10*time.Millisecond), row)
	stop()
	wg.Wait()
	if row.EjectedUntil == nil || row.FairShare != 0 || row.InPicker {
		t.Errorf("ejected row %+v: want an ejection end, no fair share and out of the picker", row)
	}
}

// TestClosedBalancerLeaves checks that a channel's balancer leaves the
// page when the channel closes.
func TestClosedBalancerLeaves(t *testing.T) {
	ctx := fleet.Context(t, 30*time.Second)
	f := fleet.StartT(t, 2)
	c := fleet.DialT(t, f.Addrs(), p2cConfig)
	srv := httptest.NewServer(admin.Handler())
	defer srv.Close()
	if _, err := c.Call(ctx); err != nil {
		t.Fatal(err)
	}
	url := srv.URL + "?format=json&target=" + target(c)
	if p := get(t, url); len(p.Balancers) != 1 || len(p.Balancers[0].Endpoints) != 2 || p.Balancers[0].Policy != "pickwise_p2c" {
		t.Fatalf("open channel: page %+v, want its pickwise_p2c balancer over 2 endpoints", p)
	}
	c.Close()
	fleet.WaitFor(t, ctx, "the closed channel's balancer leaves the page", func() bool {
		time.Sleep(10 * time.Millisecond)
		return len(get(t, url).Balancers) == 0
	})
}

// weighted is a resolver state of addrs, in the order given, with the
// weights given (1 where none is).
func weighted(addrs []string, weights map[string]uint32) resolver.State {
	var s resolver.State
	for _, a := range addrs {
		ep := resolver.Endpoint{Addresses: []resolver.Address{{Addr: a}}}
		if w, ok := weights[a]; ok {
			ep = weight.Set(ep, weight.EndpointInfo{Weight: w})
		}
		s.Endpoints = append(s.Endpoints, ep)
	}
	return s
}

// TestDivergentViews runs three clients of one fleet: their fingerprints
// agree whatever the order their resolvers list the endpoints in; when one
// client's resolver lags behind a change, its fingerprint differs from the
// others'; when it catches up, they agree again.
func TestDivergentViews(t *testing.T) {
	ctx := fleet.Context(t, 30*time.Second)
	f := fleet.StartT(t, 4)
	addrs := f.Addrs()
	srv := httptest.NewServer(admin.Handler())
	defer srv.Close()
	clients := make([]*fleet.Client, 3)
	for i := range clients {
		clients[i] = fleet.DialT(t, addrs, p2cConfig)
	}
	fingerprints := func() []string {
		var fps []string
		for _, c := range clients {
			p := get(t, srv.URL+"?format=json&target="+target(c))
			if len(p.Balancers) != 1 {
				t.Fatalf("%s: %d balancers on the page, want 1", target(c), len(p.Balancers))
			}
			b := p.Balancers[0]
			fps = append(fps, b.Membership.Fingerprint+"/"+b.ConfigFingerprint)
		}
		return fps
	}
	agree := func(fps []string) bool { return fps[0] == fps[1] && fps[1] == fps[2] }

	// The same endpoints, each client's in another order.
	for i, c := range clients {
		order := slices.Clone(addrs)
		for range i {
			order = append(order[1:], order[0])
		}
		c.Resolver.UpdateState(weighted(order, nil))
	}
	before := fingerprints()
	if !agree(before) {
		t.Fatalf("same endpoints in different orders: fingerprints %v, want one", before)
	}

	// A change of one weight reaches two clients; the third lags.
	changed := weighted(addrs, map[string]uint32{addrs[1]: 3})
	clients[0].Resolver.UpdateState(changed)
	clients[1].Resolver.UpdateState(changed)
	during := fingerprints()
	if during[0] != during[1] || during[2] != before[2] || during[0] == during[2] {
		t.Fatalf("one client lagging a weight change: fingerprints %v, want the first two equal and the third as before (%v)", during, before[2])
	}
	clients[2].Resolver.UpdateState(changed)
	if after := fingerprints(); !agree(after) || after[0] != during[0] {
		t.Fatalf("after the lagging client caught up: fingerprints %v, want all %s", after, during[0])
	}

	// A removed endpoint changes it too.
	clients[0].SetAddrs(addrs[:3])
	if fps := fingerprints(); fps[0] == fps[1] {
		t.Errorf("after one client dropped an endpoint: fingerprints %v, want the first to differ", fps)
	}

	// So does another config: the same JSON gives the same fingerprint,
	// another value another one.
	config := func(sc string) (string, string) {
		c := fleet.DialT(t, addrs, sc)
		if _, err := c.Call(ctx); err != nil {
			t.Fatal(err)
		}
		p := get(t, srv.URL+"?format=json&target="+target(c))
		return p.Balancers[0].ConfigFingerprint, p.Balancers[0].Membership.Fingerprint
	}
	same, members := config(`{"loadBalancingConfig":[{"pickwise_p2c":{"choiceCount":2}}]}`)
	other, _ := config(`{"loadBalancingConfig":[{"pickwise_p2c":{"choiceCount":3}}]}`)
	if want := strings.Split(before[0], "/")[1]; same != want || other == same || members != strings.Split(before[0], "/")[0] {
		t.Errorf("config fingerprints: default %s, choiceCount 2 %s (membership %s), choiceCount 3 %s: want the first two equal, the third apart", want, same, members, other)
	}
}

// TestHTML checks the page a browser gets: one row per endpoint, the
// ejected one marked, and a fragment without the page around it.
func TestHTML(t *testing.T) {
	ctx := fleet.Context(t, 30*time.Second)
	f := fleet.StartT(t, 3)
	c := fleet.DialT(t, f.Addrs(), p2cConfig)
	srv := httptest.NewServer(admin.Handler())
	defer srv.Close()
	if _, err := c.Call(ctx); err != nil {
		t.Fatal(err)
	}
	body := func(query string) string {
		res, err := http.Get(srv.URL + "?target=" + target(c) + query)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		if ct := res.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/html") {
			t.Fatalf("Content-Type %q, want text/html", ct)
		}
		var b strings.Builder
		if _, err := fmt.Fprint(&b, readAll(t, res)); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	full := body("")
	for _, want := range append([]string{"<!doctype html>", "pickwise_p2c", "setTimeout(tick"}, f.Addrs()...) {
		if !strings.Contains(full, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if n := strings.Count(full, "<td class=addr>"); n != 3 {
		t.Errorf("page has %d endpoint rows, want 3", n)
	}
	frag := body("&fragment=1")
	if strings.Contains(frag, "<!doctype") || !strings.Contains(frag, "<table>") {
		t.Errorf("fragment: want the tables without the page around them, got %.200q", frag)
	}
	res, err := http.Post(srv.URL, "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST: %s, want 405", res.Status)
	}
}

func readAll(t testing.TB, res *http.Response) string {
	t.Helper()
	var b strings.Builder
	buf := make([]byte, 32<<10)
	for {
		n, err := res.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			break
		}
	}
	return b.String()
}

// TestRetriesOnThePage: with the attempts interceptor and grpc's retry
// policy, the page counts the picks of retried attempts by their number.
func TestRetriesOnThePage(t *testing.T) {
	ctx := fleet.Context(t, 30*time.Second)
	f := fleet.StartT(t, 3)
	for _, b := range f.Backends {
		b.SetBehavior(fleet.Behavior{ErrorRate: 1, ErrorCode: codes.Unavailable})
	}
	sc := `{"loadBalancingConfig":[{"pickwise_p2c":{"ejection":{"enabled":false}}}],` +
		`"methodConfig":[{"name":[{"service":"` + fleet.ServiceName + `"}],` +
		`"retryPolicy":{"maxAttempts":3,"initialBackoff":"0.001s","maxBackoff":"0.002s","backoffMultiplier":2,"retryableStatusCodes":["UNAVAILABLE"]}}]}`
	c := fleet.DialT(t, f.Addrs(), sc, grpc.WithChainUnaryInterceptor(attempts.UnaryClientInterceptor()))
	srv := httptest.NewServer(admin.Handler())
	defer srv.Close()
	const calls = 20
	for range calls {
		if _, err := c.Call(ctx); status.Code(err) != codes.Unavailable {
			t.Fatalf("call: %v, want Unavailable after its attempts", err)
		}
	}
	p := get(t, srv.URL+"?format=json&target="+target(c))
	if got := p.Balancers[0].Retries; got != [3]uint64{calls, calls, 0} {
		t.Errorf("retries %v, want %d second and %d third attempts", got, calls, calls)
	}
}
