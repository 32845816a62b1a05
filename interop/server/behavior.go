package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pickwise/pickwise/lbconfig"
	"google.golang.org/grpc/codes"
)

// errPrefix starts every error this package makes, so a message that
// surfaces in a lab log (possibly relayed through a status) says where it
// came from.
const errPrefix = "pickwise-backend: "

// Defaults filled in for fields left at their zero value. They are visible
// in Behavior() and in the admin reply, so a user always sees what is in
// effect rather than a zero that means something else.
const (
	// DefaultErrorCode is the status of injected failures: UNAVAILABLE is
	// what a crashed or unreachable server produces, and it is the code
	// clients retry and balancers penalize.
	DefaultErrorCode = "UNAVAILABLE"
	// DefaultORCAInterval is how often the out-of-band ORCA recorder is
	// refreshed when ORCAConfig.Interval is zero.
	DefaultORCAInterval = Duration(time.Second)
	// UtilizationComputed derives the reported utilization from the calls
	// in service; it is the default ORCAConfig.Utilization.
	UtilizationComputed = "computed"
	// UtilizationFixed reports ORCAConfig.FixedUtilization whatever the
	// load, to model a server that lies or measures something else (for
	// example a host shared with other work).
	UtilizationFixed = "fixed"
	// UtilizationRate reports the completed calls per second over
	// ORCAConfig.RatedQPS: a server with capacity C serving R calls a
	// second reports R/C, the utilization that makes a weight of qps /
	// utilization equal to its capacity whatever its share of the traffic.
	UtilizationRate = "rate"
)

// Bounds that are ours rather than any standard's; each says why.
const (
	// minORCAInterval keeps the refresh goroutine from spinning: ORCA
	// reports are consumed at human-scale intervals, so anything faster is
	// a typo.
	minORCAInterval = 10 * time.Millisecond
	// maxLatencySpread: with sigma 5 the 99.9th percentile is already about
	// 5 million times the median; larger values model nothing real.
	maxLatencySpread = 5
)

// Duration is a time.Duration that JSON spells as a Go duration string
// ("20ms", "1.5s"), because bare nanosecond counts are unreadable in a lab
// script and easy to get wrong by a factor of 1000. It is the type policy
// configs use, so one parser serves both.
type Duration = lbconfig.Duration

// Behavior is how the server answers Backend/Call. Load-balancing policies
// are judged by how they react to slow, overloaded, cold and failing
// servers, so the lab changes a running server into any of those without
// restarting it (a restart would reset connections and hide the effect).
//
// The zero value answers every call at once, never fails and reports no
// ORCA load. Its JSON form, with every field shown:
//
//	{
//	  "latency": "20ms", "latencySpread": 0.3, "capacity": 4,
//	  "errorRate": 0, "errorCode": "UNAVAILABLE", "errorLatency": "0s",
//	  "coldStart": "0s", "coldFactor": 0, "slowdown": 0,
//	  "orca": {"perCall": false, "outOfBand": false, "interval": "1s",
//	           "utilization": "computed", "fixedUtilization": 0, "ratedQps": 0}
//	}
type Behavior struct {
	// Latency is the median service time of a successful call, measured
	// from the moment the call gets a capacity slot. Must be >= 0.
	Latency Duration `json:"latency"`
	// LatencySpread is the sigma of a lognormal distribution whose median
	// is Latency; 0 makes every call take exactly Latency. Real service
	// times are skewed to the right, which is what tail-aware policies are
	// for. Must be in [0, 5].
	LatencySpread float64 `json:"latencySpread"`
	// Capacity is how many successful calls are served at once; later ones
	// wait in a FIFO queue. 0 means unlimited. The queue is what makes an
	// overloaded server slow, as in a real thread or connection pool.
	// Lowering it never preempts calls already in service. Must be >= 0.
	Capacity int `json:"capacity"`
	// ErrorRate is the probability, in [0, 1], that a call fails with
	// ErrorCode. The decision is made on arrival and a failing call never
	// takes a capacity slot: it models a server that rejects or drops work
	// without doing it (a black hole, load shedding).
	ErrorRate float64 `json:"errorRate"`
	// ErrorCode is the upper-case gRPC code name of injected failures, for
	// example "UNAVAILABLE" (the default) or "RESOURCE_EXHAUSTED". Names
	// are accepted in any case and stored in upper case; "OK" is rejected
	// because it would not be a failure.
	ErrorCode string `json:"errorCode"`
	// ErrorLatency is how long a failing call takes. A black hole answers
	// in about 0, which is what lures naive balancers into sending it
	// more traffic. Must be >= 0.
	ErrorLatency Duration `json:"errorLatency"`
	// FailNext makes the next that many calls fail at once with
	// ErrorCode, whatever ErrorRate says: a transient blip of an exact
	// size. It is spent as calls arrive, so the behavior in effect always
	// reads 0. Must be >= 0.
	FailNext int `json:"failNext"`
	// ColdStart is how long a server stays cold after it starts serving or
	// after a cold restart (see Server.Reset): the service time is
	// multiplied by a factor that falls linearly from ColdFactor to 1 over
	// ColdStart, like a JIT warming up or caches filling. 0 disables it.
	// Must be >= 0.
	ColdStart Duration `json:"coldStart"`
	// ColdFactor is the slowdown at the very start of ColdStart. It must be
	// >= 1 when ColdStart is set (a cold server is not faster); 0 means
	// unset and is only allowed when ColdStart is 0.
	ColdFactor float64 `json:"coldFactor"`
	// Slowdown multiplies the service time of calls that enter service
	// while it is set, as a neighbour taking the machine's CPU or cache
	// would: the capacity stays, so a slowed server queues. It is read
	// when a call gets its slot, not on arrival, so calls already queued
	// are slowed too. 0 and 1 mean none; otherwise it must be >= 1.
	Slowdown float64 `json:"slowdown"`
	// ORCA controls load reporting to clients.
	ORCA ORCAConfig `json:"orca"`
}

