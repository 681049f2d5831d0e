package testnet_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/nova-node/nova-node/authority"
	"github.com/nova-node/nova-node/internal/waitfor"
	"github.com/nova-node/nova-node/mcpbridge"
	"github.com/nova-node/nova-node/mcpbridge/mcptest"
	"github.com/nova-node/nova-node/node"
	"github.com/nova-node/nova-node/node/localapi"
	"github.com/nova-node/nova-node/testnet"
	"github.com/nova-node/nova-node/tiers"
)

// testBackend declares the test binary as a stdio MCP server.
func testBackend() map[string]mcpbridge.ServerConfig {
	return map[string]mcpbridge.ServerConfig{"test": {Command: os.Args[0], Env: map[string]string{mcptest.EnvServe: "1"}}}
}

// mcpNet is two nodes: node 1 hosts "toolsmith" served by the test MCP
// server, node 0 calls it.
func mcpNet(t *testing.T, configure func(i int, c *node.Config)) *testnet.Net {
	t.Helper()
	net := testnet.New(t, 2, testnet.WithConfig(func(i int, c *node.Config) {
		if i == 1 {
			c.Agents = append(c.Agents, node.AgentConfig{Name: "toolsmith", Capabilities: []node.CapabilityConfig{{ID: "tools"}}, MCPServers: testBackend()})
		}
		if configure != nil {
			configure(i, c)
		}
	}))
	net.Connect(0, 1)
	net.WaitForCards()
	waitTool(t, net.Nodes[0], "toolsmith_say")
	return net
}

func waitTool(t *testing.T, n *node.Node, wire string) {
	t.Helper()
	waitfor.Eventually(t, 15*time.Second, func() error {
		es := n.MCP().Entries(t.Context())
		for _, e := range es {
			if e.Kind == "tool" && e.Name == wire {
				return nil
			}
		}
		return fmt.Errorf("tool %s is not on the face: %+v", wire, es)
	})
}

func text(r *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range r.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			b.WriteString(t.Text)
		}
	}
	return b.String()
}

// TestMCPRemoteToolEveryFace: a tool of an MCP server started from node B's
// config is listed and called from node A directly, through the stdio relay
// (`nova-node mcp`) and through the HTTP face in both protocol eras; the
// card carries the tool as a capability; resources and prompts work too.
func TestMCPRemoteToolEveryFace(t *testing.T) {
	net := mcpNet(t, nil)
	a, b := net.Nodes[0], net.Nodes[1]
	ctx := t.Context()

	card, ok := a.Registry().Get("toolsmith@" + b.ID().String())
	if !ok || !card.HasCapability("toolsmith.say") {
		t.Fatalf("toolsmith's card on A lacks toolsmith.say: %+v", card)
	}

	res, err := a.MCP().CallTool(ctx, "toolsmith.say", json.RawMessage(`{"text":"hello"}`))
	if err != nil || res.IsError || text(res) != "hello" {
		t.Fatalf("direct call: %v %+v", err, res)
	}
	res, err = a.MCP().CallTool(ctx, "toolsmith_add", json.RawMessage(`{"a":2,"b":3}`))
	if err != nil || res.IsError {
		t.Fatalf("add: %v %+v", err, res)
	}
	if sc, _ := json.Marshal(res.StructuredContent); string(sc) != `{"sum":5}` {
		t.Fatalf("add structured content %s", sc)
	}

	check := func(name string, cs *mcp.ClientSession) {
		t.Helper()
		lt, err := cs.ListTools(ctx, nil)
		if err != nil {
			t.Fatalf("%s: list: %v", name, err)
		}
		var found *mcp.Tool
		for _, tl := range lt.Tools {
			if !mcpbridge.ValidWireName(tl.Name) {
				t.Errorf("%s: tool name %q is not legal for strict clients", name, tl.Name)
			}
			if tl.Name == "toolsmith_say" {
				found = tl
			}
		}
		if found == nil || found.Title != "toolsmith.say" {
			t.Fatalf("%s: toolsmith_say missing or without its canonical title: %+v", name, lt.Tools)
		}
		for _, n := range []string{"toolsmith_say", "toolsmith.say"} {
			r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: n, Arguments: map[string]any{"text": "via " + name}})
			if err != nil || text(r) != "via "+name {
				t.Fatalf("%s: call %s: %v %+v", name, n, err, r)
			}
		}
		rr, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: mcptest.ReadmeURI})
		if err != nil || len(rr.Contents) != 1 || !strings.HasPrefix(rr.Contents[0].Text, "# mcptest") || rr.Contents[0].MIMEType != "text/markdown" {
			t.Fatalf("%s: read resource: %v %+v", name, err, rr)
		}
		_, err = cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "nova://nope"})
		if err == nil || !strings.Contains(err.Error(), "nova://nope") {
			t.Fatalf("%s: missing resource: %v, want an error naming the URI", name, err)
		}
		gp, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "toolsmith_greet", Arguments: map[string]string{"name": "Ada"}})
		if err != nil || len(gp.Messages) != 1 || gp.Messages[0].Content.(*mcp.TextContent).Text != "Hello, Ada!" {
			t.Fatalf("%s: prompt: %v %+v", name, err, gp)
		}
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)

	// The stdio relay on the local API socket.
	rwc, err := localapi.NewClient(a.Config().APISocketPath()).DialMCP(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := client.Connect(ctx, &mcp.IOTransport{Reader: rwc, Writer: rwc}, nil)
	if err != nil {
		t.Fatal(err)
	}
	check("relay", cs)
	cs.Close()

	// The HTTP face, both eras.
	url := strings.TrimSuffix(a.MetricsURL(), "/metrics") + "/mcp"
	for _, v := range []string{"2025-11-25", "2026-07-28"} {
		cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: localClient(t, a)}, &mcp.ClientSessionOptions{ProtocolVersion: v})
		if err != nil {
			t.Fatalf("http %s: %v", v, err)
		}
		check("http "+v, cs)
		cs.Close()
	}

	// Property 33 on a real call path: invocations are counted per tool.
	if m := a.MCP().Metrics(); m.TotalToolInvocations < 4 || m.ToolInvocationsByTool["toolsmith.say"] == 0 {
		t.Fatalf("invocation metrics on A: %+v", m)
	}
}

