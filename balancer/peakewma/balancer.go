package peakewma

import (
	"time"

	"github.com/pickwise/pickwise/internal/engine"
	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/serviceconfig"
)

// Name is the policy's name in service configs.
const Name = "pickwise_peak_ewma"

func init() {
	engine.Register(engine.Spec{
		Name:        Name,
		ParseConfig: ParseConfig,
		NewPolicy:   func() engine.Policy { return &policy{cfg: DefaultConfig()} },
	})
}

// policy plugs the engine's Peak EWMA load metric into its d-choice
// sampler; the engine times calls and keeps the latency averages. Its fields are guarded by
// the engine's lock.
type policy struct {
	cfg *Config
}

func (p *policy) Configure(c serviceconfig.LoadBalancingConfig) (engine.Settings, error) {
	cfg, err := engine.ConfigAs(Name, c, DefaultConfig)
	if err != nil {
		return engine.Settings{}, err
	}
	p.cfg = cfg
	return engine.Settings{
		SlowStart:      p.cfg.SlowStart,
		FailurePenalty: p.cfg.FailurePenalty,
		Latency: &engine.LatencyConfig{
			DecayTime:  time.Duration(p.cfg.DecayTime),
			DefaultRTT: time.Duration(p.cfg.DefaultRTT),
		},
	}, nil
}

func (p *policy) NewPicker(snap *engine.Snapshot) balancer.Picker {
	return engine.NewLeastLoaded(snap, int(p.cfg.ChoiceCount), engine.NewPeakEWMA(snap))
}
