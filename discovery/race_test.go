//go:build race

package discovery_test

// The race detector slows libp2p down five to ten times: TestSwarm runs
// on fewer nodes under -race (see swarmSize).
const raceEnabled = true
