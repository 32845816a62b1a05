package shadow_test

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	_ "github.com/pickwise/pickwise/balancer/p2c"
	"github.com/pickwise/pickwise/balancer/shadow"
	"github.com/pickwise/pickwise/internal/fleet"
)

// Example runs round_robin live with pickwise_p2c asked on every pick, over
// three backends on loopback, and reads what the shadow recorded: every
// call compared, and still one connection per backend.
func Example() {
	f, err := fleet.Start(3)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer f.Close()
	c, err := fleet.Dial(f.Addrs(), `{"loadBalancingConfig": [{"pickwise_shadow": {
		"live": [{"round_robin": {}}],
		"candidate": [{"pickwise_p2c": {}}],
		"sampleRate": 1}}]}`)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	summary := func() shadow.Summary {
		for _, s := range shadow.Summaries() {
			if s.Target == c.Conn.CanonicalTarget() {
				return s
			}
		}
		return shadow.Summary{}
	}
	// The candidate comes up beside live; wait until it answers.
	for ctx.Err() == nil {
		before := summary().Compared
		c.Load(ctx, 10, 1, 0)
		if summary().Compared-before == 10 {
			break
		}
	}
	before := summary()
	c.Load(ctx, 300, 4, 0)
	s := summary().Since(before) // these 300 calls' figures alone
	fmt.Printf("%s live, %s candidate: %d calls compared\n", s.Live, s.Candidate, s.Compared)
	for _, b := range f.Backends {
		fmt.Printf("%s accepted %d connection\n", b.Name(), b.Accepted())
	}
	// Output:
	// round_robin live, pickwise_p2c candidate: 300 calls compared
	// backend-0 accepted 1 connection
	// backend-1 accepted 1 connection
	// backend-2 accepted 1 connection
}

// ExampleParseConfig shows the error a config with a canary share out of
// range gets: it names the policy and the field.
func ExampleParseConfig() {
	_, err := shadow.ParseConfig(json.RawMessage(`{
		"live": [{"round_robin": {}}],
		"candidate": [{"pickwise_p2c": {}}],
		"canaryPercent": 150}`))
	fmt.Println(err)
	// Output:
	// pickwise_shadow: canaryPercent 150: must be in [0, 100]
}
