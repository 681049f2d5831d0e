package a2ahttp_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nova-node/nova-node/internal/leakcheck"
	"github.com/nova-node/nova-node/protocol/a2ahttp"
	"github.com/nova-node/nova-node/protocol/a2ahttp/a2ahttptest"
)

// env is a gateway on a fake mesh behind an httptest server on 127.0.0.1.
type env struct {
	gw   *a2ahttp.Gateway
	srv  *httptest.Server
	mesh *a2ahttptest.Mesh
	cfg  a2ahttp.Config
}

func newEnv(t *testing.T, mod func(*a2ahttp.Config)) *env {
	t.Helper()
	cfg := a2ahttp.DefaultConfig()
	cfg.DBPath = filepath.Join(t.TempDir(), "a2a.db")
	cfg.PushAllowHosts = []string{"127.0.0.1"}
	if mod != nil {
		mod(&cfg)
	}
	mesh := a2ahttptest.DemoMesh(200 * time.Millisecond)
	gw, err := a2ahttp.New(mesh, cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if err := gw.Start(t.Context()); err != nil {
		t.Fatalf("Start: %v", err)
	}
	srv := httptest.NewServer(gw)
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
		if err := gw.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return &env{gw: gw, srv: srv, mesh: mesh, cfg: cfg}
}

// checkLeaks fails the test if goroutines of this package outlive it.
func checkLeaks(t *testing.T) {
	t.Cleanup(func() {
		if s := leakcheck.Wait("nova-node/protocol/a2ahttp.", 5*time.Second); s != "" {
			t.Errorf("goroutines leaked:\n%s", s)
		}
	})
}

type rpcErr struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data"`
}

type rpcResp struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  json.RawMessage `json:"result"`
	Error   *rpcErr         `json:"error"`
}

type call struct {
	url, version, token string
}

func (c call) post(t *testing.T, method string, params any, accept string) *http.Response {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 7, "method": method, "params": params})
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, c.url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", accept)
	if c.version != "" {
		req.Header.Set("A2A-Version", c.version)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	return resp
}

// rpc calls a method and returns the response.
func (c call) rpc(t *testing.T, method string, params any) *rpcResp {
	t.Helper()
	resp := c.post(t, method, params, "application/json")
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Fatalf("%s: Content-Type %q, body %s", method, ct, raw)
	}
	var out rpcResp
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("%s: status %d, body %q: %v", method, resp.StatusCode, raw, err)
	}
	if out.JSONRPC != "2.0" || string(out.ID) != "7" {
		t.Fatalf("%s: bad envelope %s", method, raw)
	}
	return &out
}

// ok calls a method that must succeed and decodes its result into v.
func (c call) ok(t *testing.T, method string, params any, v any) {
	t.Helper()
	r := c.rpc(t, method, params)
	if r.Error != nil {
		t.Fatalf("%s: error %d %s %s", method, r.Error.Code, r.Error.Message, r.Error.Data)
	}
	if v != nil {
		if err := json.Unmarshal(r.Result, v); err != nil {
			t.Fatalf("%s: result %s: %v", method, r.Result, err)
		}
	}
}

// fails calls a method that must fail with code.
func (c call) fails(t *testing.T, method string, params any, code int) *rpcErr {
	t.Helper()
	r := c.rpc(t, method, params)
	if r.Error == nil {
		t.Fatalf("%s: want error %d, got result %s", method, code, r.Result)
	}
	if r.Error.Code != code {
		t.Fatalf("%s: want error %d, got %d %s", method, code, r.Error.Code, r.Error.Message)
	}
	return r.Error
}

// stream calls a streaming method and returns the results of its events
// (or the error that ended it).
func (c call) stream(t *testing.T, method string, params any) ([]json.RawMessage, *rpcErr) {
	t.Helper()
	resp := c.post(t, method, params, "text/event-stream")
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		raw, _ := io.ReadAll(resp.Body)
		var out rpcResp
		if json.Unmarshal(raw, &out) == nil && out.Error != nil {
			return nil, out.Error
		}
		t.Fatalf("%s: Content-Type %q, body %s", method, ct, raw)
	}
	var events []json.RawMessage
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var out rpcResp
		if err := json.Unmarshal([]byte(line), &out); err != nil {
			t.Fatalf("%s: event %q: %v", method, line, err)
		}
		if out.Error != nil {
			return events, out.Error
		}
		events = append(events, out.Result)
	}
	return events, nil
}
