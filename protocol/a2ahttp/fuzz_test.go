package a2ahttp

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/nova-node/nova-node/agentcard"
)

// Fuzz targets for every decoder of bytes that come from the network: mesh
// answers and requests (from peers), v1.0 requests and whole JSON-RPC
// bodies (from A2A clients), cards, SSE streams and v0.3 results (from
// remote agents), and the A2A-Version header. Seed corpora are in
// testdata/fuzz/ and below.

func FuzzDecodeAnswer(f *testing.F) {
	for _, s := range []string{
		`null`, `"hi"`, `42`, `[1,2]`, `{"x":1}`, `{"text":"a"}`, `{"state":"INPUT_REQUIRED","text":"q"}`,
		`{"state":"TASK_STATE_FAILED"}`, `{"state":"weird"}`, `{"parts":[{"kind":"file","uri":"u"}]}`,
		`{"parts":[{"kind":"file"}]}`, `{"artifacts":[{"name":"n","parts":[{"kind":"data","data":[1]}]}]}`,
		`{"reply":"message","text":"x","metadata":{"k":"v"}}`, `{"text":`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		a, err := DecodeAnswer(raw)
		if err != nil {
			return
		}
		switch a.State {
		case StateCompleted, StateInputRequired, StateAuthRequired, StateFailed, StateRejected, StateCanceled:
		default:
			t.Fatalf("state %q", a.State)
		}
		if len(a.contentParts()) > maxParts+2 {
			t.Fatalf("%d parts", len(a.contentParts()))
		}
		// An answer survives its own encoding.
		enc, err := json.Marshal(a)
		if err != nil {
			return // e.g. NaN cannot come from JSON; nothing else should fail
		}
		b, err := DecodeAnswer(enc)
		if err != nil {
			t.Fatalf("re-decode of %s: %v", enc, err)
		}
		if b.State != a.State || b.Text != a.Text || len(b.Parts) != len(a.Parts) {
			t.Fatalf("round trip changed %+v into %+v", a, b)
		}
	})
}

func FuzzReadRequest(f *testing.F) {
	for _, s := range []string{`null`, `"x"`, `{"text":"a","taskId":"t"}`, `{"parts":[{"kind":"text","text":"p"}]}`, `{"a":1}`, `[`, `7`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		r, err := readRequest(raw)
		if err != nil {
			return
		}
		if len(r.Parts) > maxParts {
			t.Fatalf("%d parts", len(r.Parts))
		}
		for _, p := range r.Parts {
			if p.check() != nil {
				t.Fatalf("invalid part %+v accepted", p)
			}
		}
	})
}

func FuzzV1SendRequest(f *testing.F) {
	for _, s := range []string{
		`{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"hi"}]}}`,
		`{"message":{"role":1,"parts":[{"raw":"aGk=","filename":"f","mediaType":"text/plain"},{"url":"https://x"},{"data":{"a":[1]}},{"data":3}]},"configuration":{"returnImmediately":true,"historyLength":2,"taskPushNotificationConfig":{"url":"https://h","token":"t","authentication":{"scheme":"Bearer","credentials":"c"}}}}`,
		`{"message":{"role":"ROLE_AGENT","parts":[{}]}}`, `{"message":{"role":"x","parts":[]}}`, `{}`, `{"message":null}`,
		`{"message":{"role":"ROLE_USER","parts":[{"raw":"!!"}]}}`, `{"message":{"role":"ROLE_USER","taskId":"t","contextId":"c","referenceTaskIds":["a"],"parts":[{"data":null,"text":"x"}]}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		var req v1SendRequest
		if json.Unmarshal(raw, &req) != nil {
			return
		}
		p, err := req.toA2A()
		if err != nil {
			return
		}
		// v1 -> v0.3 -> v1 -> v0.3 keeps the message.
		enc, err := json.Marshal(sendRequestToV1(p))
		if err != nil {
			t.Fatal(err)
		}
		var again v1SendRequest
		if err := json.Unmarshal(enc, &again); err != nil {
			t.Fatalf("re-decode %s: %v", enc, err)
		}
		q, err := again.toA2A()
		if err != nil {
			t.Fatalf("re-convert %s: %v", enc, err)
		}
		if q.Message.ID != p.Message.ID || q.Message.Role != p.Message.Role || len(q.Message.Parts) != len(p.Message.Parts) ||
			textOf(partsFromA2A(q.Message.Parts)) != textOf(partsFromA2A(p.Message.Parts)) {
			t.Fatalf("round trip changed the message: %s", enc)
		}
		if (p.Config == nil) != (q.Config == nil) || (p.Config != nil && *p.Config.Blocking != *q.Config.Blocking) {
			t.Fatalf("round trip changed the configuration: %s", enc)
		}
		// And the message survives the v0.3 encoding the store uses.
		enc03, err := json.Marshal(p.Message)
		if err != nil {
			t.Fatal(err)
		}
		var m a2a.Message
		if err := json.Unmarshal(enc03, &m); err != nil {
			t.Fatalf("v0.3 re-decode %s: %v", enc03, err)
		}
	})
}

func FuzzParseCard(f *testing.F) {
	for _, s := range []string{
		`{"name":"a","version":"1","url":"http://x/a2a/"}`,
		`{"name":"a","version":"1","url":"/rel/","preferredTransport":"JSONRPC"}`,
		`{"name":"a","version":"1","supportedInterfaces":[{"url":"https://x","protocolBinding":"JSONRPC","protocolVersion":"1.0"},{"url":"https://y","protocolBinding":"jsonrpc","protocolVersion":"0.3"}]}`,
		`{"name":"a","version":"1","url":"x","preferredTransport":"GRPC","additionalInterfaces":[{"url":"http://z","transport":"JSONRPC"}]}`,
		`{"name":"","version":""}`, `[]`, `{"name":"a","version":"1","url":"javascript:alert(1)"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		c, err := parseCard(raw, "https://agent.example/.well-known/agent-card.json")
		if err != nil {
			return
		}
		if c.Name == "" || c.Version == "" {
			t.Fatalf("card without name or version: %+v", c)
		}
		if c.ProtocolVersion != Version03 && c.ProtocolVersion != Version10 {
			t.Fatalf("version %q", c.ProtocolVersion)
		}
		if !strings.HasPrefix(c.Endpoint, "http://") && !strings.HasPrefix(c.Endpoint, "https://") {
			t.Fatalf("endpoint %q", c.Endpoint)
		}
	})
}

