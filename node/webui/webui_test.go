package webui_test

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nova-node/nova-node/internal/localhttp"
	"github.com/nova-node/nova-node/node"
	"github.com/nova-node/nova-node/node/localapi"
	"github.com/nova-node/nova-node/testnet"
)

// get sends method path (below the web view's URL) to nd with the bearer
// token tok ("" for none) and body (JSON, or nil).
func get(t *testing.T, nd *node.Node, method, path, tok, body string) *http.Response {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, nd.WebURL()+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func token(t *testing.T, nd *node.Node) string {
	t.Helper()
	tok, err := node.ReadLocalToken(nd.Config().DataDir)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// The page loads without the token (it holds no data); every API request
// without the node's local token is refused with UNAUTHORIZED and where
// the token is.
func TestAPIRefusesRequestsWithoutTheToken(t *testing.T) {
	net := testnet.New(t, 1)
	nd := net.Nodes[0]
	if nd.WebURL() == "" {
		t.Fatal("WebURL is empty: the loopback HTTP listener is off")
	}
	for _, tc := range []struct{ method, path, body string }{
		{"GET", "api/stream", ""},
		{"POST", "api/send", `{"to":"a0","payload":{"text":"hi"}}`},
		{"POST", "api/tasks", `{"to":"a0","task":"t"}`},
		{"GET", "api/docs/plan", ""},
		{"POST", "api/docs/plan", `{"op":"set","path":"/x","value":1}`},
	} {
		for _, tok := range []string{"", "not-the-token"} {
			resp := get(t, nd, tc.method, tc.path, tok, tc.body)
			if resp.StatusCode != http.StatusUnauthorized {
				t.Errorf("%s %s with token %q: HTTP %d, want 401", tc.method, tc.path, tok, resp.StatusCode)
				continue
			}
			var body struct{ Code, Hint string }
			if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || body.Code != localhttp.CodeUnauthorized || !strings.Contains(body.Hint, node.LocalTokenFile) {
				t.Errorf("%s %s with token %q: body %+v (%v), want code %s and a hint naming %s", tc.method, tc.path, tok, body, err, localhttp.CodeUnauthorized, node.LocalTokenFile)
			}
		}
	}
	for _, path := range []string{"", "app.js", "app.css"} {
		resp := get(t, nd, "GET", path, "", "")
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s without a token: HTTP %d, want 200 (the page holds no data)", path, resp.StatusCode)
		}
		if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "frame-ancestors 'none'") {
			t.Errorf("GET %s: Content-Security-Policy %q", path, csp)
		}
	}
	// The rest of the listener keeps its token: /metrics is not public.
	req, _ := http.NewRequestWithContext(t.Context(), "GET", nd.MetricsURL(), nil)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("GET /metrics without a token: %v %v, want 401", resp, err)
	} else {
		resp.Body.Close()
	}
	// A page of another origin cannot drive the API, token or not.
	req, _ = http.NewRequestWithContext(t.Context(), "POST", nd.WebURL()+"api/send", strings.NewReader(`{"to":"a0"}`))
	req.Header.Set("Authorization", "Bearer "+token(t, nd))
	req.Header.Set("Origin", "http://evil.example")
	req.Header.Set("Content-Type", "application/json")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusForbidden {
		t.Errorf("cross-origin POST: %v %v, want 403", resp, err)
	} else {
		resp.Body.Close()
	}
}

// With the token, the stream starts with the node's events and a
// snapshot, and a refused send answers the CLI's code.
func TestAPIWithTheToken(t *testing.T) {
	net := testnet.New(t, 1)
	nd := net.Nodes[0]
	tok := token(t, nd)
	resp := get(t, nd, "GET", "api/stream", tok, "")
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("stream: HTTP %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	var names []string
	var snap struct {
		Self   struct{ PeerID string }
		Agents []struct{ Address string }
	}
	for snap.Self.PeerID == "" && sc.Scan() {
		line := sc.Text()
		if name, ok := strings.CutPrefix(line, "event: "); ok {
			names = append(names, name)
		}
		if data, ok := strings.CutPrefix(line, "data: "); ok && len(names) == 2 {
			if err := json.Unmarshal([]byte(data), &snap); err != nil {
				t.Fatal(err)
			}
		}
	}
	if strings.Join(names, ",") != "hello,snapshot" {
		t.Fatalf("stream starts with %v, want hello, snapshot", names)
	}
	if snap.Self.PeerID != nd.ID().String() || len(snap.Agents) != 1 || snap.Agents[0].Address != "a0@"+nd.ID().String() {
		t.Errorf("snapshot: %+v", snap)
	}

	resp = get(t, nd, "POST", "api/send", tok, `{"to":"nosuch","payload":{"text":"hi"}}`)
	var res localapi.SendResult
	if err := json.NewDecoder(resp.Body).Decode(&res); err != nil || res.Error == nil || res.Error.Code != "AGENT_NOT_FOUND" {
		t.Errorf("send to an unknown agent: %+v %v, want AGENT_NOT_FOUND", res, err)
	}
	resp = get(t, nd, "POST", "api/send", tok, `{"to":`)
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("malformed send: HTTP %d, want 400", resp.StatusCode)
	}
	resp = get(t, nd, "POST", "api/docs/plan", tok, `{"op":"set","path":"/x","value":{"n":1}}`)
	var view localapi.DocView
	if err := json.NewDecoder(resp.Body).Decode(&view); err != nil || string(view.Value) != `{"n":1}` {
		t.Errorf("set a document value: HTTP %d %+v %v", resp.StatusCode, view, err)
	}
	resp = get(t, nd, "POST", "api/docs/plan", tok, `{"op":"incr","path":"/x","by":1}`)
	var ae localapi.APIError
	if err := json.NewDecoder(resp.Body).Decode(&ae); err != nil || resp.StatusCode != http.StatusBadRequest || ae.Code != localapi.CodeDocTypeMismatch {
		t.Errorf("incr on a map: HTTP %d %+v %v, want %s", resp.StatusCode, ae, err, localapi.CodeDocTypeMismatch)
	}
}

// An open stream does not hold the node's Close: the listener ends it.
func TestOpenStreamDoesNotHoldClose(t *testing.T) {
	net := testnet.New(t, 1)
	nd := net.Nodes[0]
	resp := get(t, nd, "GET", "api/stream", token(t, nd), "")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("stream: HTTP %d", resp.StatusCode)
	}
	start := time.Now()
	if err := nd.Close(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("Close took %v with a page open", d)
	}
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		t.Logf("stream ended: %v", err)
	}
}
