package testnet_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	gonet "net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/nova-node/nova-node/internal/waitfor"
	"github.com/nova-node/nova-node/mcpbridge"
	"github.com/nova-node/nova-node/mcpbridge/mcptest"
	"github.com/nova-node/nova-node/node"
)

// faceSession is an MCP client session on n's HTTP face, in the protocol
// version of the TypeScript SDK 1.32 (stateful: logging/setLevel, pushed
// notifications).
func faceSession(t *testing.T, n *node.Node, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	url := strings.TrimSuffix(n.MetricsURL(), "/metrics") + "/mcp"
	c := mcp.NewClient(&mcp.Implementation{Name: "relay-test", Version: "1"}, opts)
	cs, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: localClient(t, n)}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// errorMeta is the node's error object in a result's _meta.
func errorMeta(t *testing.T, r *mcp.CallToolResult) map[string]any {
	t.Helper()
	e, _ := r.Meta[mcpbridge.MetaError].(map[string]any)
	if e == nil {
		t.Fatalf("isError result without _meta %q: %+v", mcpbridge.MetaError, r)
	}
	return e
}

// TestMCPToolErrorFitsOutputSchema: a failing tool that declares an output
// schema gives an isError result without structuredContent (MCP clients
// check it against the schema and would refuse the result), with the code
// and the source agent in _meta and in the text, on the hosting node's own
// face and across the mesh; a tool without an output schema keeps
// structuredContent.error as well.
func TestMCPToolErrorFitsOutputSchema(t *testing.T) {
	net := mcpNet(t, nil)
	waitTool(t, net.Nodes[0], "toolsmith_divide")
	for i, n := range []*node.Node{net.Nodes[1], net.Nodes[0]} {
		cs := faceSession(t, n, nil)
		tools := map[string]*mcp.Tool{}
		for tl, err := range cs.Tools(t.Context(), nil) {
			if err != nil {
				t.Fatal(err)
			}
			tools[tl.Name] = tl
		}
		if tools["toolsmith_divide"] == nil || tools["toolsmith_divide"].OutputSchema == nil {
			t.Fatalf("node %d: toolsmith_divide without its output schema: %+v", i, tools["toolsmith_divide"])
		}
		res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "toolsmith_divide", Arguments: map[string]any{"a": 1, "b": 0}})
		if err != nil || !res.IsError {
			t.Fatalf("node %d: divide by zero: %v %+v", i, err, res)
		}
		if res.StructuredContent != nil {
			t.Fatalf("node %d: isError result of a tool with an output schema carries structuredContent %v", i, res.StructuredContent)
		}
		e := errorMeta(t, res)
		if e["code"] != mcpbridge.CodeToolFailed || e["agent"] != "toolsmith" || !strings.Contains(text(res), "division by zero") || !strings.Contains(text(res), mcpbridge.CodeToolFailed) {
			t.Fatalf("node %d: error does not name code, agent and cause: %v %q", i, e, text(res))
		}
		res, err = cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "toolsmith_fail"})
		if err != nil || !res.IsError {
			t.Fatalf("node %d: fail: %v %+v", i, err, res)
		}
		sc, _ := json.Marshal(res.StructuredContent)
		if errorMeta(t, res)["code"] != mcpbridge.CodeToolFailed || !strings.Contains(string(sc), `"agent":"toolsmith"`) {
			t.Fatalf("node %d: tool without output schema: structuredContent %s", i, sc)
		}
	}
}

