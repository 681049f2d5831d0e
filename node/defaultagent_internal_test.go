package node

import (
	"testing"
)

// TestDefaultAgentIsSmallestID: every default of the node (send, document
// writes, tasks, swarms, the MCP faces without mcp.as) is the local agent
// with the smallest id, whatever the order of config.yaml, and an agent
// registered from Go takes part; mcp.as, when set, wins for the MCP faces.
func TestDefaultAgentIsSmallestID(t *testing.T) {
	newNode := func(t *testing.T, mcpAs string, agents ...string) *Node {
		cfg := DefaultConfig()
		cfg.DataDir = t.TempDir()
		cfg.Agents = nil
		for _, a := range agents {
			cfg.Agents = append(cfg.Agents, DefaultAgent(a))
		}
		cfg.MCP.As = mcpAs
		n, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { n.Close() })
		return n
	}
	t.Run("config order does not count", func(t *testing.T) {
		n := newNode(t, "", "zeta", "alpha", "mike")
		self := "@" + n.ID().String()
		if c, ok := n.defaultAgent(); !ok || c.ID != "alpha" {
			t.Fatalf("defaultAgent = %q, %v; want alpha", c.ID, ok)
		}
		if got := n.mcpAs(); got != "alpha"+self {
			t.Errorf("mcpAs = %q, want alpha%s", got, self)
		}
		if got, err := n.localAgent("", "as"); err != nil || got != "alpha"+self {
			t.Errorf("localAgent(\"\") = %q, %v; want alpha%s", got, err, self)
		}
		if _, err := n.RegisterAgent(DefaultAgent("aardvark").Card(), nil); err != nil {
			t.Fatal(err)
		}
		if got := n.mcpAs(); got != "aardvark"+self {
			t.Errorf("after registering aardvark from Go, mcpAs = %q", got)
		}
	})
	t.Run("mcp.as wins for MCP only", func(t *testing.T) {
		n := newNode(t, "zeta", "zeta", "alpha")
		self := "@" + n.ID().String()
		if got := n.mcpAs(); got != "zeta"+self {
			t.Errorf("mcpAs = %q, want zeta%s", got, self)
		}
		if got, _ := n.localAgent("", "as"); got != "alpha"+self {
			t.Errorf("localAgent(\"\") = %q, want alpha%s: mcp.as is for the MCP faces only", got, self)
		}
	})
	t.Run("no agent", func(t *testing.T) {
		n := newNode(t, "")
		if c, ok := n.defaultAgent(); ok {
			t.Errorf("defaultAgent = %q on a node with no agent", c.ID)
		}
		if got := n.mcpAs(); got != "" {
			t.Errorf("mcpAs = %q on a node with no agent", got)
		}
		if _, err := n.localAgent("", "as"); err == nil {
			t.Error("localAgent(\"\") found an agent on a node with no agent")
		}
	})
}
