package p2c

import (
	"github.com/pickwise/pickwise/internal/engine"
	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/serviceconfig"
)

// Name is the policy's name in service configs.
const Name = "pickwise_p2c"

func init() {
	engine.Register(engine.Spec{
		Name:        Name,
		ParseConfig: ParseConfig,
		NewPolicy:   func() engine.Policy { return &policy{cfg: DefaultConfig()} },
	})
}

// policy plugs the in-flight load metric into the engine's d-choice
// sampler. Its fields are guarded by the engine's lock.
type policy struct {
	cfg *Config
}

func (p *policy) Configure(c serviceconfig.LoadBalancingConfig) (engine.Settings, error) {
	cfg, err := engine.ConfigAs(Name, c, DefaultConfig)
	if err != nil {
		return engine.Settings{}, err
	}
	p.cfg = cfg
	return engine.Settings{SlowStart: p.cfg.SlowStart, FailurePenalty: p.cfg.FailurePenalty}, nil
}

func (p *policy) NewPicker(snap *engine.Snapshot) balancer.Picker {
	return engine.NewLeastLoaded(snap, int(p.cfg.ChoiceCount), loadMetric(p.cfg.ActiveRequestBias))
}
