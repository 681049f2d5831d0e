//go:build race

package journal

// raceOn: the race detector's shadow memory takes page faults of its own.
const raceOn = true