func FuzzReadSSE(f *testing.F) {
	for _, s := range []string{
		"data: a\n\n", "id: 1\ndata: {\"x\":1}\n\n: keep-alive\n\ndata: b\r\n\r\n", "data:a\ndata:b\n\n", "data: tail",
		"event: e\nretry: 1\n\n", "\n\n\n", "data", ":",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		for data, err := range readSSE(bytes.NewReader(raw)) {
			if err != nil {
				return
			}
			if len(data) > maxSSEEvent {
				t.Fatalf("event of %d bytes", len(data))
			}
		}
		// Events written the way the gateway writes them come back intact.
		line := bytes.Map(func(r rune) rune {
			if r == '\n' || r == '\r' {
				return -1
			}
			return r
		}, raw)
		var got [][]byte
		for data, err := range readSSE(bytes.NewReader(append(sseEvent(line), sseEvent(line)...))) {
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, data)
		}
		if len(got) != 2 || !bytes.Equal(got[0], line) {
			t.Fatalf("round trip of %q: %q", line, got)
		}
	})
}

func FuzzDecodeEvent03(f *testing.F) {
	for _, s := range []string{
		`{"kind":"task","id":"t","contextId":"c","status":{"state":"completed"}}`,
		`{"id":"t","status":{"state":"working"}}`, `{"role":"agent","parts":[{"kind":"text","text":"x"}]}`,
		`{"taskId":"t","status":{"state":"failed"},"final":true}`, `{"taskId":"t","artifact":{"artifactId":"a","parts":[]}}`,
		`{"kind":"nope"}`, `{"parts":[{"kind":"file","file":{}}],"role":"user"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		ev, err := decodeEvent03(raw)
		if err != nil {
			return
		}
		tr := &tracker{}
		tr.apply(ev)
		tr.result(&RemoteCard{})
	})
}

func FuzzWireVersion(f *testing.F) {
	for _, s := range []string{"", "0.3", "1.0", "1.0.0", "2", "0.2.9", " 1.1 ", "1..0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, ok := wireVersion(s)
		if ok != (v != "") || (ok && v != Version03 && v != Version10) {
			t.Fatalf("%q -> %q %v", s, v, ok)
		}
	})
}

// fuzzMesh has one agent that answers at once.
type fuzzMesh struct{ nopMesh }

func (fuzzMesh) Resolve(ctx context.Context, name string) (agentcard.Card, error) {
	return agentcard.Card{ID: "echo", Name: "echo", Version: "1.0.0", Capabilities: []agentcard.Capability{}}, nil
}

func (fuzzMesh) Call(ctx context.Context, agent string, p json.RawMessage) (json.RawMessage, error) {
	return p, nil
}

// Whole JSON-RPC bodies, in both versions, through the gateway: whatever
// the body, the answer is a JSON-RPC response or an event stream.
func FuzzServeRPC(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"kind":"message","messageId":"m","role":"user","parts":[{"kind":"text","text":"hi"}]}}}`,
		`{"jsonrpc":"2.0","id":"x","method":"tasks/get","params":{"id":"t"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"hi"}]}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"SendStreamingMessage","params":{"message":{"role":"ROLE_USER","parts":[{"data":{}}]}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":{"pageSize":1}}`,
		`{"jsonrpc":"2.0","id":1.5,"method":"GetTask"}`, `{"jsonrpc":"1.0"}`, `[]`, ``,
		`{"jsonrpc":"2.0","id":1,"method":"tasks/pushNotificationConfig/delete","params":{"id":"t","pushNotificationConfigId":"p"}}`,
	} {
		f.Add([]byte(s), false)
		f.Add([]byte(s), true)
	}
	cfg := DefaultConfig()
	cfg.DBPath = filepath.Join(f.TempDir(), "fuzz.db")
	cfg.TaskTimeout = time.Second
	cfg.PushEnabled = false
	g, err := New(fuzzMesh{}, cfg)
	if err != nil {
		f.Fatal(err)
	}
	if err := g.Start(context.Background()); err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = g.Close() })
	f.Fuzz(func(t *testing.T, body []byte, v1 bool) {
		req := httptest.NewRequest(http.MethodPost, "/a2a/echo/", bytes.NewReader(body))
		if v1 {
			req.Header.Set(VersionHeader, "1.0")
		}
		rec := httptest.NewRecorder()
		g.ServeHTTP(rec, req)
		ct := rec.Header().Get("Content-Type")
		switch {
		case strings.HasPrefix(ct, "text/event-stream"):
		case strings.HasPrefix(ct, "application/json"):
			var resp rpcResponse
			if err := json.Unmarshal(rec.Body.Bytes(), &resp); err != nil || resp.JSONRPC != "2.0" || (resp.Error == nil) == (resp.Result == nil) {
				t.Fatalf("status %d, body %q", rec.Code, rec.Body.Bytes())
			}
		default:
			t.Fatalf("status %d, Content-Type %q, body %q", rec.Code, ct, rec.Body.Bytes())
		}
	})
}

