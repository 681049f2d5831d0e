package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/nova-node/nova-node/internal/waitfor"
	"github.com/nova-node/nova-node/mcpbridge"
	"github.com/nova-node/nova-node/mcpbridge/mcptest"
	"github.com/nova-node/nova-node/node"
)

// TestMCPCommands: a tool served by an MCP server on bob's node is listed
// and called from alice's CLI; resources and prompts too; `nova-node mcp`
// relays an MCP client's stdio to the node.
func TestMCPCommands(t *testing.T) {
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

	out, errOut, code := runCLI(t, "tools", "list", "--data-dir", dirA)
	if code != 0 || !strings.Contains(out, "toolsmith_say") || !strings.Contains(out, "toolsmith.say") {
		t.Fatalf("tools list: %d %q %q", code, out, errOut)
	}
	out, _, code = runCLI(t, "tools", "list", "--data-dir", dirA, "--json")
	var tools []mcp.Tool
	if code != 0 || json.Unmarshal([]byte(out), &tools) != nil || len(tools) < 4 {
		t.Fatalf("tools list --json: %d %q", code, out)
	}
	out, _, code = runCLI(t, "tools", "call", "toolsmith.say", "--args", `{"text":"hi from alice"}`, "--data-dir", dirA)
	if code != 0 || strings.TrimSpace(out) != "hi from alice" {
		t.Fatalf("tools call: %d %q", code, out)
	}
	out, errOut, code = runCLI(t, "tools", "call", "toolsmith_fail", "--data-dir", dirA)
	if code != 1 || !strings.Contains(out, "toolsmith") || !strings.Contains(out, "always fails") {
		t.Fatalf("failing tool: %d %q %q", code, out, errOut)
	}
	_, errOut, code = runCLI(t, "tools", "call", "nobody.nothing", "--data-dir", dirA)
	if code != 1 || !strings.Contains(errOut, mcpbridge.CodeToolNotFound) {
		t.Fatalf("unknown tool: %d %q", code, errOut)
	}
	// With --json, a failure is JSON on stdout with its code, nothing on stderr.
	out, errOut, code = runCLI(t, "tools", "call", "toolsmith_fail", "--data-dir", dirA, "--json")
	var failed struct {
		IsError bool      `json:"isError"`
		Error   errorBody `json:"error"`
	}
	if code != 1 || errOut != "" || json.Unmarshal([]byte(out), &failed) != nil || !failed.IsError ||
		failed.Error.Code != mcpbridge.CodeToolFailed || !strings.Contains(failed.Error.Message, "always fails") || failed.Error.Hint == "" {
		t.Fatalf("failing tool --json: %d %q %q", code, out, errOut)
	}
	out, errOut, code = runCLI(t, "tools", "call", "nobody.nothing", "--data-dir", dirA, "--json")
	if e := jsonError(t, out); code != 1 || errOut != "" || e.Code != mcpbridge.CodeToolNotFound {
		t.Fatalf("unknown tool --json: %d %q %q", code, out, errOut)
	}
	_, errOut, code = runCLI(t, "tools", "call", "toolsmith.say", "--args", "{nope", "--data-dir", dirA)
	if code != 2 || !strings.Contains(errOut, "JSON object") {
		t.Fatalf("bad --args: %d %q", code, errOut)
	}
	out, _, code = runCLI(t, "resources", "read", mcptest.ReadmeURI, "--data-dir", dirA)
	if code != 0 || !strings.Contains(out, "# mcptest") {
		t.Fatalf("resources read: %d %q", code, out)
	}
	out, _, code = runCLI(t, "prompts", "get", "toolsmith.greet", "--arg", "name=Ada", "--data-dir", dirA)
	if code != 0 || !strings.Contains(out, "Hello, Ada!") {
		t.Fatalf("prompts get: %d %q", code, out)
	}

	// nova-node mcp: an MCP client on the command's stdin/stdout.
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan int, 1)
	go func() {
		g := &globals{dataDir: dirA, stdout: outW, stderr: io.Discard, environ: []string{"HOME=" + t.TempDir()}}
		root := newRoot(g)
		root.SetArgs([]string{"mcp", "--data-dir", dirA})
		root.SetIn(inR)
		root.SetOut(outW)
		err := root.ExecuteContext(t.Context())
		outW.Close()
		if err != nil {
			done <- 1
			return
		}
		done <- 0
	}()
	c := mcp.NewClient(&mcp.Implementation{Name: "stdio-client", Version: "1"}, nil)
	cs, err := c.Connect(t.Context(), &mcp.IOTransport{Reader: outR, Writer: inW}, nil)
	if err != nil {
		t.Fatal(err)
	}
	r, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "toolsmith_say", Arguments: map[string]any{"text": "over stdio"}})
	if err != nil || r.IsError || r.Content[0].(*mcp.TextContent).Text != "over stdio" {
		t.Fatalf("stdio relay call: %v %+v", err, r)
	}
	cs.Close()
	if code := <-done; code != 0 {
		t.Fatalf("nova-node mcp exited %d", code)
	}
}

