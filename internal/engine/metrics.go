package engine

import (
	"slices"
	"sync"

	"strings"

	"google.golang.org/grpc/balancer"
	estats "google.golang.org/grpc/experimental/stats"
)

// A policy's metrics are registered with grpc's metrics registry, so that
// they reach grpc's OpenTelemetry plugin (and any other stats handler) like
// grpc's own load-balancing metrics. Like those, they are off unless
// enabled by name (see the public metrics package). Every one carries the
// channel's target and, as an optional label, the locality xDS assigned
// the endpoints to.

// Label names, as grpc spells its own.
const (
	targetLabel   = "grpc.target"
	localityLabel = "grpc.lb.locality"
	reasonLabel   = "pickwise.reason"
	resultLabel   = "pickwise.probe_result"
	membersLabel  = "pickwise.membership"
	configLabel   = "pickwise.config"
	endpointLabel = "pickwise.endpoint"
	attemptLabel  = "pickwise.attempt"
)

// attemptNames are the values of attemptLabel, for doneShared.retries.
var attemptNames = [3]string{"2", "3", "4+"}

// MetricsSpec describes the metrics of one policy.
type MetricsSpec struct {
	// Policy is the policy's short name: its metrics are named
	// pickwise.<Policy>.<metric>.
	Policy string
	// Reasons names the PickReasons the policy's pickers give, in order;
	// at most MaxPickReasons.
	Reasons []string
	// Cost, if set, describes what the policy's pickers report through
	// CostReporter; it becomes the endpoint_cost histogram's description.
	Cost string
	// Weights registers the metrics of backend-reported weights, for a
	// policy with Settings.Weights.
	Weights bool
	// LoadProbes registers the metrics of load probing, for a policy with
	// Settings.LoadProbing.
	LoadProbes bool
	// Scheduled says the policy's pickers are weighted round robins, which
	// count their picks per picker, not per endpoint (WeightedRR.Pick):
	// there is no endpoint_picks metric.
	Scheduled bool
}

// Metrics are the registered metrics of one policy (RegisterMetrics).
type Metrics struct {
	reasons [MaxPickReasons]string
	picks   *estats.Int64CountHandle
	ready   *estats.Int64AsyncGaugeHandle
	ramping *estats.Int64AsyncGaugeHandle
	cost    *estats.Float64HistoHandle // nil without MetricsSpec.Cost
	weights *weightMetrics             // nil without MetricsSpec.Weights
	load    *loadMetrics               // nil without MetricsSpec.LoadProbes

	// Outcomes: local ejection, probes and retries placed elsewhere.
	ejected      *estats.Int64AsyncGaugeHandle
	ejections    *estats.Int64CountHandle
	readmissions *estats.Int64CountHandle
	probes       *estats.Int64CountHandle
	elsewhere    *estats.Int64CountHandle
	retries      *estats.Int64CountHandle

	// membership carries the fingerprints of the balancer's membership
	// and config as labels (membership.go).
	membership *estats.Int64AsyncGaugeHandle
	endpoint   endpointMetrics
}

// endpointMetrics are labelled by endpoint: one series per endpoint and
// channel, which is why a user enables them only where a fleet is small
// enough (docs/observability.md).
type endpointMetrics struct {
	picks    *estats.Int64CountHandle // nil for a MetricsSpec.Scheduled policy
	failures *estats.Int64CountHandle
	ejected  *estats.Int64AsyncGaugeHandle
	inFlight *estats.Int64AsyncGaugeHandle
	weight   *estats.Int64AsyncGaugeHandle
}

// weightMetrics follow backend-reported weights, as grpc's
// weighted_round_robin metrics do, plus the reports the orcaweight package
// rejected.
type weightMetrics struct {
	rrFallback   *estats.Int64CountHandle
	notYetUsable *estats.Int64CountHandle
	stale        *estats.Int64CountHandle
	weight       *estats.Float64HistoHandle
	badReports   *estats.Int64CountHandle
}

// loadMetrics follow load probing (loadprobes.go).
type loadMetrics struct {
	probes *estats.Int64CountHandle // by result
	pool   *estats.Int64AsyncGaugeHandle
	age    *estats.Float64HistoHandle
}

// Load probes' results, the values of resultLabel.
const (
	probeAnswered      = "answered"
	probeFailed        = "failed"
	probeUnimplemented = "unimplemented"
)

