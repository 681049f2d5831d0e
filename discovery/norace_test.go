//go:build !race

package discovery_test

const raceEnabled = false
