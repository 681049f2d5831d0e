package testnet_test

import (
	"os"
	"testing"

	"github.com/nova-node/nova-node/mcpbridge/mcptest"
)

// TestMain lets the test binary double as the MCP test server (a node
// declaring {command: os.Args[0], env: {NOVA_MCPTEST_SERVE: "1"}} starts
// it) and as the crash sink of TestReceiverKilledMidStream.
func TestMain(m *testing.M) {
	mcptest.MaybeServe()
	maybeCrashSink()
	os.Exit(m.Run())
}
