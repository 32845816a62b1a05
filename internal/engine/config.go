package engine

import (
	"bytes"
	"fmt"

	"github.com/pickwise/pickwise/internal/strictjson"
	"github.com/pickwise/pickwise/internal/warn"
	"google.golang.org/grpc/serviceconfig"
)

// DecodeStrict unmarshals data into v and rejects unknown fields and
// trailing data (see strictjson.Decode).
func DecodeStrict(data []byte, v any) error { return strictjson.Decode(data, v) }

// ClampChoiceCount applies gRFC A48's rules for a d-choice policy's
// choiceCount: below 2 is rejected, above MaxChoices becomes MaxChoices.
func ClampChoiceCount(policy string, n *uint32) error {
	// "If choice_count < 2, the config will be rejected." (gRFC A48)
	if *n < 2 {
		return fmt.Errorf("%s: choiceCount %d: must be >= 2", policy, *n)
	}
	// "...a choice_count > 10 ... will set choice_count = 10." (gRFC A48)
	if *n > MaxChoices {
		warn.Clamped(policy, "choiceCount", *n, MaxChoices)
		*n = MaxChoices
	}
	return nil
}

// DecodeConfig decodes a policy's JSON config over cfg, which holds the
// defaults: an empty input or null keeps them. Errors are prefixed with the
// policy's name, as grpc shows them to the user as they are.
func DecodeConfig(policy string, js []byte, cfg any) error {
	trimmed := bytes.TrimSpace(js)
	if len(trimmed) == 0 || bytes.Equal(trimmed, []byte("null")) {
		return nil
	}
	if err := DecodeStrict(trimmed, cfg); err != nil {
		return fmt.Errorf("%s: %v", policy, err)
	}
	return nil
}

// ConfigAs returns a policy's parsed config as its own type: c itself, or
// defaults() when a parent built the policy without a config.
//
// Policies that implement Policy themselves call it from Configure.
func ConfigAs[T serviceconfig.LoadBalancingConfig](policy string, c serviceconfig.LoadBalancingConfig, defaults func() T) (T, error) {
	if c == nil {
		return defaults(), nil
	}
	cfg, ok := c.(T)
	if !ok {
		var zero T
		return zero, fmt.Errorf("%s: unexpected config type %T", policy, c)
	}
	return cfg, nil
}
