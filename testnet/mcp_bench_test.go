package testnet_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/nova-node/nova-node/internal/waitfor"
	"github.com/nova-node/nova-node/mcpbridge/mcptest"
	"github.com/nova-node/nova-node/node"
	"github.com/nova-node/nova-node/testnet"
)

// BenchmarkMCPCall compares, in one run, a tool call through the mesh
// (node A's face -> /nova/mcp/1.0.0 -> node B -> stdio backend) with the
// same call made directly to the backend over stdio, and measures
// concurrent calls through one peer session.
//
//	go test -run '^$' -bench BenchmarkMCPCall -benchtime 2000x -count 5 ./testnet/
func BenchmarkMCPCall(b *testing.B) {
	args := json.RawMessage(`{"text":"ping"}`)
	b.Run("direct-stdio", func(b *testing.B) {
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), mcptest.EnvServe+"=1")
		c := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil)
		cs, err := c.Connect(b.Context(), &mcp.CommandTransport{Command: cmd, TerminateDuration: time.Second}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
		if err != nil {
			b.Fatal(err)
		}
		defer cs.Close()
		b.ResetTimer()
		for b.Loop() {
			if _, err := cs.CallTool(b.Context(), &mcp.CallToolParams{Name: "say", Arguments: args}); err != nil {
				b.Fatal(err)
			}
		}
	})
	net := testnet.New(b, 2, testnet.WithConfig(func(i int, c *node.Config) {
		if i == 1 {
			c.Agents = append(c.Agents, node.AgentConfig{Name: "toolsmith", Capabilities: []node.CapabilityConfig{{ID: "tools"}}, MCPServers: testBackend()})
		}
	}))
	net.Connect(0, 1)
	net.WaitForCards()
	face := net.Nodes[0].MCP()
	waitfor.Eventually(b, 15*time.Second, func() error {
		_, err := face.CallTool(b.Context(), "toolsmith.say", args)
		return err
	})
	b.Run("mesh", func(b *testing.B) {
		for b.Loop() {
			if r, err := face.CallTool(b.Context(), "toolsmith.say", args); err != nil || r.IsError {
				b.Fatal(err, r)
			}
		}
	})
	b.Run("mesh-parallel", func(b *testing.B) {
		b.SetParallelism(8) // 8 x GOMAXPROCS callers share one peer session
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if r, err := face.CallTool(b.Context(), "toolsmith.say", args); err != nil || r.IsError {
					b.Error(err, r)
					return
				}
			}
		})
	})
}
