package a2ahttp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nova-node/nova-node/internal/waitfor"
	"github.com/nova-node/nova-node/protocol/a2ahttp"
	"github.com/nova-node/nova-node/protocol/a2ahttp/a2ahttptest"
)

func TestRequireAuthNeedsTokens(t *testing.T) {
	cfg := a2ahttp.DefaultConfig()
	cfg.DBPath = filepath.Join(t.TempDir(), "a.db")
	cfg.RequireAuth = true
	_, err := a2ahttp.New(a2ahttptest.NewMesh(), cfg)
	if err == nil || !strings.Contains(err.Error(), "TokenHashes") {
		t.Fatalf("New = %v, want an error naming TokenHashes", err)
	}
	cfg.TokenHashes = []string{"not-hex"}
	if _, err := a2ahttp.New(a2ahttptest.NewMesh(), cfg); err == nil {
		t.Fatal("bad hash accepted")
	}
}

func TestAuth(t *testing.T) {
	e := newEnv(t, func(c *a2ahttp.Config) {
		c.RequireAuth = true
		c.TokenHashes = []string{a2ahttp.HashToken("s3cret")}
	})
	url := e.srv.URL + "/a2a/echo/"
	for _, tc := range []struct {
		name, header, want string
	}{
		{"no token", "", `Bearer realm="nova-node"`},
		{"wrong token", "Bearer nope", `Bearer realm="nova-node", error="invalid_token"`},
		{"wrong scheme", "Basic czNjcmV0", `Bearer realm="nova-node", error="invalid_token"`},
	} {
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"id":"x"}}`))
		if tc.header != "" {
			req.Header.Set("Authorization", tc.header)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("WWW-Authenticate") != tc.want {
			t.Errorf("%s: %d %q", tc.name, resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
		}
	}
	call{url: url, token: "s3cret"}.fails(t, "tasks/get", map[string]any{"id": "x"}, -32001)
	// Cards and /healthz stay public, and the card declares the scheme.
	for _, v := range []string{"", "1.0"} {
		card := getJSON(t, e.srv.URL+"/a2a/echo/.well-known/agent-card.json", v)
		schemes, _ := json.Marshal(card["securitySchemes"])
		if !strings.Contains(strings.ToLower(string(schemes)), "bearer") {
			t.Errorf("version %q: securitySchemes %s", v, schemes)
		}
	}
}

// TestAuthAll: a local gateway (AuthAll) asks every request for a token,
// the cards and /healthz too, and takes the local token besides the
// configured ones; a card's CORS preflight needs none. The 401 names the
// UNAUTHORIZED code and the hint.
func TestAuthAll(t *testing.T) {
	const local = "local-token-0123456789abcdefghijklmnop"
	e := newEnv(t, func(c *a2ahttp.Config) {
		c.LocalToken = local
		c.TokenHashes = []string{a2ahttp.HashToken("s3cret")}
		c.AuthAll = true
		c.AuthHint = "the token is in /d/local.token"
	})
	do := func(method, path, token string) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequest(method, e.srv.URL+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp, string(b)
	}
	for _, p := range []string{"/.well-known/agent-card.json", "/a2a/echo/.well-known/agent-card.json", "/a2a/echo/.well-known/agent.json", "/healthz"} {
		if resp, body := do(http.MethodGet, p, ""); resp.StatusCode != http.StatusUnauthorized ||
			!strings.Contains(body, `"code":"UNAUTHORIZED"`) || !strings.Contains(body, "/d/local.token") {
			t.Errorf("GET %s without a token: %d %s", p, resp.StatusCode, body)
		}
		for _, tok := range []string{local, "s3cret"} {
			if resp, body := do(http.MethodGet, p, tok); resp.StatusCode != http.StatusOK {
				t.Errorf("GET %s with a token: %d %s", p, resp.StatusCode, body)
			}
		}
	}
	if resp, _ := do(http.MethodOptions, "/a2a/echo/.well-known/agent-card.json", ""); resp.StatusCode != http.StatusNoContent ||
		!strings.Contains(resp.Header.Get("Access-Control-Allow-Headers"), "Authorization") {
		t.Errorf("card preflight: %d, Allow-Headers %q", resp.StatusCode, resp.Header.Get("Access-Control-Allow-Headers"))
	}
	if resp, _ := do(http.MethodOptions, "/a2a/echo/", ""); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("OPTIONS on the JSON-RPC endpoint without a token: %d, want 401", resp.StatusCode)
	}
	url := e.srv.URL + "/a2a/echo/"
	call{url: url, token: local}.fails(t, "tasks/get", map[string]any{"id": "x"}, -32001)
	call{url: url, token: "s3cret"}.fails(t, "tasks/get", map[string]any{"id": "x"}, -32001)
}

// The 401 comes before the body is read.
func TestAuthBeforeBody(t *testing.T) {
	e := newEnv(t, func(c *a2ahttp.Config) { c.TokenHashes = []string{a2ahttp.HashToken("t")} })
	body := &tripwire{}
	req := httptest.NewRequest(http.MethodPost, "/a2a/echo/", body)
	rec := httptest.NewRecorder()
	e.gw.ServeHTTP(rec, req)
	if rec.Code != http.StatusUnauthorized || body.read {
		t.Fatalf("status %d, body read %v", rec.Code, body.read)
	}
}

type tripwire struct{ read bool }

func (t *tripwire) Read([]byte) (int, error) { t.read = true; return 0, io.EOF }

func getJSON(t *testing.T, url, version string) map[string]any {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	if version != "" {
		req.Header.Set("A2A-Version", version)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	var m map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestCards(t *testing.T) {
	e := newEnv(t, nil)
	base := e.srv.URL
	v03 := getJSON(t, base+"/a2a/tools/.well-known/agent-card.json", "")
	if v03["url"] != base+"/a2a/tools/" || v03["preferredTransport"] != "JSONRPC" || v03["protocolVersion"] != "0.3.0" {
		t.Fatalf("v0.3 card %v", v03)
	}
	if caps := v03["capabilities"].(map[string]any); caps["streaming"] != true || caps["pushNotifications"] != true {
		t.Fatalf("capabilities %v", caps)
	}
	if _, ok := v03["supportedInterfaces"]; !ok {
		t.Fatal("v0.3 card at agent-card.json lacks the v1.0 interfaces")
	}
	skills := v03["skills"].([]any)
	if len(skills) != 3 {
		t.Fatalf("skills %v", skills)
	}
	tool := skills[0].(map[string]any)
	if tool["id"] != "tools.search" || !strings.Contains(strings.Join(toStrings(tool["tags"]), ","), "mcp-tool") {
		t.Fatalf("tool skill %v", tool)
	}
	legacy := getJSON(t, base+"/a2a/tools/.well-known/agent.json", "1.0")
	if _, ok := legacy["supportedInterfaces"]; ok || legacy["url"] == nil {
		t.Fatalf("agent.json is not a plain v0.3 card: %v", legacy)
	}
	v10 := getJSON(t, base+"/a2a/tools/.well-known/agent-card.json", "1.0")
	if _, ok := v10["url"]; ok {
		t.Fatalf("v1.0 card has a url: %v", v10)
	}
	ifs := v10["supportedInterfaces"].([]any)
	first := ifs[0].(map[string]any)
	if first["protocolVersion"] != "1.0" || first["protocolBinding"] != "JSONRPC" || first["url"] != base+"/a2a/tools/" {
		t.Fatalf("interfaces %v", ifs)
	}
	node := getJSON(t, base+"/.well-known/agent-card.json", "")
	if node["url"] != base+"/a2a/" || len(node["skills"].([]any)) != 8 {
		t.Fatalf("node card %v", node)
	}
	resp, _ := http.Get(base + "/a2a/nobody/.well-known/agent-card.json")
	resp.Body.Close()
	if resp.StatusCode != 404 {
		t.Fatalf("unknown agent card: %d", resp.StatusCode)
	}
	resp, _ = http.Post(base+"/a2a/nobody/", "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"id":"x"}}`))
	resp.Body.Close()
	if resp.StatusCode != 404 {
		t.Fatalf("unknown agent rpc: %d", resp.StatusCode)
	}
}

