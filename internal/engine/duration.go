package engine

import "github.com/pickwise/pickwise/lbconfig"

// Duration is lbconfig.Duration, under the name the engine's code uses.
type Duration = lbconfig.Duration