// ORCAConfig controls the server's ORCA (Open Request Cost Aggregation,
// gRFC A51 and A64) reports. The numbers are the same in both channels:
// CPU utilization, QPS (calls completed per second over the last second)
// and EPS (injected failures per second over the last second).
type ORCAConfig struct {
	// PerCall adds the three numbers to every call's load report, in its
	// trailer ("endpoint-load-metrics-bin"), which is what grpc's
	// weighted_round_robin reads when its OOB reporting is disabled.
	// Without it the report carries serverload's figures only, which
	// weighted_round_robin ignores.
	PerCall bool `json:"perCall"`
	// OutOfBand publishes the numbers on the ORCA OpenRcaService stream,
	// refreshed every Interval. When off, streams stay open but carry
	// empty reports, because a gRPC service cannot be unregistered from a
	// running server.
	OutOfBand bool `json:"outOfBand"`
	// Interval is how often the out-of-band numbers are refreshed; default
	// "1s", at least "10ms". It is not how often they are sent: grpc's ORCA
	// service sends one report as soon as a stream opens and then at most
	// every 30s, a floor only grpc-internal test hooks can lower.
	Interval Duration `json:"interval"`
	// Utilization is how CPU utilization is obtained: "computed" (default)
	// is calls in service / Capacity, or calls in service / 100 capped at 1
	// when Capacity is 0; "fixed" is FixedUtilization; "rate" is calls
	// completed per second over RatedQPS.
	Utilization string `json:"utilization"`
	// FixedUtilization is the utilization reported in "fixed" mode. ORCA
	// allows CPU utilization above 1 (more demand than cores), so the only
	// bound is >= 0.
	FixedUtilization float64 `json:"fixedUtilization"`
	// RatedQPS is the calls per second the server is rated for, the
	// denominator of "rate" utilization; required (> 0) in that mode.
	RatedQPS float64 `json:"ratedQps"`
}

// Patch returns b with the fields present in patchJSON replaced, then
// defaulted and validated as New and SetBehavior would. Omitted fields, and
// fields set to null, keep their value in b; nested objects ("orca") are
// patched field by field too. Unknown fields are rejected (field names are
// case-sensitive), so a typo cannot silently do nothing. An empty string
// is the empty patch.
func (b Behavior) Patch(patchJSON string) (Behavior, error) {
	data := bytes.TrimSpace([]byte(patchJSON))
	if len(data) > 0 {
		if err := patchStruct(reflect.ValueOf(&b).Elem(), data, ""); err != nil {
			return Behavior{}, errors.New(errPrefix + err.Error())
		}
	}
	if err := b.normalize(); err != nil {
		return Behavior{}, err
	}
	return b, nil
}

