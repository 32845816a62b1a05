//go:build race

package main

// raceEnabled says the test binary runs under the race detector.
const raceEnabled = true