// TestMCPLargeResultAcrossNodes: a 5 MB result (sent as text and again as
// structured content, like a file read) crosses from the hosting node to
// the calling node's face; a result too large for a message between nodes
// fails only its own call, with RESULT_TOO_LARGE, while a call running at
// the same time on the same node-to-node session completes.
func TestMCPLargeResultAcrossNodes(t *testing.T) {
	net := mcpNet(t, nil)
	a := net.Nodes[0]
	waitTool(t, a, "toolsmith_big")
	cs := faceSession(t, a, nil)
	const size = 5_000_000
	start := time.Now()
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "toolsmith_big", Arguments: map[string]any{"bytes": size}})
	if err != nil {
		t.Fatalf("5 MB result: %v", err)
	}
	if res.IsError || len(text(res)) < size { // the go-sdk backend sends the structured output as JSON text
		t.Fatalf("5 MB result: isError %v, %d bytes of text", res.IsError, len(text(res)))
	}
	sc, _ := res.StructuredContent.(map[string]any)
	if s, _ := sc["text"].(string); len(s) != size {
		t.Fatalf("5 MB result: structured content of %d bytes", len(s))
	}

	t.Logf("5 MB result across nodes in %v", time.Since(start))
	// The session that carried it is retired with its call: the memory
	// its stream held for the line goes back.
	waitfor.Eventually(t, 10*time.Second, func() error {
		var mem int64
		_ = a.Host().Network().ResourceManager().ViewService(mcpbridge.ServiceName, func(s network.ServiceScope) error {
			mem = s.Stat().Memory
			return nil
		})
		if mem > 1<<20 {
			return fmt.Errorf("node A's MCP streams hold %d bytes after the call", mem)
		}
		return nil
	})

	// Too large (7 MB twice), with a call beside it on the same session.
	var wg sync.WaitGroup
	var sideErr error
	wg.Go(func() {
		for range 20 {
			r, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "toolsmith_say", Arguments: map[string]any{"text": "beside"}})
			if err != nil || r.IsError || text(r) != "beside" {
				sideErr = fmt.Errorf("call beside the oversized one: %v %+v", err, r)
				return
			}
		}
	})
	res, err = cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "toolsmith_big", Arguments: map[string]any{"bytes": 7_000_000}})
	wg.Wait()
	if sideErr != nil {
		t.Fatal(sideErr)
	}
	if err != nil || !res.IsError || errorMeta(t, res)["code"] != mcpbridge.CodeResultTooLarge || !strings.Contains(text(res), "MiB") {
		t.Fatalf("oversized result: %v %+v", err, res)
	}
	res, err = cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "toolsmith_say", Arguments: map[string]any{"text": "after"}})
	if err != nil || res.IsError || text(res) != "after" {
		t.Fatalf("call after the oversized one: %v %+v", err, res)
	}
}

// TestMCPProgressAndLogsRelayed: a client that sends a progress token and
// sets a logging level gets the backend's notifications/progress (with its
// own token) and notifications/message (logger prefixed with the agent)
// during a call, every one of them (each is relayed as it is read, ahead
// of the result), on the hosting node's face and across the mesh; a client
// at level "error" gets no info messages.
func TestMCPProgressAndLogsRelayed(t *testing.T) {
	net := mcpNet(t, nil)
	waitTool(t, net.Nodes[0], "toolsmith_steps")
	for i, n := range []*node.Node{net.Nodes[1], net.Nodes[0]} {
		var mu sync.Mutex
		var progress []*mcp.ProgressNotificationParams
		var logs []*mcp.LoggingMessageParams
		cs := faceSession(t, n, &mcp.ClientOptions{
			ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
				mu.Lock()
				progress = append(progress, req.Params)
				mu.Unlock()
			},
			LoggingMessageHandler: func(_ context.Context, req *mcp.LoggingMessageRequest) {
				mu.Lock()
				logs = append(logs, req.Params)
				mu.Unlock()
			},
		})
		if err := cs.SetLoggingLevel(t.Context(), &mcp.SetLoggingLevelParams{Level: "info"}); err != nil {
			t.Fatal(err)
		}
		params := &mcp.CallToolParams{Name: "toolsmith_steps", Arguments: map[string]any{"steps": 5}}
		params.SetProgressToken("tok-" + fmt.Sprint(i))
		res, err := cs.CallTool(t.Context(), params)
		if err != nil || res.IsError {
			t.Fatalf("node %d: steps: %v %+v", i, err, res)
		}
		waitfor.Eventually(t, 10*time.Second, func() error {
			mu.Lock()
			defer mu.Unlock()
			if len(progress) < 5 || len(logs) < 5 {
				return fmt.Errorf("node %d: %d progress notifications, %d log messages", i, len(progress), len(logs))
			}
			return nil
		})
		mu.Lock()
		for _, p := range progress {
			if p.ProgressToken != "tok-"+fmt.Sprint(i) || p.Total != 5 || p.Progress < 1 || p.Progress > 5 {
				t.Errorf("node %d: progress %+v", i, p)
			}
		}
		for _, l := range logs {
			if l.Logger != "toolsmith/mcptest" || l.Level != "info" || !strings.HasPrefix(fmt.Sprint(l.Data), "step ") {
				t.Errorf("node %d: log message %+v", i, l)
			}
		}
		progress, logs = nil, nil
		mu.Unlock()

		// At level "error", no info message comes.
		if err := cs.SetLoggingLevel(t.Context(), &mcp.SetLoggingLevelParams{Level: "error"}); err != nil {
			t.Fatal(err)
		}
		if _, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "toolsmith_steps", Arguments: map[string]any{"steps": 2}}); err != nil {
			t.Fatal(err)
		}
		if err := cs.Ping(t.Context(), nil); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		if len(logs) != 0 || len(progress) != 0 {
			t.Errorf("node %d: at level error, without a progress token: %d log messages, %d progress", i, len(logs), len(progress))
		}
		mu.Unlock()
	}
}