// TestMCPFailuresAreStructured: a failing tool is an isError result naming
// the source agent and the code; a tier violation is refused by the
// receiving node with a JSON-RPC error outside the reserved range carrying
// TIER_VIOLATION; a crashed backend gives BACKEND_UNAVAILABLE (or already
// the restarted server's answer) and recovers.
func TestMCPFailuresAreStructured(t *testing.T) {
	l1 := tiers.L1
	net := mcpNet(t, func(i int, c *node.Config) {
		if i == 0 {
			c.Agents = append(c.Agents, node.AgentConfig{Name: "strat", Tier: &l1, Capabilities: []node.CapabilityConfig{{ID: "plan"}}})
		}
	})
	a := net.Nodes[0]
	ctx := t.Context()

	res, err := a.MCP().CallTool(ctx, "toolsmith.fail", nil)
	if err != nil || !res.IsError {
		t.Fatalf("fail: %v %+v", err, res)
	}
	sc, _ := json.Marshal(res.StructuredContent)
	if !strings.Contains(string(sc), `"agent":"toolsmith"`) || !strings.Contains(text(res), "always fails") {
		t.Fatalf("failing tool result does not name the agent and the cause: %s %q", sc, text(res))
	}

	// The face of a node calling as an L1 agent: L1 may not reach L3.
	err = callAs(t, net, "strat", "toolsmith.say")
	var je *jsonrpc.Error
	if !errors.As(err, &je) || je.Code > -31000 || je.Code < -31999 || mcpbridge.CodeOf(err) != tiers.CodeTierViolation {
		t.Fatalf("L1 -> L3 tool call: %v, want a JSON-RPC error carrying TIER_VIOLATION", err)
	}

	// Crash the backend; calls fail cleanly, then work again.
	_, _ = a.MCP().CallTool(ctx, "toolsmith.crash", nil)
	waitfor.Eventually(t, 20*time.Second, func() error {
		res, err := a.MCP().CallTool(ctx, "toolsmith.say", json.RawMessage(`{"text":"back"}`))
		if err == nil && !res.IsError && text(res) == "back" {
			return nil
		}
		if err == nil && res.IsError {
			sc, _ := json.Marshal(res.StructuredContent)
			if !strings.Contains(string(sc), mcpbridge.CodeBackendUnavailable) && !strings.Contains(string(sc), mcpbridge.CodeToolFailed) {
				t.Fatalf("call during restart: %s", sc)
			}
		}
		return fmt.Errorf("backend did not recover: %v %+v", err, res)
	})
}

// callAs calls tool from node 0 with the face's agent set to as.
func callAs(t *testing.T, net *testnet.Net, as, tool string) error {
	t.Helper()
	_, err := net.Nodes[0].MCP().CallToolAs(t.Context(), as+"@"+net.Nodes[0].ID().String(), tool, json.RawMessage(`{"text":"x"}`))
	return err
}