// durationType is treated as a leaf by patchStruct although its kind is not
// a struct; listed so the check reads as intent.
var durationType = reflect.TypeFor[Duration]()

// patchStruct decodes the JSON object data over the struct v one field at a
// time. encoding/json would do the overlay by itself, but its errors for a
// bad value inside a custom type do not name the field, and the admin RPC
// promises an error that does. Going by the json tags keeps this in step
// with the struct definitions without a second list of names.
func patchStruct(v reflect.Value, data []byte, prefix string) error {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		where := "behavior"
		if prefix != "" {
			where = strings.TrimSuffix(prefix, ".")
		}
		return fmt.Errorf("%s: must be a JSON object: %v", where, strings.TrimPrefix(err.Error(), "json: "))
	}
	t := v.Type()
	index := make(map[string]int, t.NumField())
	known := make([]string, 0, t.NumField())
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		index[name] = i
		known = append(known, name)
	}
	// Sorted so that, of several bad fields, the same one is reported every
	// time.
	for _, key := range slices.Sorted(func(yield func(string) bool) {
		for k := range raw {
			if !yield(k) {
				return
			}
		}
	}) {
		path := prefix + key
		i, ok := index[key]
		if !ok {
			return fmt.Errorf("unknown field %q (known: %s)", path, strings.Join(known, ", "))
		}
		f := v.Field(i)
		val := raw[key]
		if f.Kind() == reflect.Struct && f.Type() != durationType {
			if string(bytes.TrimSpace(val)) == "null" {
				continue
			}
			if err := patchStruct(f, val, path+"."); err != nil {
				return err
			}
			continue
		}
		if err := json.Unmarshal(val, f.Addr().Interface()); err != nil {
			var typeErr *json.UnmarshalTypeError
			if errors.As(err, &typeErr) {
				return fmt.Errorf("%s: cannot use JSON %s", path, typeErr.Value)
			}
			return fmt.Errorf("%s: %s", path, strings.TrimPrefix(err.Error(), "json: "))
		}
	}
	return nil
}

// normalize fills defaults and rejects invalid values, naming the field by
// its JSON name and quoting the offending value.
func (b *Behavior) normalize() error {
	bad := func(field string, val any, rule string) error {
		return fmt.Errorf("%s%s %s: %s", errPrefix, field, quote(val), rule)
	}
	if b.Latency < 0 {
		return bad("latency", b.Latency, "must be >= 0")
	}
	if !(b.LatencySpread >= 0 && b.LatencySpread <= maxLatencySpread) {
		return bad("latencySpread", b.LatencySpread, fmt.Sprintf("must be in [0, %d]", maxLatencySpread))
	}
	if b.Capacity < 0 {
		return bad("capacity", b.Capacity, "must be >= 0 (0 means unlimited)")
	}
	if b.FailNext < 0 {
		return bad("failNext", b.FailNext, "must be >= 0")
	}
	// Written so that NaN fails too.
	if !(b.ErrorRate >= 0 && b.ErrorRate <= 1) {
		return bad("errorRate", b.ErrorRate, "must be in [0, 1]")
	}
	if b.ErrorCode == "" {
		b.ErrorCode = DefaultErrorCode
	}
	c, err := parseCode(b.ErrorCode)
	if err != nil {
		return bad("errorCode", b.ErrorCode, err.Error())
	}
	b.ErrorCode = codeNames[c]
	if b.ErrorLatency < 0 {
		return bad("errorLatency", b.ErrorLatency, "must be >= 0")
	}
	if b.ColdStart < 0 {
		return bad("coldStart", b.ColdStart, "must be >= 0")
	}
	switch {
	case math.IsNaN(b.ColdFactor) || math.IsInf(b.ColdFactor, 0):
		return bad("coldFactor", b.ColdFactor, "must be a finite number")
	case b.ColdFactor == 0 && b.ColdStart > 0:
		return bad("coldFactor", b.ColdFactor, "must be >= 1 when coldStart is set")
	case b.ColdFactor != 0 && b.ColdFactor < 1:
		return bad("coldFactor", b.ColdFactor, "must be >= 1 (or 0 when coldStart is 0)")
	}
	if math.IsNaN(b.Slowdown) || math.IsInf(b.Slowdown, 0) || b.Slowdown != 0 && b.Slowdown < 1 {
		return bad("slowdown", b.Slowdown, "must be >= 1 (0 or 1: none)")
	}
	o := &b.ORCA
	if o.Interval == 0 {
		o.Interval = DefaultORCAInterval
	}
	if time.Duration(o.Interval) < minORCAInterval {
		return bad("orca.interval", o.Interval, fmt.Sprintf("must be >= %v", minORCAInterval))
	}
	if o.Utilization == "" {
		o.Utilization = UtilizationComputed
	}
	switch o.Utilization {
	case UtilizationComputed, UtilizationFixed, UtilizationRate:
	default:
		return bad("orca.utilization", o.Utilization, fmt.Sprintf("must be %q, %q or %q", UtilizationComputed, UtilizationFixed, UtilizationRate))
	}
	if !(o.RatedQPS >= 0) || math.IsInf(o.RatedQPS, 0) {
		return bad("orca.ratedQps", o.RatedQPS, "must be a finite number >= 0")
	}
	if o.Utilization == UtilizationRate && o.RatedQPS == 0 {
		return bad("orca.ratedQps", o.RatedQPS, fmt.Sprintf("must be > 0 when orca.utilization is %q", UtilizationRate))
	}
	if !(o.FixedUtilization >= 0) || math.IsInf(o.FixedUtilization, 0) {
		return bad("orca.fixedUtilization", o.FixedUtilization, "must be a finite number >= 0")
	}
	return nil
}

