package node_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/nova-node/nova-node/internal/localhttp"
	"github.com/nova-node/nova-node/node"
)

// getLocal GETs a local face of n with its local token.
func getLocal(t *testing.T, n *node.Node, url string) *http.Response {
	t.Helper()
	tok, err := node.ReadLocalToken(n.Config().DataDir)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// from127002 is an HTTP client whose connections come from 127.0.0.2: a
// loopback address that is not 127.0.0.1 earns no trust.
func from127002(t *testing.T) *http.Client {
	if runtime.GOOS != "linux" {
		return nil // only Linux routes all of 127.0.0.0/8 to lo
	}
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}
	return &http.Client{Transport: &http.Transport{DialContext: d.DialContext}}
}

// TestLocalFacesNeedTheLocalToken: every request to /metrics, /healthz,
// /mcp and the loopback A2A gateway (cards, /healthz and JSON-RPC) needs
// the data dir's local token, or a configured a2a token on the gateway:
// without one, with a wrong one, and from another loopback address it
// is 401 with the UNAUTHORIZED code and where the token is.
func TestLocalFacesNeedTheLocalToken(t *testing.T) {
	const a2aToken = "nova_configured-token-for-a-remote-client"
	cfg := node.DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.Listen = []string{"/ip4/127.0.0.1/tcp/0"}
	cfg.MDNS = false
	cfg.A2A.Listen = "127.0.0.1:0"
	cfg.A2A.TokenHashes = []string{localhttp.HashToken(a2aToken)}
	n, err := node.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	if err := n.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(cfg.DataDir, node.LocalTokenFile)
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if runtime.GOOS != "windows" && st.Mode().Perm() != 0o600 {
		t.Errorf("%s has mode %04o, want 0600", path, st.Mode().Perm())
	}
	tok, err := node.ReadLocalToken(cfg.DataDir)
	if err != nil || len(tok) < 32 {
		t.Fatalf("local token %q: %v", tok, err)
	}

	mBase := strings.TrimSuffix(n.MetricsURL(), "/metrics")
	aBase := n.A2AURL()
	const initialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	const send = `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"kind":"message","messageId":"m1","role":"user","parts":[{"kind":"text","text":"hi"}]}}}`
	type req struct {
		name, method, url, body string
		want                    int // with the local token
	}
	reqs := []req{
		{"metrics", "GET", mBase + "/metrics", "", 200},
		{"metrics healthz", "GET", mBase + "/healthz", "", 200},
		{"mcp", "POST", mBase + "/mcp", initialize, 200},
		{"a2a node card", "GET", aBase + "/.well-known/agent-card.json", "", 200},
		{"a2a healthz", "GET", aBase + "/healthz", "", 200},
		{"a2a rpc", "POST", aBase + "/a2a/", send, 0}, // any answer but 401
	}
	do := func(c *http.Client, r req, auth string) *http.Response {
		t.Helper()
		var body io.Reader
		if r.body != "" {
			body = strings.NewReader(r.body)
		}
		hr, _ := http.NewRequestWithContext(t.Context(), r.method, r.url, body)
		if r.body != "" {
			hr.Header.Set("Content-Type", "application/json")
			hr.Header.Set("Accept", "application/json, text/event-stream")
		}
		if auth != "" {
			hr.Header.Set("Authorization", auth)
		}
		resp, err := c.Do(hr)
		if err != nil {
			t.Fatalf("%s: %v", r.name, err)
		}
		return resp
	}
	for _, r := range reqs {
		for _, bad := range []struct{ name, auth string }{
			{"no token", ""}, {"wrong token", "Bearer " + strings.Repeat("x", len(tok))},
			{"token prefix", "Bearer " + tok[:len(tok)-1]}, {"basic auth", "Basic " + tok},
		} {
			resp := do(http.DefaultClient, r, bad.auth)
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			var e struct{ Error, Code, Hint string }
			if resp.StatusCode != http.StatusUnauthorized || json.Unmarshal(b, &e) != nil || e.Code != localhttp.CodeUnauthorized ||
				!strings.Contains(e.Hint, path) || !strings.Contains(e.Hint, "readable only by the node's owner") {
				t.Errorf("%s, %s: %d %s, want 401 UNAUTHORIZED naming %s", r.name, bad.name, resp.StatusCode, b, path)
			}
			if !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer ") {
				t.Errorf("%s, %s: WWW-Authenticate %q", r.name, bad.name, resp.Header.Get("WWW-Authenticate"))
			}
		}
		if c := from127002(t); c != nil {
			resp := do(c, r, "")
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized {
				t.Errorf("%s from 127.0.0.2 without a token: %d, want 401", r.name, resp.StatusCode)
			}
			resp = do(c, r, "Bearer "+tok)
			resp.Body.Close()
			if resp.StatusCode == http.StatusUnauthorized {
				t.Errorf("%s from 127.0.0.2 with the token: 401", r.name)
			}
		}
		resp := do(http.DefaultClient, r, "Bearer "+tok)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if (r.want != 0 && resp.StatusCode != r.want) || resp.StatusCode == http.StatusUnauthorized {
			t.Errorf("%s with the local token: %d %s", r.name, resp.StatusCode, b)
		}
		if strings.HasPrefix(r.name, "a2a") {
			resp := do(http.DefaultClient, r, "Bearer "+a2aToken)
			resp.Body.Close()
			if resp.StatusCode == http.StatusUnauthorized {
				t.Errorf("%s with a configured a2a token: 401", r.name)
			}
		} else {
			resp := do(http.DefaultClient, r, "Bearer "+a2aToken)
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized {
				t.Errorf("%s with an a2a token: %d, want 401 (a2a tokens are for the gateway)", r.name, resp.StatusCode)
			}
		}
	}
	// The Host and Origin checks still come first.
	hr, _ := http.NewRequestWithContext(t.Context(), "GET", mBase+"/metrics", nil)
	hr.Host = "evil.example"
	hr.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(hr)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMisdirectedRequest {
		t.Errorf("rebound Host with the token: %d, want 421", resp.StatusCode)
	}
}