// RegisterMetrics registers a policy's metrics. Call it once, from the
// policy package's initialization (grpc's registry panics on a name
// registered twice), and pass the result in the policy's spec.
func RegisterMetrics(s MetricsSpec) *Metrics {
	if len(s.Reasons) == 0 || len(s.Reasons) > MaxPickReasons {
		panic("pickwise: MetricsSpec " + s.Policy + ": 1 to MaxPickReasons reasons")
	}
	p := "pickwise." + s.Policy + "."
	plain := []string{targetLabel}
	optional := []string{localityLabel}
	m := &Metrics{
		picks: estats.RegisterInt64Count(RegisterMetricName(estats.MetricDescriptor{
			Name:           p + "picks",
			Description:    "Calls picked, by the reason the picker chose the endpoint (pickwise.reason): " + strings.Join(s.Reasons, ", ") + ", or probe (a probe of an ejected endpoint).",
			Unit:           "{pick}",
			Labels:         []string{targetLabel, reasonLabel},
			OptionalLabels: optional,
		})),
		ready: estats.RegisterInt64AsyncGauge(RegisterMetricName(estats.MetricDescriptor{
			Name:           p + "endpoints_ready",
			Description:    "Endpoints the policy is picking from: READY, in the current picker.",
			Unit:           "{endpoint}",
			Labels:         plain,
			OptionalLabels: optional,
		})),
		ramping: estats.RegisterInt64AsyncGauge(RegisterMetricName(estats.MetricDescriptor{
			Name:           p + "endpoints_in_slow_start",
			Description:    "READY endpoints still ramping up to their full share (slowStart).",
			Unit:           "{endpoint}",
			Labels:         plain,
			OptionalLabels: optional,
		})),
	}
	m.ejected = estats.RegisterInt64AsyncGauge(RegisterMetricName(estats.MetricDescriptor{
		Name:           p + "endpoints_ejected",
		Description:    "READY endpoints locally ejected for failures far above the fleet's (ejection): out of placement but for probe calls.",
		Unit:           "{endpoint}",
		Labels:         plain,
		OptionalLabels: optional,
	}))
	m.ejections = estats.RegisterInt64Count(RegisterMetricName(estats.MetricDescriptor{
		Name:           p + "ejections",
		Description:    "Local ejections of endpoints whose failures stood far above the fleet's.",
		Unit:           "{ejection}",
		Labels:         plain,
		OptionalLabels: optional,
	}))
	m.readmissions = estats.RegisterInt64Count(RegisterMetricName(estats.MetricDescriptor{
		Name:           p + "readmissions",
		Description:    "Ejected endpoints readmitted after their ejection time and a run of successful probe calls.",
		Unit:           "{readmission}",
		Labels:         plain,
		OptionalLabels: optional,
	}))
	m.probes = estats.RegisterInt64Count(RegisterMetricName(estats.MetricDescriptor{
		Name:           p + "probe_picks",
		Description:    "Calls placed on an ejected endpoint as probes of its recovery (also counted in picks, reason probe).",
		Unit:           "{pick}",
		Labels:         plain,
		OptionalLabels: optional,
	}))
	m.elsewhere = estats.RegisterInt64Count(RegisterMetricName(estats.MetricDescriptor{
		Name:           p + "attempts_elsewhere",
		Description:    "Retried or hedged attempts placed away from an endpoint an earlier attempt of the call used (needs the attempts interceptor).",
		Unit:           "{attempt}",
		Labels:         plain,
		OptionalLabels: optional,
	}))
	m.retries = estats.RegisterInt64Count(RegisterMetricName(estats.MetricDescriptor{
		Name:           p + "retry_picks",
		Description:    "Picks for a call's retried or hedged attempts, by the attempt's number (pickwise.attempt): 2, 3, or 4+ (needs the attempts interceptor).",
		Unit:           "{pick}",
		Labels:         []string{targetLabel, attemptLabel},
		OptionalLabels: optional,
	}))
	m.membership = estats.RegisterInt64AsyncGauge(RegisterMetricName(estats.MetricDescriptor{
		Name:           p + "membership",
		Description:    "Endpoints the balancer was given, labelled with the fingerprints of its membership (endpoints and weights, whatever their order) and of its parsed config: clients of one target that disagree have different labels.",
		Unit:           "{endpoint}",
		Labels:         []string{targetLabel, membersLabel, configLabel},
		OptionalLabels: optional,
	}))
	byEndpoint := []string{targetLabel, endpointLabel}
	m.endpoint = endpointMetrics{
		failures: estats.RegisterInt64Count(registerEndpointMetricName(estats.MetricDescriptor{
			Name:           p + "endpoint_failures",
			Description:    "Calls to each endpoint that failed on the server's side (the codes failurePenalty counts), counted when metrics are collected. One series per endpoint.",
			Unit:           "{call}",
			Labels:         byEndpoint,
			OptionalLabels: optional,
		})),
		ejected: estats.RegisterInt64AsyncGauge(registerEndpointMetricName(estats.MetricDescriptor{
			Name:           p + "endpoint_ejected",
			Description:    "1 while the endpoint is locally ejected, else 0. One series per endpoint.",
			Unit:           "{endpoint}",
			Labels:         byEndpoint,
			OptionalLabels: optional,
		})),
		inFlight: estats.RegisterInt64AsyncGauge(registerEndpointMetricName(estats.MetricDescriptor{
			Name:           p + "endpoint_in_flight",
			Description:    "Calls in flight to each endpoint from this channel. One series per endpoint.",
			Unit:           "{call}",
			Labels:         byEndpoint,
			OptionalLabels: optional,
		})),
		weight: estats.RegisterInt64AsyncGauge(registerEndpointMetricName(estats.MetricDescriptor{
			Name:           p + "endpoint_effective_weight",
			Description:    "The weight placement follows for each endpoint, in thousandths: its weight times its slow-start ramp and the share failure avoidance leaves it (under a weighted round robin, the weight of its share of the schedule); 0 out of the picker. One series per endpoint.",
			Unit:           "{weight/1000}",
			Labels:         byEndpoint,
			OptionalLabels: optional,
		})),
	}
	if !s.Scheduled {
		m.endpoint.picks = estats.RegisterInt64Count(registerEndpointMetricName(estats.MetricDescriptor{
			Name:           p + "endpoint_picks",
			Description:    "Calls picked for each endpoint (pickwise.endpoint, its address), counted when metrics are collected. One series per endpoint.",
			Unit:           "{pick}",
			Labels:         byEndpoint,
			OptionalLabels: optional,
		}))
	}
	copy(m.reasons[:], s.Reasons)
	if s.Cost != "" {
		m.cost = estats.RegisterFloat64Histo(RegisterMetricName(estats.MetricDescriptor{
			Name:           p + "endpoint_cost",
			Description:    s.Cost + " One sample per READY endpoint each time metrics are collected.",
			Unit:           "{cost}",
			Labels:         plain,
			OptionalLabels: optional,
		}))
	}
	if s.LoadProbes {
		m.load = &loadMetrics{
			probes: estats.RegisterInt64Count(RegisterMetricName(estats.MetricDescriptor{
				Name:           p + "load_probes",
				Description:    "Load probes sent to endpoints' servers, by result (pickwise.probe_result): answered, failed (an error or a timeout), or unimplemented (the server runs no probe service; it is asked once per connection).",
				Unit:           "{probe}",
				Labels:         []string{targetLabel, resultLabel},
				OptionalLabels: optional,
			})),
			pool: estats.RegisterInt64AsyncGauge(RegisterMetricName(estats.MetricDescriptor{
				Name:           p + "pool_answers",
				Description:    "Servers' answers in the pool that picks can still use: younger than maxAge and within their reuse budget.",
				Unit:           "{answer}",
				Labels:         plain,
				OptionalLabels: optional,
			})),
			age: estats.RegisterFloat64Histo(RegisterMetricName(estats.MetricDescriptor{
				Name:           p + "answer_age",
				Description:    "The age of each answer in the pool, each time metrics are collected.",
				Unit:           "s",
				Labels:         plain,
				OptionalLabels: optional,
			})),
		}
	}
	if s.Weights {
		m.weights = &weightMetrics{
			rrFallback: estats.RegisterInt64Count(RegisterMetricName(estats.MetricDescriptor{
				Name:           p + "rr_fallback",
				Description:    "Pickers built while fewer than two READY endpoints had a usable weight, so that every endpoint got an equal share.",
				Unit:           "{update}",
				Labels:         plain,
				OptionalLabels: optional,
			})),
			notYetUsable: estats.RegisterInt64Count(RegisterMetricName(estats.MetricDescriptor{
				Name:           p + "endpoint_weight_not_yet_usable",
				Description:    "READY endpoints, counted at each weight update, without a usable weight because they have not reported or are in their blackout period; they get the median weight.",
				Unit:           "{endpoint}",
				Labels:         plain,
				OptionalLabels: optional,
			})),
			stale: estats.RegisterInt64Count(RegisterMetricName(estats.MetricDescriptor{
				Name:           p + "endpoint_weight_stale",
				Description:    "READY endpoints, counted at each weight update, whose last report is older than the weight expiration period; they get the median weight.",
				Unit:           "{endpoint}",
				Labels:         plain,
				OptionalLabels: optional,
			})),
			weight: estats.RegisterFloat64Histo(RegisterMetricName(estats.MetricDescriptor{
				Name:           p + "endpoint_weight",
				Description:    "The usable weight of each READY endpoint at each weight update.",
				Unit:           "{weight}",
				Labels:         plain,
				OptionalLabels: optional,
			})),
			badReports: estats.RegisterInt64Count(RegisterMetricName(estats.MetricDescriptor{
				Name:           p + "bad_reports",
				Description:    "ORCA load reports ignored as unusable: NaN, infinite or negative values, zero queries per second, or zero utilization under load. A sampled per-call report counts as the reports it stands for.",
				Unit:           "{report}",
				Labels:         plain,
				OptionalLabels: optional,
			})),
		}
	}
	return m
}

