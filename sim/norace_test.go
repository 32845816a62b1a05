//go:build !race

package sim

// raceEnabled says the test binary runs under the race detector.
const raceEnabled = false
