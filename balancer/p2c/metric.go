package p2c

import (
	"math"

	"github.com/pickwise/pickwise/internal/engine"
)

// loadMetric returns the in-flight metric for a bias, with the two common
// biases specialised so the pick path avoids math.Pow.
func loadMetric(bias float64) engine.LoadMetric {
	switch bias {
	case 1:
		return engine.InFlight{}
	case 0:
		return constantLoad{}
	default:
		return biasedInFlight{bias: bias}
	}
}

// constantLoad ignores in-flight counts, so the cost is 1/weight: weighted
// random among the candidates.
type constantLoad struct{}

func (constantLoad) Load(*engine.Ready) float64 { return 1 }

// biasedInFlight is (inFlight + 1)^bias.
type biasedInFlight struct{ bias float64 }

func (m biasedInFlight) Load(r *engine.Ready) float64 {
	return math.Pow(float64(r.Stats.InFlight()+1), m.bias)
}