// TestMCPReceivingNodeEnforces: a peer speaking /nova/mcp/1.0.0 directly
// (no face, forged _meta) is held to the rules by the node hosting the
// tool: an impersonated caller is refused, a sandbox violation is refused,
// and lists hide what the caller may not discover.
func TestMCPReceivingNodeEnforces(t *testing.T) {
	net := testnet.New(t, 2, testnet.WithConfig(func(i int, c *node.Config) {
		if i == 1 {
			c.Agents = append(c.Agents, node.AgentConfig{Name: "labtools", Sandbox: "lab", Capabilities: []node.CapabilityConfig{{ID: "tools"}}, MCPServers: testBackend()})
		}
	}))
	net.Connect(0, 1)
	net.WaitForCards()
	a, b := net.Nodes[0], net.Nodes[1]
	ctx := t.Context()
	waitfor.Eventually(t, 15*time.Second, func() error {
		c, ok := a.Registry().Get("labtools@" + b.ID().String())
		if !ok || !c.HasCapability("labtools.say") {
			return errors.New("labtools card without its tools yet")
		}
		return nil
	})
	// The face (as a0, outside the sandbox) does not show lab's tools.
	for _, e := range a.MCP().Entries(ctx) {
		if strings.HasPrefix(e.Name, "labtools") {
			t.Fatalf("sandboxed tool visible across the sandbox: %+v", e)
		}
	}
	// Raw MCP to B.
	s, err := a.Host().NewStream(ctx, b.ID(), mcpbridge.ProtocolID)
	if err != nil {
		t.Fatal(err)
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "raw", Version: "1"}, nil)
	cs, err := c.Connect(ctx, &mcp.IOTransport{Reader: s, Writer: s}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	call := func(caller string) error {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Meta: mcp.Meta{mcpbridge.MetaCaller: caller}, Name: "labtools.say", Arguments: map[string]any{"text": "x"}})
		return err
	}
	if err := call("labtools@" + b.ID().String()); mcpbridge.CodeOf(err) != mcpbridge.CodeUnauthorizedCaller {
		t.Fatalf("impersonating B's agent: %v", err)
	}
	if err := call(""); mcpbridge.CodeOf(err) != mcpbridge.CodeUnauthorizedCaller {
		t.Fatalf("no caller: %v", err)
	}
	if err := call("a0@" + a.ID().String()); mcpbridge.CodeOf(err) != "SANDBOX_VIOLATION" {
		t.Fatalf("a0 -> lab tool: %v, want SANDBOX_VIOLATION", err)
	}
	lt, err := cs.ListTools(ctx, &mcp.ListToolsParams{Meta: mcp.Meta{mcpbridge.MetaCaller: "a0@" + a.ID().String()}})
	if err != nil || len(lt.Tools) != 0 {
		t.Fatalf("list as a0: %v %d tools, want none", err, len(lt.Tools))
	}
}

// TestMCPToolsFollowGrants: a sandbox's tools answer an agent of another
// node only if a grant puts that agent in the sandbox: its card's claim of
// the sandbox alone gets SANDBOX_VIOLATION from the node hosting the tool,
// and once the admin grants its node the sandbox, the same call works.
func TestMCPToolsFollowGrants(t *testing.T) {
	net := testnet.New(t, 2, testnet.WithoutGrants(), testnet.WithConfig(func(i int, c *node.Config) {
		c.Sandbox.Enforced = true
		if i == 0 {
			c.Agents = append(c.Agents, node.AgentConfig{Name: "claimer", Sandbox: "lab", Capabilities: []node.CapabilityConfig{{ID: "echo"}}})
		}
		if i == 1 {
			c.Agents = append(c.Agents, node.AgentConfig{Name: "labtools", Sandbox: "lab", Capabilities: []node.CapabilityConfig{{ID: "tools"}}, MCPServers: testBackend()})
		}
	}))
	net.Connect(0, 1)
	net.WaitForCards()
	a, b := net.Nodes[0], net.Nodes[1]
	ctx := t.Context()
	claimer := "claimer@" + a.ID().String()
	waitfor.Eventually(t, 15*time.Second, func() error {
		if _, ok := b.Registry().Get(claimer); !ok {
			return errors.New("node 1 holds no card for the claimer yet")
		}
		return nil
	})
	s, err := a.Host().NewStream(ctx, b.ID(), mcpbridge.ProtocolID)
	if err != nil {
		t.Fatal(err)
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "raw", Version: "1"}, nil)
	cs, err := c.Connect(ctx, &mcp.IOTransport{Reader: s, Writer: s}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	call := func() error {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Meta: mcp.Meta{mcpbridge.MetaCaller: claimer}, Name: "labtools.say", Arguments: map[string]any{"text": "x"}})
		return err
	}
	waitTool(t, b, "labtools_say")
	// The face lists a tool as soon as the registry holds it; the peer's
	// session gets it right after (unknown tool until then).
	waitfor.Eventually(t, 5*time.Second, func() error {
		err := call()
		if err == nil {
			t.Fatal("ungranted claim of lab -> lab's tool: the call went through, want SANDBOX_VIOLATION")
		}
		if mcpbridge.CodeOf(err) != "SANDBOX_VIOLATION" {
			return fmt.Errorf("ungranted claim of lab -> lab's tool: %v, want SANDBOX_VIOLATION", err)
		}
		return nil
	})
	if _, err := b.AddAuthorityRecord(net.Grant(authority.Grant{Peer: a.ID(), MaxTier: tiers.L3, Sandboxes: []string{"lab"}})); err != nil {
		t.Fatal(err)
	}
	waitfor.Eventually(t, 5*time.Second, func() error { return call() })
}
