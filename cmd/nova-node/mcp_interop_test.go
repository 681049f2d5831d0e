package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nova-node/nova-node/internal/waitfor"
	"github.com/nova-node/nova-node/mcpbridge"
	"github.com/nova-node/nova-node/mcpbridge/mcptest"
	"github.com/nova-node/nova-node/node"
)

// TestInteropMCPTypeScript drives the node's MCP faces with independent
// clients: the official TypeScript SDK client (over `nova-node mcp` on
// stdio and over /mcp), the MCP conformance suite against /mcp with its
// fixtures (mcptest.Conformance) behind an agent on another node and its
// justified baseline, and a probe of the 2026-07-28 stateless routing. The
// npm packages are pinned in mcpbridge/interop/package-lock.json; .ci/run
// installs them (npm ci --prefix mcpbridge/interop). Without them the test
// skips.
func TestInteropMCPTypeScript(t *testing.T) {
	dir, _ := filepath.Abs("../../mcpbridge/interop")
	nodeBin := filepath.Join(dir, "node_modules", "node", "bin", "node")
	if _, err := os.Stat(nodeBin); err != nil {
		if os.Getenv("NOVA_INTEROP") == "1" {
			t.Fatalf("NOVA_INTEROP=1 but %s is missing: run npm ci --prefix mcpbridge/interop", nodeBin)
		}
		t.Skip("npm packages not installed: npm ci --prefix mcpbridge/interop")
	}
	bin := novaBinary(t)
	dirA, dirB := t.TempDir(), t.TempDir()
	a := startNode(t, 0, dirA, node.DefaultAgent("alice"))
	smith := node.AgentConfig{Name: "toolsmith", Capabilities: []node.CapabilityConfig{{ID: "tools"}},
		MCPServers: map[string]mcpbridge.ServerConfig{"test": {Command: os.Args[0], Env: map[string]string{mcptest.EnvServe: "1"}}}}
	// The conformance suite's fixtures (test_simple_text, test://static-text,
	// test_simple_prompt, ...) behind another agent on the same remote node:
	// the suite finds them under their bare names.
	fixtures := node.AgentConfig{Name: "everything", Capabilities: []node.CapabilityConfig{{ID: "fixtures"}},
		MCPServers: map[string]mcpbridge.ServerConfig{"conformance": {Command: os.Args[0], Env: map[string]string{mcptest.EnvServe: mcptest.ServeConformance}}}}
	b := startNode(t, 1, dirB, smith, fixtures)
	if _, err := a.Connect(t.Context(), b.Addrs()[0].String()); err != nil {
		t.Fatal(err)
	}
	waitfor.Eventually(t, testnetWait, func() error {
		_, err := a.MCP().CallTool(t.Context(), "toolsmith.say", json.RawMessage(`{"text":"x"}`))
		if err == nil {
			_, err = a.MCP().CallTool(t.Context(), "everything.test_simple_text", nil)
		}
		return err
	})
	url := strings.TrimSuffix(a.MetricsURL(), "/metrics") + "/mcp"
	tok, err := node.ReadLocalToken(dirA) // /mcp is for the data dir's owner
	if err != nil {
		t.Fatal(err)
	}
	runNode := func(script string, env ...string) (string, error) {
		cmd := exec.Command(nodeBin, filepath.Join(dir, script))
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), env...)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Logf("%s stderr:\n%s", script, stderr.String())
		}
		return string(out), err
	}
	common := []string{"MCP_TOOL=toolsmith_say", `MCP_ARGS={"text":"from typescript"}`, "MCP_RESOURCE=" + mcptest.ReadmeURI,
		"MCP_PROMPT=toolsmith_greet", `MCP_PROMPT_ARGS={"name":"Ada"}`}
	stdioCmd, _ := json.Marshal([]string{bin, "mcp", "--data-dir", dirA})
	for name, env := range map[string][]string{
		"stdio": append([]string{"MCP_STDIO_CMD=" + string(stdioCmd)}, common...),
		"http":  append([]string{"MCP_URL=" + url, "MCP_TOKEN=" + tok}, common...),
	} {
		out, err := runNode("client.mjs", env...)
		if err != nil {
			t.Fatalf("%s: client.mjs: %v\n%s", name, err, out)
		}
		var res struct {
			Tools      []string          `json:"tools"`
			ToolTitles map[string]string `json:"toolTitles"`
			Call       struct {
				Content []struct{ Text string } `json:"content"`
			} `json:"call"`
		}
		if err := json.Unmarshal([]byte(out), &res); err != nil || len(res.Call.Content) == 0 || res.Call.Content[0].Text != "from typescript" {
			t.Fatalf("%s: client.mjs result: %v\n%s", name, err, out)
		}
		if res.ToolTitles["toolsmith_say"] != "toolsmith.say" {
			t.Errorf("%s: title of toolsmith_say = %q", name, res.ToolTitles["toolsmith_say"])
		}
	}
	if out, err := runNode("stateless-probe.mjs", append([]string{"MCP_URL=" + url, "MCP_TOKEN=" + tok}, common...)...); err != nil {
		t.Fatalf("2026-07-28 stateless probe: %v\n%s", err, out)
	}
	out, err := runNode("conformance.mjs", "MCP_URL="+url, "MCP_TOKEN="+tok, "CONFORMANCE_RESULTS_DIR="+t.TempDir())
	if err != nil {
		t.Fatalf("conformance suite: %v\n%s", err, out)
	}
	t.Log(lastLine(out))
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}