// REST requests through the gateway: whatever the method, path and body,
// the answer is an event stream, a JSON result, or a google.rpc.Status
// error whose code is the HTTP status.
func FuzzServeREST(f *testing.F) {
	for _, s := range []struct{ method, path, body string }{
		{"POST", "/message:send", `{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"hi"}]}}`},
		{"POST", "/message:stream", `{"message":{"role":"ROLE_USER","parts":[{"data":{}}]}}`},
		{"GET", "/tasks/t1?historyLength=2", ``},
		{"GET", "/tasks?pageSize=1&status=TASK_STATE_COMPLETED", ``},
		{"POST", "/tasks/t1:cancel", `{}`},
		{"GET", "/tasks/t1:subscribe", ``},
		{"POST", "/tasks/t1/pushNotificationConfigs", `{"url":"https://example.com/h"}`},
		{"DELETE", "/tasks/t1/pushNotificationConfigs/p", ``},
		{"GET", "/extendedAgentCard", ``},
		{"PUT", "/tasks/%2F:cancel", `[]`},
	} {
		f.Add(s.method, s.path, []byte(s.body), true)
		f.Add(s.method, s.path, []byte(s.body), false)
	}
	cfg := DefaultConfig()
	cfg.DBPath = filepath.Join(f.TempDir(), "fuzz.db")
	cfg.TaskTimeout = time.Second
	cfg.PushEnabled = false
	g, err := New(fuzzMesh{}, cfg)
	if err != nil {
		f.Fatal(err)
	}
	if err := g.Start(context.Background()); err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = g.Close() })
	f.Fuzz(func(t *testing.T, method, path string, body []byte, agent bool) {
		if !validMethod(method) || !strings.HasPrefix(path, "/") {
			return
		}
		prefix := "/v1"
		if agent {
			prefix = "/a2a/echo/v1"
		}
		u, err := url.Parse(prefix + path)
		if err != nil || u.Host != "" || u.Scheme != "" {
			return
		}
		req := httptest.NewRequest(method, "/", bytes.NewReader(body))
		req.URL = u
		req.RequestURI = u.RequestURI()
		rec := httptest.NewRecorder()
		g.ServeHTTP(rec, req)
		ct := rec.Header().Get("Content-Type")
		switch {
		case strings.HasPrefix(ct, "text/event-stream"):
		case strings.HasPrefix(ct, "application/json"):
			var resp map[string]json.RawMessage
			if err := json.Unmarshal(rec.Body.Bytes(), &resp); err != nil {
				t.Fatalf("%s %s: status %d, body %q", method, u, rec.Code, rec.Body.Bytes())
			}
			if rec.Code == http.StatusOK {
				return
			}
			var st struct {
				Code    int    `json:"code"`
				Status  string `json:"status"`
				Message string `json:"message"`
			}
			if err := json.Unmarshal(resp["error"], &st); err != nil || st.Code != rec.Code || st.Status == "" || st.Message == "" {
				t.Fatalf("%s %s: status %d, body %q", method, u, rec.Code, rec.Body.Bytes())
			}
		default:
			t.Fatalf("%s %s: status %d, Content-Type %q, body %q", method, u, rec.Code, ct, rec.Body.Bytes())
		}
	})
}

// validMethod reports whether m is an HTTP method token.
func validMethod(m string) bool {
	if m == "" {
		return false
	}
	for _, c := range m {
		if c < 'A' || c > 'Z' {
			return false
		}
	}
	return true
}