// CostReporter is implemented by pickers whose policy compares a cost per
// endpoint. When metrics are collected, the engine samples every READY
// endpoint's cost, as of now (Clock.Nanotime), into the endpoint_cost
// histogram.
type CostReporter interface {
	ReportCosts(now int64, record func(cost float64))
}

var (
	metricNamesMu sync.Mutex
	metricNames   []string
	endpointNames []string // labelled by endpoint: not in metricNames
)

// MetricNames returns the names of every pickwise metric registered so
// far, sorted, but for those labelled by endpoint (EndpointMetricNames).
func MetricNames() []string {
	metricNamesMu.Lock()
	defer metricNamesMu.Unlock()
	names := slices.Clone(metricNames)
	slices.Sort(names)
	return names
}

// EndpointMetricNames returns the names of the metrics labelled by
// endpoint registered so far, sorted.
func EndpointMetricNames() []string {
	metricNamesMu.Lock()
	defer metricNamesMu.Unlock()
	names := slices.Clone(endpointNames)
	slices.Sort(names)
	return names
}

// registerEndpointMetricName is RegisterMetricName for a metric labelled
// by endpoint.
func registerEndpointMetricName(d estats.MetricDescriptor) estats.MetricDescriptor {
	metricNamesMu.Lock()
	defer metricNamesMu.Unlock()
	endpointNames = append(endpointNames, d.Name)
	return d
}