// TestMCPResourceTemplatesAcrossNodes: a resource template of an MCP
// server behind an agent on node B is listed on node A's face, and a URI
// it matches is read through it; a URI no template or resource matches
// is RESOURCE_NOT_FOUND.
func TestMCPResourceTemplatesAcrossNodes(t *testing.T) {
	net := mcpNet(t, nil)
	for i, n := range []*node.Node{net.Nodes[1], net.Nodes[0]} {
		cs := faceSession(t, n, nil)
		waitfor.Eventually(t, 15*time.Second, func() error {
			for tm, err := range cs.ResourceTemplates(t.Context(), nil) {
				if err != nil {
					return err
				}
				if tm.URITemplate == mcptest.EchoTemplate {
					return nil
				}
			}
			return fmt.Errorf("node %d: template %s not listed", i, mcptest.EchoTemplate)
		})
		res, err := cs.ReadResource(t.Context(), &mcp.ReadResourceParams{URI: "nova://mcptest/echo/hello"})
		if err != nil || len(res.Contents) != 1 || res.Contents[0].Text != "echo: hello" {
			t.Fatalf("node %d: read through the template: %v %+v", i, err, res)
		}
		_, err = cs.ReadResource(t.Context(), &mcp.ReadResourceParams{URI: "nova://nowhere/x"})
		if mcpbridge.CodeOf(err) != mcpbridge.CodeResourceNotFound {
			t.Fatalf("node %d: unknown URI: %v", i, err)
		}
	}
}