func toStrings(v any) []string {
	var out []string
	for _, x := range v.([]any) {
		out = append(out, x.(string))
	}
	return out
}

func TestHealthz(t *testing.T) {
	e := newEnv(t, nil)
	get := func() int {
		resp, err := http.Get(e.srv.URL + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := get(); got != 200 {
		t.Fatalf("ready: %d", got)
	}
	e.mesh.SetReady(false)
	if got := get(); got != 503 {
		t.Fatalf("mesh not ready: %d", got)
	}
}

func TestLimits(t *testing.T) {
	e := newEnv(t, func(c *a2ahttp.Config) {
		c.MaxBodyBytes = 512
		c.MaxConcurrentRequests = 1
	})
	big := `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"id":"` + strings.Repeat("x", 600) + `"}}`
	resp, err := http.Post(e.srv.URL+"/a2a/echo/", "application/json", strings.NewReader(big))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("big body: %d", resp.StatusCode)
	}
	// One request in progress (a blocking send to "wait"): the next gets 503.
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Go(func() {
		body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": send03(user03(text03("x")), true)})
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, e.srv.URL+"/a2a/wait/", bytes.NewReader(body))
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	})
	defer wg.Wait()
	defer cancel()
	// Probe only once the blocking send holds the slot: a probe racing it
	// for the slot would make it the one refused.
	waitfor.Eventually(t, 5*time.Second, func() error {
		if e.mesh.Calls() < 1 {
			return errors.New("the blocking send has not reached the mesh")
		}
		return nil
	})
	waitfor.Eventually(t, 5*time.Second, func() error {
		resp, err := http.Post(e.srv.URL+"/a2a/echo/", "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"id":"x"}}`))
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
			return errors.New(resp.Status)
		}
		return nil
	})
}