// TestLocalTokenKeptAcrossRestarts: the token file is made once; a node
// started again on the data dir keeps it.
func TestLocalTokenKeptAcrossRestarts(t *testing.T) {
	cfg := node.DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.Listen = []string{"/ip4/127.0.0.1/tcp/0"}
	cfg.MDNS = false
	start := func() {
		n, err := node.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer n.Close()
		if err := n.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	start()
	first, err := node.ReadLocalToken(cfg.DataDir)
	if err != nil {
		t.Fatal(err)
	}
	start()
	if again, err := node.ReadLocalToken(cfg.DataDir); err != nil || again != first {
		t.Errorf("token after a restart %q (%v), want %q", again, err, first)
	}
}

// TestOpenLocalTokenRefusesStart: a token file other users may read is
// no secret: the node does not start, and says how to fix it.
func TestOpenLocalTokenRefusesStart(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no Unix permission bits")
	}
	cfg := node.DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.Listen = []string{"/ip4/127.0.0.1/tcp/0"}
	cfg.MDNS = false
	path := filepath.Join(cfg.DataDir, node.LocalTokenFile)
	if err := os.WriteFile(path, []byte(strings.Repeat("a", 43)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o644); err != nil { // whatever the umask
		t.Fatal(err)
	}
	n, err := node.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	err = n.Start(context.Background())
	var te *localhttp.TokenError
	if !errors.As(err, &te) || te.Code() != "LOCAL_TOKEN_INVALID" || !strings.Contains(te.Hint(), "chmod 600 "+path) {
		t.Fatalf("Start with a 0644 token file: %v, want a TokenError hinting chmod 600", err)
	}
}
