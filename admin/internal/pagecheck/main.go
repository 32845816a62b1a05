// Command pagecheck loads the introspection page in a real headless
// browser while a channel's balancer lives through a black hole: it checks
// that the page, after refreshing itself, marks the black hole's row
// ejected, and saves screenshots at two window widths.
//
//	go run ./admin/internal/pagecheck -browser /usr/bin/chromium -out /tmp/pagecheck
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/pickwise/pickwise/admin"
	_ "github.com/pickwise/pickwise/balancer/p2c"
	"github.com/pickwise/pickwise/internal/fleet"
	"google.golang.org/grpc/codes"
)

func main() {
	browser := flag.String("browser", "/usr/bin/chromium", "a Chromium to run headless")
	out := flag.String("out", "pagecheck", "where the screenshots go")
	flag.Parse()
	if err := run(*browser, *out); err != nil {
		log.Fatal(err)
	}
}

func run(browser, out string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	f, err := fleet.Start(8)
	if err != nil {
		return err
	}
	defer f.Close()
	c, err := fleet.Dial(f.Addrs(), `{"loadBalancingConfig":[{"pickwise_p2c":{}}]}`)
	if err != nil {
		return err
	}
	defer c.Close()
	for range 100 {
		if _, err := c.Call(ctx); err != nil {
			return err
		}
	}
	for _, b := range f.Backends {
		b.SetBehavior(fleet.Behavior{Latency: 2 * time.Millisecond})
	}
	hole := f.Backends[2]
	hole.SetBehavior(fleet.Behavior{ErrorRate: 1, ErrorCode: codes.Unavailable})
	load, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer stop()
	for range 8 {
		wg.Go(func() {
			for load.Err() == nil {
				c.Call(load)
			}
		})
	}

	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/debug/pickwise", admin.Handler())
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(lis)
	defer srv.Close()
	url := "http://" + lis.Addr().String() + "/debug/pickwise"

	start := time.Now()
	for !ejected(url, hole.Addr()) {
		if ctx.Err() != nil {
			return errors.New("the black hole was never shown ejected")
		}
		time.Sleep(20 * time.Millisecond)
	}
	fmt.Printf("black hole %s shown ejected after %v\n", hole.Addr(), time.Since(start).Round(10*time.Millisecond))
	time.Sleep(1500 * time.Millisecond) // a share window after the ejection
	if js, err := get(url + "?format=json"); err == nil {
		fmt.Printf("the page's JSON:\n%s\n", js)
	}

	flags := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--hide-scrollbars"}
	profile, err := os.MkdirTemp("", "pagecheck-profile")
	if err != nil {
		return err
	}
	defer os.RemoveAll(profile)
	flags = append(flags, "--user-data-dir="+profile)

	// The DOM after the page refreshed itself a few times.
	dom, err := exec.CommandContext(ctx, browser, append(flags, "--virtual-time-budget=3500", "--dump-dom", url)...).Output()
	if err != nil {
		return fmt.Errorf("%s --dump-dom: %w", browser, err)
	}
	page := string(dom)
	for _, want := range []string{`data-refreshed="`, `<tr class="ej">`, hole.Addr(), "pickwise_p2c"} {
		if !strings.Contains(page, want) {
			return fmt.Errorf("the page in %s lacks %q", browser, want)
		}
	}
	fmt.Println("the page refreshed itself in the browser and marks the black hole's row ejected")

	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	for _, width := range []int{1000, 1400} {
		shot := filepath.Join(out, fmt.Sprintf("admin-%d.png", width))
		abs, _ := filepath.Abs(shot)
		cmd := exec.CommandContext(ctx, browser, append(flags, fmt.Sprintf("--window-size=%d,700", width), "--screenshot="+abs, url)...)
		if b, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("%s --screenshot: %w: %s", browser, err, b)
		}
		fmt.Println("screenshot:", shot)
	}
	return nil
}

// get is the body of a GET of url.
func get(url string) (string, error) {
	res, err := http.Get(url)
	if err != nil {
		return "", err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return string(b), err
}

// ejected reports whether the page's JSON shows addr ejected.
func ejected(url, addr string) bool {
	res, err := http.Get(url + "?format=json")
	if err != nil {
		return false
	}
	defer res.Body.Close()
	var p struct {
		Balancers []struct {
			Endpoints []struct {
				Address string `json:"address"`
				Ejected bool   `json:"ejected"`
			} `json:"endpoints"`
		} `json:"balancers"`
	}
	if json.NewDecoder(res.Body).Decode(&p) != nil {
		return false
	}
	for _, b := range p.Balancers {
		for _, e := range b.Endpoints {
			if e.Address == addr && e.Ejected {
				return true
			}
		}
	}
	return false
}