// RegisterMetricName records a metric's name for MetricNames and returns
// its descriptor, so that registration reads
// estats.RegisterX(RegisterMetricName(d)). The engine registers its own
// through it, and a parent policy (pickwise_subset) its.
func RegisterMetricName(d estats.MetricDescriptor) estats.MetricDescriptor {
	metricNamesMu.Lock()
	defer metricNamesMu.Unlock()
	metricNames = append(metricNames, d.Name)
	return d
}

// ChildMetricsRecorder is the recorder a parent hands its child balancers:
// cc's, or one that drops everything when cc has none (a fake ClientConn:
// tests, the simulator). grpc promises every balancer a recorder, and
// grpc-go's pickfirst before v1.85 records on it unchecked.
func ChildMetricsRecorder(cc balancer.ClientConn) estats.MetricsRecorder {
	if m := cc.MetricsRecorder(); m != nil {
		return m
	}
	return noMetrics{}
}

// MetricsRecorderOf returns cc's recorder, or nil when it has none or has
// only the one ChildMetricsRecorder makes up: a balancer records metrics
// only when the channel has somewhere to send them.
func MetricsRecorderOf(cc balancer.ClientConn) estats.MetricsRecorder {
	m := cc.MetricsRecorder()
	if _, none := m.(noMetrics); none {
		return nil
	}
	return m
}

// noMetrics is the recorder of a balancer built without one (tests, the
// simulator): it drops everything. Embedding the interface is what grpc
// asks of recorders, so that it can add methods; the ones it has are
// overridden here.
type noMetrics struct{ estats.MetricsRecorder }

func (noMetrics) RecordInt64Count(*estats.Int64CountHandle, int64, ...string) {}

func (noMetrics) RecordFloat64Count(*estats.Float64CountHandle, float64, ...string) {}

func (noMetrics) RecordInt64Histo(*estats.Int64HistoHandle, int64, ...string) {}

func (noMetrics) RecordFloat64Histo(*estats.Float64HistoHandle, float64, ...string) {}

func (noMetrics) RecordInt64Gauge(*estats.Int64GaugeHandle, int64, ...string) {}

func (noMetrics) RecordInt64UpDownCount(*estats.Int64UpDownCountHandle, int64, ...string) {}

func (noMetrics) RegisterAsyncReporter(estats.AsyncMetricReporter, ...estats.AsyncMetric) func() {
	return func() {}
}