// quote renders a rejected value for an error message: strings and
// durations quoted (they are user input), numbers bare.
func quote(v any) string {
	switch v := v.(type) {
	case string:
		return strconv.Quote(v)
	case Duration:
		return strconv.Quote(v.String())
	default:
		return fmt.Sprint(v)
	}
}

// codeNames are the canonical gRPC code names (the spelling of the gRPC
// spec and of other languages' status enums), indexed by code. The Go
// spelling from codes.Code.String ("ResourceExhausted") is not what people
// type in a lab script.
var codeNames = [...]string{
	codes.OK:                 "OK",
	codes.Canceled:           "CANCELLED",
	codes.Unknown:            "UNKNOWN",
	codes.InvalidArgument:    "INVALID_ARGUMENT",
	codes.DeadlineExceeded:   "DEADLINE_EXCEEDED",
	codes.NotFound:           "NOT_FOUND",
	codes.AlreadyExists:      "ALREADY_EXISTS",
	codes.PermissionDenied:   "PERMISSION_DENIED",
	codes.ResourceExhausted:  "RESOURCE_EXHAUSTED",
	codes.FailedPrecondition: "FAILED_PRECONDITION",
	codes.Aborted:            "ABORTED",
	codes.OutOfRange:         "OUT_OF_RANGE",
	codes.Unimplemented:      "UNIMPLEMENTED",
	codes.Internal:           "INTERNAL",
	codes.Unavailable:        "UNAVAILABLE",
	codes.DataLoss:           "DATA_LOSS",
	codes.Unauthenticated:    "UNAUTHENTICATED",
}

// parseCode maps a code name such as "resource_exhausted" (any case) to its
// code. OK is refused: an injected failure must fail.
func parseCode(name string) (codes.Code, error) {
	i := slices.Index(codeNames[:], strings.ToUpper(name))
	switch {
	case i < 0:
		return 0, errors.New(`unknown gRPC code name, want one such as "UNAVAILABLE" or "RESOURCE_EXHAUSTED"`)
	case codes.Code(i) == codes.OK:
		return 0, errors.New("must be a failure code, not OK")
	}
	return codes.Code(i), nil
}

// Code is the status code of injected failures, ErrorCode decoded. An
// empty or invalid ErrorCode stands for the default, codes.Unavailable, as
// it would after New or SetBehavior filled and checked it.
func (b Behavior) Code() codes.Code {
	c, err := parseCode(b.ErrorCode)
	if err != nil {
		return codes.Unavailable
	}
	return c
}

// CodeName is how ErrorCode spells c, for example "RESOURCE_EXHAUSTED" for
// codes.ResourceExhausted, so Go callers holding a codes.Code need not
// know the spelling; it is not c.String() ("ResourceExhausted"). It
// returns "" for a number outside gRPC's codes.
func CodeName(c codes.Code) string {
	if int(c) >= len(codeNames) {
		return ""
	}
	return codeNames[c]
}
