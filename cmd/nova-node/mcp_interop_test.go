package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	gonet "net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

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

// TestInteropMCPServerEverything runs the real reference server
// @modelcontextprotocol/server-everything (pinned in
// mcpbridge/interop/package-lock.json) behind agent "everything" on node B
// and uses it from node A's byte-stream face (the one `nova-node mcp`
// relays): progress of a long-running operation, a log message sent during
// a call, a resource subscription and its update, and a 3 MB result.
func TestInteropMCPServerEverything(t *testing.T) {
	dir, _ := filepath.Abs("../../mcpbridge/interop")
	nodeBin := filepath.Join(dir, "node_modules", "node", "bin", "node")
	script := filepath.Join(dir, "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js")
	for _, f := range []string{nodeBin, script} {
		if _, err := os.Stat(f); err != nil {
			if os.Getenv("NOVA_INTEROP") == "1" {
				t.Fatalf("NOVA_INTEROP=1 but %s is missing: run npm ci --prefix mcpbridge/interop", f)
			}
			t.Skip("npm packages not installed: npm ci --prefix mcpbridge/interop")
		}
	}
	a := startNode(t, 0, t.TempDir(), node.DefaultAgent("alice"))
	every := node.AgentConfig{Name: "everything", Capabilities: []node.CapabilityConfig{{ID: "demo"}},
		MCPServers: map[string]mcpbridge.ServerConfig{"everything": {Command: nodeBin, Args: []string{script, "stdio"}}}}
	b := startNode(t, 1, t.TempDir(), every)
	if _, err := a.Connect(t.Context(), b.Addrs()[0].String()); err != nil {
		t.Fatal(err)
	}
	waitfor.Eventually(t, testnetWait, func() error {
		_, err := a.MCP().CallTool(t.Context(), "everything.echo", json.RawMessage(`{"message":"x"}`))
		return err
	})

	var mu sync.Mutex
	var progress []float64
	var logs []string
	updated := make(chan string, 8)
	c := mcp.NewClient(&mcp.Implementation{Name: "everything-test", Version: "1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			mu.Lock()
			progress = append(progress, req.Params.Progress)
			mu.Unlock()
		},
		LoggingMessageHandler: func(_ context.Context, req *mcp.LoggingMessageRequest) {
			mu.Lock()
			logs = append(logs, fmt.Sprint(req.Params.Data))
			mu.Unlock()
		},
		ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) { updated <- req.Params.URI },
	})
	cli, srv := gonet.Pipe()
	go func() { _ = a.MCP().ServeConn(t.Context(), srv) }()
	wire := &wireLog{r: cli}
	cs, err := c.Connect(t.Context(), &mcp.IOTransport{Reader: wire, Writer: cli}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if err := cs.SetLoggingLevel(t.Context(), &mcp.SetLoggingLevelParams{Level: "debug"}); err != nil {
		t.Fatal(err)
	}

	// Progress: three steps, relayed before the result. The client hands
	// notifications to its handlers on a queue of their own, apart from
	// responses, so a call can return before its last progress reached the
	// handler: the order is checked on the wire, the values at the handler.
	params := &mcp.CallToolParams{Name: "everything_trigger-long-running-operation", Arguments: map[string]any{"duration": 0.3, "steps": 3}}
	params.SetProgressToken("p1")
	if r, err := cs.CallTool(t.Context(), params); err != nil || r.IsError {
		t.Fatalf("long-running operation: %v %+v", err, r)
	}
	waitfor.Eventually(t, testnetWait, func() error {
		mu.Lock()
		defer mu.Unlock()
		if len(progress) != 3 || progress[2] != 3 {
			return fmt.Errorf("progress %v, want 1, 2, 3", progress)
		}
		return nil
	})
	last, result := wire.index(`"progress":3`), wire.index("Long running operation completed")
	if last < 0 || result < 0 || last > result {
		t.Errorf("on the wire, the last progress at byte %d and the result at byte %d: want the progress first", last, result)
	}

	// Logging: the tool sends one message at once, during the call.
	if r, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "everything_toggle-simulated-logging", Arguments: map[string]any{}}); err != nil || r.IsError {
		t.Fatalf("toggle logging: %v %+v", err, r)
	}
	waitfor.Eventually(t, testnetWait, func() error {
		mu.Lock()
		defer mu.Unlock()
		if len(logs) == 0 {
			return fmt.Errorf("no log message relayed")
		}
		return nil
	})

	// Subscription: the server reports an update of every subscribed URI
	// at once when its updates are toggled on.
	var uri string
	for r, err := range cs.Resources(t.Context(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(r.URI, "demo://resource/static/document/") {
			uri = r.URI
			break
		}
	}
	if uri == "" {
		t.Fatal("no demo://resource/static/document/ resource on the face")
	}
	if err := cs.Subscribe(t.Context(), &mcp.SubscribeParams{URI: uri}); err != nil {
		t.Fatalf("subscribe %s: %v", uri, err)
	}
	if r, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "everything_toggle-subscriber-updates", Arguments: map[string]any{}}); err != nil || r.IsError {
		t.Fatalf("toggle subscriber updates: %v %+v", err, r)
	}
	select {
	case got := <-updated:
		if got != uri {
			t.Fatalf("update of %s, want %s", got, uri)
		}
	case <-time.After(testnetWait):
		t.Fatalf("no notifications/resources/updated for %s", uri)
	}

	// A 3 MB result crosses the mesh.
	big := strings.Repeat("0123456789abcdef", 3<<20/16)
	r, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "everything_echo", Arguments: map[string]any{"message": big}})
	if err != nil || r.IsError || len(r.Content) == 0 {
		t.Fatalf("echo of 3 MB: %v %+v", err, r != nil && r.IsError)
	}
	if txt, _ := r.Content[0].(*mcp.TextContent); txt == nil || !strings.HasSuffix(txt.Text, big) {
		t.Fatal("echo of 3 MB came back changed")
	}
}

// wireLog keeps a copy of every byte read through it, for checks on the
// order of messages as they came.
type wireLog struct {
	r   io.ReadCloser
	mu  sync.Mutex
	buf bytes.Buffer
}

func (w *wireLog) Read(p []byte) (int, error) {
	n, err := w.r.Read(p)
	w.mu.Lock()
	w.buf.Write(p[:n])
	w.mu.Unlock()
	return n, err
}

func (w *wireLog) Close() error { return w.r.Close() }

// index is the offset of the first occurrence of s read so far, or -1.
func (w *wireLog) index(s string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return bytes.Index(w.buf.Bytes(), []byte(s))
}
