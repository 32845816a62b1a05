package main

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/pickwise/pickwise/metrics"
)

// TestMain fails the run if a goroutine outlives the tests: run must stop
// every backend, channel, HTTP server and the MeterProvider it starts.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// TestRun runs the program briefly and checks what a Prometheus server
// would scrape from it.
func TestRun(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out bytes.Buffer
	scrape, err := run(ctx, config{addr: "127.0.0.1:0", duration: time.Second, concurrency: 2}, &out)
	t.Logf("program output:\n%s", out.String())
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	if !slices.ContainsFunc(sampleLines(scrape), func(l string) bool { return strings.HasPrefix(l, "pickwise_") }) {
		t.Errorf("the scrape has no pickwise_ sample (enabled: %v)", metrics.Names())
	}
	// grpc's own per-attempt metric: DefaultMetrics is still in the set
	// that pickwise's names were added to.
	if !slices.ContainsFunc(sampleLines(scrape), func(l string) bool { return metricName(l) == "grpc_client_attempt_started_total" }) {
		t.Error("the scrape has no grpc_client_attempt_started_total sample")
	}
	checkRegisteredPolicyMetrics(t, scrape, metrics.Names())
}

// checkRegisteredPolicyMetrics checks the samples of the per-policy
// metrics that every channel records whatever its traffic: for each name
// in names (as metrics.Names returns them) that is a pick counter
// (pickwise.<policy>.picks) or an endpoint-count gauge
// (pickwise.<policy>.endpoints_ready, pickwise.subset.size,
// pickwise.subset.endpoints), the scrape must have a sample, labeled with
// the target of this program's channel for that policy. Pick samples must
// also say why the endpoint was picked. Names that are not there are not
// checked, so this holds for whatever set of metrics the policies
// register.
func checkRegisteredPolicyMetrics(t *testing.T, scrape string, names []string) {
	t.Helper()
	var want []string
	for _, n := range names {
		switch {
		case strings.HasSuffix(n, ".picks"),
			strings.HasSuffix(n, ".endpoints_ready"),
			n == "pickwise.subset.size",
			n == "pickwise.subset.endpoints":
			want = append(want, n)
		}
	}
	t.Logf("checking the samples of %v", want)
	lines := sampleLines(scrape)
	for _, n := range want {
		var samples []string
		for _, l := range lines {
			if isSampleOf(metricName(l), n) {
				samples = append(samples, l)
			}
		}
		if len(samples) == 0 {
			t.Errorf("%s: no sample of it (looked for %s, with a suffix or not)", n, strings.ReplaceAll(n, ".", "_"))
			continue
		}
		// pickwise.<policy>.<metric>: the channel for that policy is
		// named after it.
		policy := strings.Split(n, ".")[1]
		if slices.ContainsFunc(channels, func(c channelSpec) bool { return c.name == policy }) {
			target := `grpc_target="fleet:///` + policy + `"`
			if !slices.ContainsFunc(samples, func(l string) bool { return strings.Contains(l, target) }) {
				t.Errorf("%s: no sample labeled %s in\n%s", n, target, strings.Join(samples, "\n"))
			}
		}
		if strings.HasSuffix(n, ".picks") {
			for _, l := range samples {
				if !strings.Contains(l, "pickwise_reason=") {
					t.Errorf("%s: sample without a pickwise_reason label: %s", n, l)
				}
			}
		}
	}
}

// sampleLines returns the sample lines of a Prometheus text scrape.
func sampleLines(text string) []string {
	var out []string
	for l := range strings.Lines(text) {
		l = strings.TrimRight(l, "\n")
		if metricName(l) != "" {
			out = append(out, l)
		}
	}
	return out
}

func TestMissingSamples(t *testing.T) {
	text := strings.Join([]string{
		"# HELP pickwise_p2c_picks_total Picks.",
		"# TYPE pickwise_p2c_picks_total counter",
		`pickwise_p2c_picks_total{grpc_target="x",pickwise_reason="tie"} 3`,
		`pickwise_p2c_endpoints_ready{grpc_target="x"} 5`,
		`pickwise_orca_wrr_endpoint_weight_bucket{grpc_target="x",le="1"} 0`,
		`pickwise_p2c_endpoint_cost_seconds_sum{grpc_target="x"} 0.5`,
		"",
	}, "\n")
	got := missingSamples(text, []string{
		"pickwise.p2c.picks",                // with _total
		"pickwise.p2c.endpoints_ready",      // as is
		"pickwise.orca_wrr.endpoint_weight", // a histogram
		"pickwise.p2c.endpoint_cost",        // a histogram with a unit
		"pickwise.p2c.endpoints",            // a prefix of a name, not a name
		"pickwise.ring_hash.picks",          // absent
	})
	want := []string{"pickwise.p2c.endpoints", "pickwise.ring_hash.picks"}
	if !slices.Equal(got, want) {
		t.Errorf("missingSamples = %v, want %v", got, want)
	}
}

func TestSelectLines(t *testing.T) {
	text := strings.Join([]string{
		"# TYPE pickwise_p2c_picks_total counter",
		`pickwise_p2c_picks_total{pickwise_reason="tie"} 3`,
		`pickwise_orca_wrr_endpoint_weight_bucket{le="1"} 0`,
		`pickwise_orca_wrr_endpoint_weight_count 4`,
		`grpc_client_attempt_started_total{grpc_target="a"} 9`,
		`grpc_client_attempt_duration_seconds_count 9`,
		`target_info{service_name="x"} 1`,
	}, "\n")
	got := selectLines(text)
	want := []string{
		`grpc_client_attempt_started_total{grpc_target="a"} 9`,
		`pickwise_orca_wrr_endpoint_weight_count 4`,
		`pickwise_p2c_picks_total{pickwise_reason="tie"} 3`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("selectLines =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
