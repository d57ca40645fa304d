//go:build race

package h2

// raceEnabled: sync.Pool drops items at random under the race detector.
const raceEnabled = true
