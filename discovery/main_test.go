package discovery_test

import (
	"os"
	"runtime/debug"
	"testing"
)

// TestMain runs the tests with a lazier garbage collector: tens of libp2p
// hosts in one process allocate heavily, and on two cores the default
// GOGC spends a fifth of the CPU on collection.
func TestMain(m *testing.M) {
	debug.SetGCPercent(400)
	os.Exit(m.Run())
}
