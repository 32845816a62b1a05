package sim

import (
	"fmt"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	_ "github.com/pickwise/pickwise/balancer/peakewma"
	_ "github.com/pickwise/pickwise/balancer/prequal"
)

func adhocBackends() []Backend {
	r := rand.New(rand.NewPCG(7, 9))
	out := make([]Backend, 12)
	for i := range out {
		b := Backend{Servers: 10, Service: LogNormal(10*time.Millisecond, 0.5)}
		t := time.Duration(0)
		for t < 60*time.Second {
			gap := time.Duration(r.Float64()*26e9) + 2*time.Second
			t += gap
			d := time.Duration(2e9 + r.Float64()*6e9)
			b.Slow = append(b.Slow, Window{From: t, To: t + d, Factor: 2 + 2*r.Float64()})
			t += d
		}
		out[i] = b
	}
	return out
}

func TestAdhocNoisy(t *testing.T) {
	if os.Getenv("ADHOC") == "" {
		t.Skip()
	}
	cfgs := []Policy{
		GRPC("p2c", "pickwise_p2c", `{}`),
		GRPC("peak_ewma", "pickwise_peak_ewma", `{}`),
		GRPC("prequal", "pickwise_prequal", os.Getenv("PQ")),
	}
	for _, clients := range []int{1, 50} {
		for _, p := range cfgs {
			run := Run{Seed: 5, Backends: adhocBackends(), Clients: clients, Rate: 0.7 * 12 * 10 / 0.0113, Warmup: 15 * time.Second, Duration: 45 * time.Second, Deadline: time.Second}
			start := time.Now()
			res, err := run.Execute(p)
			if err != nil {
				t.Fatal(err)
			}
			fmt.Printf("clients=%d %-10s p50=%v p99=%v p999=%v failed=%.2f%% (%v)\n", clients, p.Name, res.Quantile(0.5), res.Quantile(0.99), res.Quantile(0.999), 100*res.ErrorRate(), time.Since(start).Round(time.Millisecond))
		}
	}
}
