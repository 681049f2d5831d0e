package testnet_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/nova-node/nova-node/envelope"
	"github.com/nova-node/nova-node/node"
	"github.com/nova-node/nova-node/protocol/a2ahttp"
	"github.com/nova-node/nova-node/testnet"
)

// webRequest is one request a web page (or a plain client) could send.
type webRequest struct {
	name         string
	method, path string
	host         string // Host header; "" keeps the URL's
	origin       string
	contentType  string
	body         string
	token        string // sent as a bearer token; "" sends none
	want         int
}

func (wr webRequest) do(t *testing.T, base string) (int, string) {
	t.Helper()
	var body io.Reader
	if wr.body != "" {
		body = strings.NewReader(wr.body)
	}
	req, err := http.NewRequestWithContext(t.Context(), wr.method, base+wr.path, body)
	if err != nil {
		t.Fatal(err)
	}
	if wr.host != "" {
		req.Host = wr.host
	}
	if wr.origin != "" {
		req.Header.Set("Origin", wr.origin)
	}
	if wr.contentType != "" {
		req.Header.Set("Content-Type", wr.contentType)
	}
	req.Header.Set("Accept", "application/json, text/event-stream")
	if wr.token != "" {
		req.Header.Set("Authorization", "Bearer "+wr.token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s: %v", wr.name, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(raw)
}

// checkRefusal runs wr and checks its status and, for a refusal, the JSON
// error.
func checkRefusal(t *testing.T, base string, wr webRequest) {
	t.Helper()
	code, raw := wr.do(t, base)
	if code != wr.want {
		t.Errorf("%s: status %d, want %d: %s", wr.name, code, wr.want, raw)
		return
	}
	if code >= 400 {
		var e struct{ Error string }
		if err := json.Unmarshal([]byte(raw), &e); err != nil || e.Error == "" {
			t.Errorf("%s: refusal %q is not a JSON error", wr.name, raw)
		}
	}
}

// TestWebPagesCannotDriveTheNode: a page in a browser on the node's machine
// reaches its loopback listeners (the A2A gateway; /metrics, /healthz and
// /mcp) with a foreign Origin, a form or text/plain body, or (by DNS
// rebinding) a foreign Host: each is refused before it reaches the mesh,
// while plain clients (no Origin, the listener's own Host) are served.
func TestWebPagesCannotDriveTheNode(t *testing.T) {
	net := testnet.New(t, 1, testnet.WithConfig(func(i int, c *node.Config) {
		c.A2A.Listen = "127.0.0.1:0"
		c.MetricsListen = "127.0.0.1:0"
	}))
	n := net.Nodes[0]
	var delivered atomic.Int32
	card := node.AgentConfig{Name: "oracle", Capabilities: []node.CapabilityConfig{{ID: "answer"}}}.Card()
	if _, err := n.RegisterAgent(card, func(ctx context.Context, env *envelope.Envelope) (any, error) {
		delivered.Add(1)
		return a2ahttp.Answer{Text: "42"}, nil
	}); err != nil {
		t.Fatal(err)
	}

	tok := localToken(t, n)
	a2aBase := n.A2AURL()
	u, err := url.Parse(a2aBase)
	if err != nil || a2aBase == "" {
		t.Fatalf("A2A URL %q: %v", a2aBase, err)
	}
	port := u.Port()
	send := `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"kind":"message","messageId":"m1","role":"user","parts":[{"kind":"text","text":"hi"}]}}}`
	for _, wr := range []webRequest{
		{name: "simple CORS POST", method: "POST", path: "/a2a/oracle/", origin: "http://evil.example", contentType: "text/plain", body: send, want: 403},
		{name: "foreign Origin", method: "POST", path: "/a2a/oracle/", origin: "http://evil.example", contentType: "application/json", body: send, want: 403},
		{name: "loopback Origin of another port", method: "POST", path: "/a2a/oracle/", origin: "http://127.0.0.1:1", contentType: "application/json", body: send, want: 403},
		{name: "DNS rebinding", method: "POST", path: "/a2a/oracle/", host: "evil.example:" + port, origin: "http://evil.example:" + port, contentType: "application/json", body: send, want: 421},
		{name: "DNS rebinding without Origin", method: "POST", path: "/a2a/oracle/", host: "evil.example:" + port, contentType: "application/json", body: send, want: 421},
		{name: "text/plain body", method: "POST", path: "/a2a/oracle/", contentType: "text/plain", body: send, want: 415},
		{name: "form body", method: "POST", path: "/a2a/", contentType: "application/x-www-form-urlencoded", body: send, want: 415},
		{name: "rebound card", method: "GET", path: "/a2a/oracle/.well-known/agent-card.json", host: "evil.example:" + port, want: 421},
	} {
		wr.token = tok // the owner's token does not lift the guard
		checkRefusal(t, a2aBase, wr)
	}
	if d := delivered.Load(); d != 0 {
		t.Fatalf("%d refused requests reached the agent", d)
	}
	for _, wr := range []webRequest{
		{name: "plain send", method: "POST", path: "/a2a/oracle/", contentType: "application/json", body: send, want: 200},
		{name: "localhost Host, own Origin", method: "POST", path: "/a2a/oracle/", host: "localhost:" + port, origin: "http://localhost:" + port, contentType: "application/json; charset=utf-8", body: send, want: 200},
		{name: "card from any origin", method: "GET", path: "/.well-known/agent-card.json", origin: "http://evil.example", want: 200},
	} {
		wr.token = tok
		checkRefusal(t, a2aBase, wr)
	}
	if d := delivered.Load(); d != 2 {
		t.Fatalf("%d sends delivered, want 2", d)
	}
	res := a2ahttp.NewClient(a2ahttp.WithBearerToken(tok)).Send(t.Context(), a2aBase+"/a2a/oracle/", a2ahttp.Message{Text: "life"})
	if !res.Success || res.ResponseText != "42" {
		t.Fatalf("A2A client through the guard: %+v", res)
	}

	mBase := strings.TrimSuffix(n.MetricsURL(), "/metrics")
	mu, _ := url.Parse(mBase)
	mport := mu.Port()
	initialize := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"page","version":"1"}}}`
	for _, wr := range []webRequest{
		{name: "metrics, foreign Origin", method: "GET", path: "/metrics", origin: "http://evil.example", want: 403},
		{name: "metrics, rebound", method: "GET", path: "/metrics", host: "evil.example:" + mport, want: 421},
		{name: "healthz, rebound", method: "GET", path: "/healthz", host: "evil.example:" + mport, want: 421},
		{name: "mcp, simple CORS POST", method: "POST", path: "/mcp", origin: "http://evil.example", contentType: "text/plain", body: initialize, want: 403},
		{name: "mcp, rebound", method: "POST", path: "/mcp", host: "evil.example:" + mport, contentType: "application/json", body: initialize, want: 421},
		{name: "mcp, text/plain", method: "POST", path: "/mcp", contentType: "text/plain", body: initialize, want: 415},
		{name: "metrics, plain", method: "GET", path: "/metrics", want: 200},
		{name: "metrics, own Origin", method: "GET", path: "/metrics", origin: "http://127.0.0.1:" + mport, want: 200},
		{name: "healthz, [::1] Host", method: "GET", path: "/healthz", host: "[::1]:" + mport, want: 200},
	} {
		wr.token = tok
		checkRefusal(t, mBase, wr)
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	cs, err := client.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: mBase + "/mcp", HTTPClient: localClient(t, n)}, nil)
	if err != nil {
		t.Fatalf("MCP client through the guard: %v", err)
	}
	if _, err := cs.ListTools(t.Context(), nil); err != nil {
		t.Fatalf("MCP list tools: %v", err)
	}
	cs.Close()
}