func TestTaskTimeout(t *testing.T) {
	checkLeaks(t)
	e := newEnv(t, func(c *a2ahttp.Config) { c.TaskTimeout = 150 * time.Millisecond })
	var task task03
	call{url: e.srv.URL + "/a2a/wait/"}.ok(t, "message/send", send03(user03(text03("x")), true), &task)
	if task.Status.State != "failed" || statusText(&task) != "Task timed out" {
		t.Fatalf("task %+v", task)
	}
	// Streaming too.
	evs, rerr := call{url: e.srv.URL + "/a2a/wait/", version: "1.0"}.stream(t, "SendStreamingMessage", send10(user10(text10("x")), false))
	if rerr != nil {
		t.Fatal(rerr)
	}
	var last stream10
	_ = json.Unmarshal(evs[len(evs)-1], &last)
	if last.StatusUpdate == nil || last.StatusUpdate.Status.State != "TASK_STATE_FAILED" || statusText10(last.StatusUpdate) != "Task timed out" {
		t.Fatalf("last event %s", evs[len(evs)-1])
	}
}

// Close fails running tasks and waits for them.
func TestCloseInterruptsTasks(t *testing.T) {
	checkLeaks(t)
	cfg := a2ahttp.DefaultConfig()
	cfg.DBPath = filepath.Join(t.TempDir(), "a.db")
	mesh := a2ahttptest.DemoMesh(0)
	gw, err := a2ahttp.New(mesh, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := gw.Close(); err != nil { // before Start: fine
		t.Fatal(err)
	}
	gw, err = a2ahttp.New(mesh, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := gw.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gw)
	defer srv.Close()
	var task task03
	c := call{url: srv.URL + "/a2a/wait/"}
	c.ok(t, "message/send", send03(user03(text03("x")), false), &task)
	if err := gw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gw.Close(); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post(c.url, "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("after Close: %d", resp.StatusCode)
	}
	// The interrupted task was stored as failed.
	e := reopen(t, cfg, mesh)
	var got task03
	call{url: e.srv.URL + "/a2a/wait/"}.ok(t, "tasks/get", map[string]any{"id": task.ID}, &got)
	if got.Status.State != "failed" || statusText(&got) != "Task interrupted: the gateway closed" {
		t.Fatalf("after restart: %+v", got)
	}
}

// reopen starts a gateway on an existing configuration (same database).
func reopen(t *testing.T, cfg a2ahttp.Config, mesh *a2ahttptest.Mesh) *env {
	t.Helper()
	gw, err := a2ahttp.New(mesh, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := gw.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gw)
	t.Cleanup(func() {
		srv.Close()
		_ = gw.Close()
	})
	return &env{gw: gw, srv: srv, mesh: mesh, cfg: cfg}
}

func TestRestartKeepsTasks(t *testing.T) {
	cfg := a2ahttp.DefaultConfig()
	cfg.DBPath = filepath.Join(t.TempDir(), "a.db")
	mesh := a2ahttptest.DemoMesh(0)
	gw, err := a2ahttp.New(mesh, cfg)
	if err != nil {
		t.Fatal(err)
	}
	_ = gw.Start(t.Context())
	srv := httptest.NewServer(gw)
	var done, asking task03
	call{url: srv.URL + "/a2a/echo/"}.ok(t, "message/send", send03(user03(text03("kept")), true), &done)
	call{url: srv.URL + "/a2a/ask/"}.ok(t, "message/send", send03(user03(text03("hi")), true), &asking)
	srv.Close()
	if err := gw.Close(); err != nil {
		t.Fatal(err)
	}

	e := reopen(t, cfg, mesh)
	var got task03
	call{url: e.srv.URL + "/a2a/echo/"}.ok(t, "tasks/get", map[string]any{"id": done.ID}, &got)
	if got.Status.State != "completed" || statusText(&got) != "echo: kept" {
		t.Fatalf("after restart: %+v", got)
	}
	// A multi-turn task continues after the restart.
	m := user03(text03("Alan"))
	m.TaskID, m.ContextID = asking.ID, asking.ContextID
	var fin task03
	call{url: e.srv.URL + "/a2a/ask/"}.ok(t, "message/send", send03(m, true), &fin)
	if fin.Status.State != "completed" || statusText(&fin) != "Hello, Alan!" {
		t.Fatalf("continued: %+v", fin)
	}
}

// An idle stream gets SSE comments, between events only.
func TestStreamKeepAlive(t *testing.T) {
	e := newEnv(t, func(c *a2ahttp.Config) { c.KeepAliveInterval = 30 * time.Millisecond })
	for _, c := range []call{{url: e.srv.URL + "/a2a/slow/"}, {url: e.srv.URL + "/a2a/slow/", version: "1.0"}} {
		method, params := "message/stream", any(send03(user03(text03("x")), true))
		if c.version != "" {
			method, params = "SendStreamingMessage", send10(user10(text10("x")), false)
		}
		resp := c.post(t, method, params, "text/event-stream")
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(raw), "\n\n: keep-alive\n\n") || !strings.HasSuffix(string(raw), "\n\n") {
			t.Fatalf("%s: no keep-alive between events:\n%s", method, raw)
		}
	}
}
