package main

import (
	"strings"
	"testing"

	"github.com/nova-node/nova-node/agentcard"
	"github.com/nova-node/nova-node/node"
)

// ping of an agent this node hosts succeeds, and a peer that cannot be
// reached has a code of its own and a hint (neither is INTERNAL).
func TestPingOwnAgentAndUnreachable(t *testing.T) {
	dir := t.TempDir()
	startNode(t, 0, dir, node.DefaultAgent("alice"))
	out, errOut, code := runCLI(t, "ping", "--data-dir", dir, "alice")
	if code != 0 || !strings.Contains(out, "is on this node") {
		t.Fatalf("ping of its own agent: exit %d %q %q", code, out, errOut)
	}
	out, _, code = runCLI(t, "ping", "--data-dir", dir, "--json", "12D3KooWJpzJ3Nn1Z6zNcbcbBv6K3q2bX1ZbtESv5qv7KUT7kqXx")
	if e := jsonError(t, out); code != 1 || e.Code != "PEER_UNREACHABLE" || !strings.Contains(e.Hint, "--peer") {
		t.Fatalf("ping of an unknown peer: exit %d %+v", code, e)
	}
}

// The CAPABILITIES column of agent tables fits its width, also for an MCP
// agent with a capability per tool.
func TestCapCellFits(t *testing.T) {
	var caps []agentcard.Capability
	for _, id := range []string{"tools", "toolsmith.add", "toolsmith.crash", "toolsmith.fail", "toolsmith.say"} {
		caps = append(caps, agentcard.Capability{ID: id})
	}
	if cell, cut := capCell(caps); cell != "tools,toolsmith.add,+3" || !cut {
		t.Errorf("five capabilities: %q, %v", cell, cut)
	}
	if cell, cut := capCell(caps[:1]); cell != "tools" || cut {
		t.Errorf("one: %q, %v", cell, cut)
	}
	long := []agentcard.Capability{{ID: strings.Repeat("x", 30)}, {ID: "y"}}
	if cell, _ := capCell(long); len(cell) > capWidth {
		t.Errorf("a long first id: %q", cell)
	}
}
