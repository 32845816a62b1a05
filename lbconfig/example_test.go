package lbconfig_test

import (
	"fmt"
	"time"

	"github.com/pickwise/pickwise/balancer/p2c"
	"github.com/pickwise/pickwise/lbconfig"
)

// A pickwise_p2c config built in Go, with slow start and a shorter
// ejection cap, as the service config a channel takes with
// grpc.WithDefaultServiceConfig.
func ExampleServiceConfig() {
	cfg := p2c.DefaultConfig()
	slow := lbconfig.DefaultSlowStart()
	slow.Window = lbconfig.Duration(20 * time.Second)
	cfg.SlowStart = &slow
	cfg.Ejection.MaxEjectionTime = lbconfig.Duration(10 * time.Second)
	sc, err := lbconfig.ServiceConfig(p2c.Name, cfg)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(sc)
	// Output:
	// {"loadBalancingConfig":[{"pickwise_p2c":{"choiceCount":2,"activeRequestBias":1,"slowStart":{"enabled":true,"window":"20s","aggression":1,"minWeightPercent":10},"failurePenalty":{"enabled":true,"window":10,"maxMultiplier":100,"halfLife":"5s","codes":["UNAVAILABLE","INTERNAL","UNKNOWN","DEADLINE_EXCEEDED","RESOURCE_EXHAUSTED"]},"ejection":{"enabled":true,"threshold":0.5,"minFailures":5,"baseEjectionTime":"1s","maxEjectionTime":"10s","maxEjectionPercent":10,"probeInterval":"300ms","probeSuccesses":2},"removalGrace":"10s"}}]}
}

// The failure evidence and ejection every load-aware policy shares, at
// their defaults.
func ExampleDefaultEjection() {
	ej := lbconfig.DefaultEjection()
	fmt.Println(ej.Threshold, ej.MinFailures, ej.BaseEjectionTime, ej.MaxEjectionTime, ej.MaxEjectionPercent, ej.ProbeInterval, ej.ProbeSuccesses)
	// Output: 0.5 5 1s 30s 10 300ms 2
}

// A policy name that no imported package registered is an error, not a
// config grpc would pass over for the next entry of its list or for
// pick_first. For a typo it names the closest policy, and for one of
// pickwise's policies whose package is not imported, the import to add.
func ExampleServiceConfig_notRegistered() {
	_, err := lbconfig.ServiceConfig("pickwise_p2", p2c.DefaultConfig())
	fmt.Println(err)
	// Output:
	// lbconfig: policy "pickwise_p2" is not registered; did you mean "pickwise_p2c"?
}