// TestMCPCompletionAcrossNodes: completion/complete of a prompt argument
// (by wire name) and of a resource template's variable reaches the MCP
// server behind an agent on node B from node A's face, and from B's own.
func TestMCPCompletionAcrossNodes(t *testing.T) {
	net := mcpNet(t, nil)
	waitTool(t, net.Nodes[0], "toolsmith_say")
	for i, n := range []*node.Node{net.Nodes[1], net.Nodes[0]} {
		cs := faceSession(t, n, nil)
		if cs.InitializeResult().Capabilities.Completions == nil {
			t.Fatalf("node %d: the face does not declare completions", i)
		}
		res, err := cs.Complete(t.Context(), &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/prompt", Name: "toolsmith_greet"}, Argument: mcp.CompleteParamsArgument{Name: "name", Value: "A"}})
		if err != nil || !slices.Equal(res.Completion.Values, []string{"Ada", "Alan"}) {
			t.Fatalf("node %d: prompt completion: %v %+v", i, err, res)
		}
		waitfor.Eventually(t, 15*time.Second, func() error {
			res, err = cs.Complete(t.Context(), &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/resource", URI: mcptest.EchoTemplate}, Argument: mcp.CompleteParamsArgument{Name: "word", Value: "hel"}})
			if err != nil || !slices.Equal(res.Completion.Values, []string{"hello", "help"}) {
				return fmt.Errorf("node %d: template completion: %v %+v", i, err, res)
			}
			return nil
		})
		_, err = cs.Complete(t.Context(), &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/prompt", Name: "nobody_greet"}, Argument: mcp.CompleteParamsArgument{Name: "name", Value: ""}})
		if mcpbridge.CodeOf(err) != mcpbridge.CodePromptNotFound {
			t.Fatalf("node %d: completion of an unknown prompt: %v", i, err)
		}
	}
}

// TestMCPResourceSubscriptionAcrossNodes: a client of a face subscribes to
// a resource of a backend, on the hosting node and across the mesh, over
// the HTTP face and the byte-stream face of `nova-node mcp`, and gets
// notifications/resources/updated when the backend reports a change; after
// unsubscribing it gets none, not even once it subscribed again: the
// update of a touch it saw the result of before subscribing never follows
// (mcpbridge's TestUpdateBeforeSubscribeNotDelivered drives that order).
func TestMCPResourceSubscriptionAcrossNodes(t *testing.T) {
	net := mcpNet(t, nil)
	waitTool(t, net.Nodes[0], "toolsmith_touch")
	for i, n := range []*node.Node{net.Nodes[1], net.Nodes[0]} {
		for _, face := range []string{"http", "stdio"} {
			updated := make(chan string, 16)
			opts := &mcp.ClientOptions{ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
				updated <- req.Params.URI
			}}
			var cs *mcp.ClientSession
			if face == "http" {
				cs = faceSession(t, n, opts)
			} else {
				cs = connSession(t, n, opts)
			}
			if caps := cs.InitializeResult().Capabilities; caps.Resources == nil || !caps.Resources.Subscribe {
				t.Fatalf("node %d %s: the face does not declare resources.subscribe: %+v", i, face, caps.Resources)
			}
			touch := func() {
				if r, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "toolsmith_touch"}); err != nil || r.IsError {
					t.Fatalf("node %d %s: touch: %v %+v", i, face, err, r)
				}
			}
			wait := func() {
				select {
				case uri := <-updated:
					if uri != mcptest.ReadmeURI {
						t.Fatalf("node %d %s: update of %q, want %q", i, face, uri, mcptest.ReadmeURI)
					}
				case <-time.After(15 * time.Second):
					t.Fatalf("node %d %s: no notifications/resources/updated", i, face)
				}
			}
			if err := cs.Subscribe(t.Context(), &mcp.SubscribeParams{URI: mcptest.ReadmeURI}); err != nil {
				t.Fatalf("node %d %s: subscribe: %v", i, face, err)
			}
			touch()
			wait()
			if err := cs.Unsubscribe(t.Context(), &mcp.UnsubscribeParams{URI: mcptest.ReadmeURI}); err != nil {
				t.Fatalf("node %d %s: unsubscribe: %v", i, face, err)
			}
			touch() // no notification: the next one is from after subscribing again
			if err := cs.Subscribe(t.Context(), &mcp.SubscribeParams{URI: mcptest.ReadmeURI}); err != nil {
				t.Fatalf("node %d %s: subscribe again: %v", i, face, err)
			}
			touch()
			wait()
			if len(updated) != 0 {
				t.Fatalf("node %d %s: %d notifications more than the subscriptions asked for", i, face, len(updated))
			}
			err := cs.Subscribe(t.Context(), &mcp.SubscribeParams{URI: "nova://nowhere"})
			if mcpbridge.CodeOf(err) != mcpbridge.CodeResourceNotFound {
				t.Fatalf("node %d %s: subscribe to an unknown URI: %v", i, face, err)
			}
			_ = cs.Close()
		}
	}
}

// connSession is an MCP client session on n's byte-stream face, the one
// `nova-node mcp` relays stdio to.
func connSession(t *testing.T, n *node.Node, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	a, b := gonet.Pipe()
	go func() { _ = n.MCP().ServeConn(t.Context(), b) }()
	c := mcp.NewClient(&mcp.Implementation{Name: "relay-test", Version: "1"}, opts)
	cs, err := c.Connect(t.Context(), &mcp.IOTransport{Reader: a, Writer: a}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close(); _ = a.Close() })
	return cs
}

