package p2c

import (
	"math"

	"github.com/pickwise/pickwise/internal/engine"
)

// loadMetric returns the in-flight metric for a bias, with the two common
// biases specialised so the pick path avoids math.Pow. Bias 0 is the
// engine's placement by weight alone, where in-flight counts play no part.
func loadMetric(bias float64) engine.LoadMetric {
	switch bias {
	case 1:
		return engine.InFlight{}
	case 0:
		return engine.ByWeight{}
	default:
		return biasedInFlight{bias: bias}
	}
}

// biasedInFlight is (inFlight + 1)^bias.
type biasedInFlight struct{ bias float64 }

func (m biasedInFlight) Load(r *engine.Ready) float64 {
	return math.Pow(float64(r.Stats.InFlight()+1), m.bias)
}
