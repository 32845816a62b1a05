// Package lbconfig holds the parts of pickwise's policy configs that
// several policies share: slow start, the failure evidence
// (failurePenalty), local ejection, the removal grace (removalGrace), and
// durations written as service configs write them ("30s").
//
// Most users never import it: a service config names a policy and its
// fields in JSON, and the policy parses them. It is for building a config
// in Go, for example in a control plane or a test, and turning it into the
// service-config JSON a channel takes (ServiceConfig). Every field has the
// JSON name and default the policies document; the policies' ParseConfig
// applies the same rules to a config built here as to one typed by hand.
package lbconfig

import (
	"encoding/json"
	"fmt"

	"google.golang.org/grpc/balancer"
)

// ServiceConfig returns the service config that selects policy (a
// registered name, such as "pickwise_p2c") with cfg (its Config, or any
// value that marshals to the policy's JSON config):
//
//	{"loadBalancingConfig": [{"<policy>": <cfg as JSON>}]}
//
// The policy must be registered in this process, as a channel needs it
// to be: grpc passes over an entry whose policy no imported package
// registered, to the list's next entry or to pick_first, and logs
// nothing. So an unregistered name is an error here, which names the
// package to blank-import for one of pickwise's policies and the closest
// name for a typo ("pickwise_p2" -> "pickwise_p2c"); any policy in grpc's
// registry is accepted. A control plane that writes configs for clients
// elsewhere imports the policies it names. The policy's own parser checks
// the config, and ServiceConfig returns the error a channel would fail
// with.
func ServiceConfig(policy string, cfg any) (string, error) {
	js, err := json.Marshal(cfg)
	if err != nil {
		return "", fmt.Errorf("lbconfig: %s: %w", policy, err)
	}
	b := balancer.Get(policy)
	if b == nil {
		return "", notRegistered(policy, func(name string) bool { return balancer.Get(name) != nil })
	}
	if parser, ok := b.(balancer.ConfigParser); ok {
		if _, err := parser.ParseConfig(js); err != nil {
			return "", err
		}
	}
	name, err := json.Marshal(policy)
	if err != nil {
		return "", fmt.Errorf("lbconfig: %w", err)
	}
	return fmt.Sprintf(`{"loadBalancingConfig":[{%s:%s}]}`, name, js), nil
}