// TestMCPSamplingAndElicitationRelayed: a backend's sampling and
// elicitation requests during a tool call reach the client that made the
// call, on the hosting node's face and across the mesh, and its answers
// reach the backend; a call with no client to ask (the Go API, as the CLI
// uses) gets an isError result naming NO_CALLER.
func TestMCPSamplingAndElicitationRelayed(t *testing.T) {
	net := mcpNet(t, nil)
	waitTool(t, net.Nodes[0], "toolsmith_ask")
	for i, n := range []*node.Node{net.Nodes[1], net.Nodes[0]} {
		cs := faceSession(t, n, &mcp.ClientOptions{
			CreateMessageHandler: func(_ context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
				q, _ := req.Params.Messages[0].Content.(*mcp.TextContent)
				return &mcp.CreateMessageResult{Model: "test", Role: "assistant", Content: &mcp.TextContent{Text: "re " + q.Text}}, nil
			},
			ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
				return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"answer": "yes to " + req.Params.Message}}, nil
			},
		})
		res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "toolsmith_ask", Arguments: map[string]any{"text": "q"}})
		if err != nil || res.IsError || text(res) != "model: re q; user: accept yes to q" {
			t.Fatalf("node %d: ask: %v %q", i, err, text(res))
		}
	}
	res, err := net.Nodes[0].MCP().CallTool(t.Context(), "toolsmith.ask", json.RawMessage(`{"text":"q"}`))
	if err != nil || !res.IsError || !strings.Contains(text(res), mcpbridge.CodeNoCaller) {
		t.Fatalf("ask with nobody to ask: %v %q", err, text(res))
	}
}

// TestMCPCancelAcrossNodes: a call across the mesh whose context ends is
// cancelled on the node hosting the tool, down to the backend (the tool
// "wait" returns only when its call is cancelled), whether the caller is
// a node (its own tools/call on the session) or a plain go-sdk client on a
// /nova/mcp/1.0.0 stream, as an older node speaks it; the session carries
// the next call.
func TestMCPCancelAcrossNodes(t *testing.T) {
	net := mcpNet(t, nil)
	a, b := net.Nodes[0], net.Nodes[1]
	waitTool(t, a, "toolsmith_wait")
	ended := func(want int64) {
		t.Helper()
		waitfor.Eventually(t, 20*time.Second, func() error {
			if n := b.MCP().Metrics().ToolInvocationsByTool["toolsmith.wait"]; n < want {
				return fmt.Errorf("%d calls of toolsmith.wait ended on the hosting node, want %d", n, want)
			}
			return nil
		})
	}

	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	_, err := a.MCP().CallTool(ctx, "toolsmith.wait", nil)
	cancel()
	if err == nil || !strings.Contains(err.Error(), context.DeadlineExceeded.Error()) {
		t.Fatalf("call past its deadline: %v, want an error naming the deadline", err)
	}
	ended(1)
	if res, err := a.MCP().CallTool(t.Context(), "toolsmith.say", json.RawMessage(`{"text":"next"}`)); err != nil || text(res) != "next" {
		t.Fatalf("call after the cancelled one: %v %+v", err, res)
	}

	s, err := a.Host().NewStream(t.Context(), b.ID(), mcpbridge.ProtocolID)
	if err != nil {
		t.Fatal(err)
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "plain", Version: "1"}, nil)
	cs, err := c.Connect(t.Context(), &mcp.IOTransport{Reader: s, Writer: s}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	caller := mcp.Meta{mcpbridge.MetaCaller: "a0@" + a.ID().String()}
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Meta: caller, Name: "toolsmith.say", Arguments: map[string]any{"text": "plain"}})
	if err != nil || res.IsError || text(res) != "plain" {
		t.Fatalf("plain client: %v %+v", err, res)
	}
	_, err = cs.CallTool(t.Context(), &mcp.CallToolParams{Meta: caller, Name: "toolsmith.nope"})
	var je *jsonrpc.Error
	if !errors.As(err, &je) || je.Code != jsonrpc.CodeInvalidParams {
		t.Fatalf("plain client, unknown tool: %v, want the SDK's invalid-params error", err)
	}
	ctx, cancel = context.WithTimeout(t.Context(), 200*time.Millisecond)
	_, err = cs.CallTool(ctx, &mcp.CallToolParams{Meta: caller, Name: "toolsmith.wait", Arguments: map[string]any{}})
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("plain client, call past its deadline: %v", err)
	}
	ended(2)
}
