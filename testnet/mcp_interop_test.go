package testnet_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nova-node/nova-node/mcpbridge"
)

// tsClient runs mcpbridge/interop/client.mjs (the official MCP TypeScript
// SDK client, pinned by package-lock.json) with env, and returns its JSON
// output. Without the npm packages the test skips, or fails under
// NOVA_INTEROP=1 (.ci/run installs them).
func tsClient(t *testing.T, env ...string) map[string]any {
	t.Helper()
	dir, _ := filepath.Abs("../mcpbridge/interop")
	nodeBin := filepath.Join(dir, "node_modules", "node", "bin", "node")
	if _, err := os.Stat(nodeBin); err != nil {
		if os.Getenv("NOVA_INTEROP") == "1" {
			t.Fatalf("NOVA_INTEROP=1 but %s is missing: run npm ci --prefix mcpbridge/interop", nodeBin)
		}
		t.Skip("npm packages not installed: npm ci --prefix mcpbridge/interop")
	}
	cmd := exec.Command(nodeBin, filepath.Join(dir, "client.mjs"))
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var res map[string]any
	if jerr := json.Unmarshal(out, &res); err != nil || jerr != nil {
		t.Fatalf("client.mjs %v: %v %v\nstdout: %.2000s\nstderr: %.2000s", env, err, jerr, out, stderr.String())
	}
	return res
}

// TestInteropTypeScriptClientAcrossNodes: the official TypeScript SDK
// client on node A's HTTP face calls tools of an MCP server behind an agent
// on node B: a failing tool that declares an output schema comes back as
// its isError result (the SDK checks structuredContent against the schema
// and would throw), a 5 MB result arrives whole, and progress
// notifications and log messages of a call reach the client.
func TestInteropTypeScriptClientAcrossNodes(t *testing.T) {
	net := mcpNet(t, nil)
	a := net.Nodes[0]
	waitTool(t, a, "toolsmith_steps")
	url := strings.TrimSuffix(a.MetricsURL(), "/metrics") + "/mcp"
	base := []string{"MCP_URL=" + url, "MCP_TOKEN=" + localToken(t, a), "MCP_TIMEOUT_MS=60000"}

	// 1. A failed call of a tool with an output schema.
	res := tsClient(t, append(base, "MCP_TOOL=toolsmith_divide", `MCP_ARGS={"a":1,"b":0}`, "MCP_ALLOW_TOOL_ERROR=1")...)
	call, _ := res["call"].(map[string]any)
	meta, _ := call["_meta"].(map[string]any)
	e, _ := meta[mcpbridge.MetaError].(map[string]any)
	if call["isError"] != true || call["structuredContent"] != nil || e["code"] != mcpbridge.CodeToolFailed || e["agent"] != "toolsmith" {
		t.Fatalf("divide by zero through the TypeScript client: %v", call)
	}

	// 4. A 5 MB result.
	res = tsClient(t, append(base, "MCP_TOOL=toolsmith_big", `MCP_ARGS={"bytes":5000000}`)...)
	call, _ = res["call"].(map[string]any)
	sc, _ := call["structuredContent"].(map[string]any)
	if s, _ := sc["text"].(string); len(s) != 5_000_000 || call["isError"] == true {
		t.Fatalf("5 MB result through the TypeScript client: isError %v, %d bytes", call["isError"], len(s))
	}

	// 2 and 3. Progress and log messages.
	res = tsClient(t, append(base, "MCP_TOOL=toolsmith_steps", `MCP_ARGS={"steps":4}`, "MCP_PROGRESS=1", "MCP_LOG_LEVEL=info")...)
	progress, _ := res["progress"].([]any)
	logs, _ := res["logs"].([]any)
	if len(progress) != 4 {
		t.Fatalf("progress notifications through the TypeScript client: %v", progress)
	}
	for i, p := range progress {
		if m, _ := p.(map[string]any); m["progress"] != float64(i+1) || m["total"] != float64(4) {
			t.Fatalf("progress notification %d: %v", i, p)
		}
	}
	// On the call's response stream, ahead of its result.
	if len(logs) != 4 {
		t.Fatalf("no log message through the TypeScript client: %v", res)
	}
	for _, l := range logs {
		if m, _ := l.(map[string]any); m["logger"] != "toolsmith/mcptest" || m["level"] != "info" {
			t.Fatalf("log message: %v", l)
		}
	}
}
