package main

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/nova-node/nova-node/internal/waitfor"
	"github.com/nova-node/nova-node/mcpbridge"
	"github.com/nova-node/nova-node/mcpbridge/mcptest"
	"github.com/nova-node/nova-node/node"
)

// TestMCPErrorsSayItOnce: a prompt of a peer's MCP server left without its
// required argument is MISSING_PROMPT_ARGUMENT, said once (without the
// SDK's `calling "prompts/get": ` prefixes, one per session crossed); a
// tool called with bad arguments prints its error once; a tool's
// structured result is printed once.
func TestMCPErrorsSayItOnce(t *testing.T) {
	dirA, dirB := t.TempDir(), t.TempDir()
	a := startNode(t, 0, dirA, node.DefaultAgent("alice"))
	smith := node.AgentConfig{Name: "toolsmith", Capabilities: []node.CapabilityConfig{{ID: "tools"}},
		MCPServers: map[string]mcpbridge.ServerConfig{"test": {Command: os.Args[0], Env: map[string]string{mcptest.EnvServe: "1"}}}}
	b := startNode(t, 1, dirB, smith)
	if _, err := a.Connect(t.Context(), b.Addrs()[0].String()); err != nil {
		t.Fatal(err)
	}
	waitfor.Eventually(t, testnetWait, func() error {
		_, err := a.MCP().CallTool(t.Context(), "toolsmith.say", json.RawMessage(`{"text":"x"}`))
		return err
	})

	_, errOut, code := runCLI(t, "prompts", "get", "toolsmith.greet", "--data-dir", dirA)
	if code != 1 || strings.Contains(errOut, "calling") || strings.Count(errOut, "MISSING_PROMPT_ARGUMENT") != 1 ||
		!strings.Contains(errOut, `needs argument "name" (MISSING_PROMPT_ARGUMENT)`) || !strings.Contains(errOut, "hint: ") {
		t.Errorf("prompts get without its argument, across the mesh: exit %d\n%s", code, errOut)
	}
	out, _, _ := runCLI(t, "prompts", "get", "toolsmith.greet", "--data-dir", dirA, "--json")
	if e := jsonError(t, out); e.Code != mcpbridge.CodeMissingArgument || strings.Contains(e.Message, "calling") {
		t.Errorf("prompts get --json: %+v", e)
	}

	out, errOut, code = runCLI(t, "tools", "call", "toolsmith.add", "--args", `{"a":"x"}`, "--data-dir", dirA)
	if code != 1 || strings.Count(out, `want "number"`) != 1 || !strings.Contains(errOut, "hint: ") {
		t.Errorf("tools call with bad arguments: exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}
	out, _, code = runCLI(t, "tools", "call", "toolsmith.add", "--args", `{"a":2,"b":3}`, "--data-dir", dirA)
	if code != 0 || strings.Count(out, "5") != 1 || !strings.Contains(out, `"sum": 5`) {
		t.Errorf("tools call's result, once: exit %d\n%s", code, out)
	}
}

// TestA2ACallOneCode: a task that fails on a nova-node gateway with a mesh
// error ends with that error's code alone, not "(DELIVERY_FAILED)
// (TASK_FAILED)".
func TestA2ACallOneCode(t *testing.T) {
	dir := t.TempDir()
	n := startNode(t, 0, dir, node.DefaultAgent("alice"), node.AgentConfig{Name: "mute"})
	_, errOut, code := runCLI(t, "--data-dir", dir, "a2a", "call", n.A2AURL()+"/a2a/mute/", "--message", "hi")
	if code != 1 || strings.Count(errOut, "_FAILED)") != 1 || !strings.Contains(errOut, "(DELIVERY_FAILED)\nhint: ") {
		t.Fatalf("a2a call to an agent that answers no requests: exit %d\n%s", code, errOut)
	}
}
