//go:build race

package h1

// raceEnabled: sync.Pool drops items at random under the race detector.
const raceEnabled = true
