package testnet_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/nova-node/nova-node/internal/waitfor"
	"github.com/nova-node/nova-node/node"
	"github.com/nova-node/nova-node/testnet"
)

// TestMCPReloadAppliesMCPServers: an agent added by a reload with
// mcpServers starts its servers, publishes its tools as capabilities and
// is callable from a peer; a reload that drops its servers withdraws the
// tools from the peer's face and the card; an agent added with an a2aUrl
// on a running node is not published (no half agent) and the reload says
// a restart applies it.
func TestMCPReloadAppliesMCPServers(t *testing.T) {
	net := testnet.New(t, 2)
	net.Connect(0, 1)
	net.WaitForCards()
	a, b := net.Nodes[0], net.Nodes[1]

	next := b.Config()
	smith := node.AgentConfig{Name: "toolsmith", Capabilities: []node.CapabilityConfig{{ID: "tools"}}, MCPServers: testBackend()}
	next.Agents = append(slices.Clone(next.Agents), smith)
	res, err := b.Reload(next)
	if err != nil || !slices.Equal(res.Added, []string{"toolsmith"}) || len(res.Restart) != 0 {
		t.Fatalf("reload adding toolsmith: %+v %v", res, err)
	}
	waitTool(t, a, "toolsmith_say")
	out, err := a.MCP().CallTool(t.Context(), "toolsmith.say", []byte(`{"text":"reloaded"}`))
	if err != nil || out.IsError || text(out) != "reloaded" {
		t.Fatalf("call after reload: %v %+v", err, out)
	}
	waitfor.Eventually(t, 15*time.Second, func() error {
		if c, ok := a.Registry().Get("toolsmith@" + b.ID().String()); !ok || !c.HasCapability("toolsmith.say") {
			return errors.New("the peer's copy of toolsmith's card lacks its tools")
		}
		return nil
	})

	// Servers dropped: the tools leave the peer's face and the card.
	next.Agents[len(next.Agents)-1].MCPServers = nil
	if res, err := b.Reload(next); err != nil || len(res.Restart) != 0 {
		t.Fatalf("reload dropping the servers: %+v %v", res, err)
	}
	waitfor.Eventually(t, 15*time.Second, func() error {
		for _, e := range a.MCP().Entries(t.Context()) {
			if e.Name == "toolsmith_say" {
				return errors.New("toolsmith_say still on the peer's face")
			}
		}
		if c, ok := a.Registry().Get("toolsmith@" + b.ID().String()); !ok || c.HasCapability("toolsmith.say") {
			return fmt.Errorf("the peer's copy of toolsmith's card: %v %+v", ok, c.Capabilities)
		}
		return nil
	})
	if st := b.MCPBackends(); len(st) != 0 {
		t.Fatalf("backends still running: %+v", st)
	}

	// An A2A agent: a restart applies it; nothing is published meanwhile.
	next.Agents = append(next.Agents, node.AgentConfig{Name: "remote", A2AURL: "http://127.0.0.1:1/"})
	res, err = b.Reload(next)
	if err != nil || !slices.Contains(res.Restart, "agents.remote.a2aUrl") || slices.Contains(res.Added, "remote") {
		t.Fatalf("reload adding an a2aUrl agent: %+v %v", res, err)
	}
	if _, ok := b.Registry().Get("remote"); ok {
		t.Fatal("the a2aUrl agent is published without its A2A card")
	}
}