func TestMain(m *testing.M) {
	mcptest.MaybeServe()
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// TestMCPListsEmpty: in a swarm with no MCP server, `tools list`,
// `resources list` and `prompts list` print [] with --json (not null, which
// `jq '.[]'` cannot iterate), and say so in words without.
func TestMCPListsEmpty(t *testing.T) {
	dir := t.TempDir()
	startNode(t, 0, dir, node.DefaultAgent("alice"))
	for _, what := range []string{"tools", "resources", "prompts"} {
		out, errOut, code := runCLI(t, what, "list", "--data-dir", dir, "--json")
		if code != 0 || strings.TrimSpace(out) != "[]" {
			t.Errorf("%s list --json with none: exit %d, %q %q; want []", what, code, out, errOut)
		}
		out, _, code = runCLI(t, what, "list", "--data-dir", dir)
		if code != 0 || !strings.HasPrefix(out, "no "+what+" in the swarm yet") {
			t.Errorf("%s list with none: exit %d, %q", what, code, out)
		}
	}
}

// TestMCPStdioAnswersBeforeEOF: `echo REQUEST | nova-node mcp` prints the
// answer (stdin closing does not drop it), and a line that is not JSON
// gets a JSON-RPC parse error (-32700) while the session goes on.
func TestMCPStdioAnswersBeforeEOF(t *testing.T) {
	dir := t.TempDir()
	startNode(t, 0, dir)
	initReq := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	out, errOut, code := runCLIIn(t, initReq+"\n", "mcp", "--data-dir", dir)
	if code != 0 || !strings.Contains(out, `"id":1`) || !strings.Contains(out, `"serverInfo"`) {
		t.Fatalf("mcp with stdin closed after one request: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	out, errOut, code = runCLIIn(t, "garbage{\n"+initReq+"\n", "mcp", "--data-dir", dir)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) != 2 || !strings.Contains(lines[0], `"code":-32700`) || !strings.Contains(lines[0], `"id":null`) ||
		!strings.Contains(lines[1], `"serverInfo"`) {
		t.Fatalf("mcp with a line that is not JSON: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
}

// TestMCPStdioIDsByValue: with a live node, `nova-node mcp` whose stdin
// closes after requests with ids 2.0 and "\u0061" (answered as 2 and "a")
// prints both answers and exits 0 at once; a request whose id the server
// cannot give back (too big for it) makes it exit 1 after --drain-timeout
// with a note on stderr, and only JSON on stdout.
func TestMCPStdioIDsByValue(t *testing.T) {
	dir := t.TempDir()
	startNode(t, 0, dir)
	initReq := `{"jsonrpc":"2.0","id":2.0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	ping := `{"jsonrpc":"2.0","id":"\u0061","method":"ping"}`
	mcpRun := func(stdin string, drain string) (string, string, int, time.Duration) {
		ctx, cancel := context.WithTimeout(t.Context(), 40*time.Second)
		defer cancel()
		var o, e bytes.Buffer
		start := time.Now()
		code := run(ctx, []string{"mcp", "--data-dir", dir, "--drain-timeout", drain}, []string{"HOME=" + t.TempDir()}, strings.NewReader(stdin), &o, &e)
		return o.String(), e.String(), code, time.Since(start)
	}
	out, errOut, code, took := mcpRun(initReq+"\n"+ping+"\n", "30s")
	if code != 0 || took > 20*time.Second || !strings.Contains(out, `"id":2,`) || !strings.Contains(out, `"id":"a"`) {
		t.Fatalf("exit %d after %v\nstdout:\n%s\nstderr:\n%s", code, took, out, errOut)
	}
	big := `{"jsonrpc":"2.0","id":123456789012345678901234,"method":"ping"}`
	out, errOut, code, took = mcpRun(initReq+"\n"+big+"\n", "1s")
	if code != 1 || took > 20*time.Second || !strings.Contains(errOut, "123456789012345678901234") {
		t.Fatalf("unanswerable id: exit %d after %v\nstdout:\n%s\nstderr:\n%s", code, took, out, errOut)
	}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if !json.Valid([]byte(line)) {
			t.Errorf("stdout line is not JSON: %q", line)
		}
	}
}
