package a2ahttp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode"

	"github.com/nova-node/nova-node/envelope"
	"github.com/nova-node/nova-node/internal/waitfor"
	"github.com/nova-node/nova-node/protocol/a2ahttp"
)

// Both wire versions: the v1.0 card at agent-card.json, the plain v0.3 card
// at agent.json.
func versions(e *env, agent string) map[string]string {
	return map[string]string{
		a2ahttp.Version10: e.srv.URL + "/a2a/" + agent + "/",
		a2ahttp.Version03: e.srv.URL + "/a2a/" + agent + "/.well-known/agent.json",
	}
}

func TestClientAgainstGateway(t *testing.T) {
	checkLeaks(t)
	e := newEnv(t, nil)
	for _, streaming := range []bool{true, false} {
		c := a2ahttp.NewClient(a2ahttp.WithPollInterval(20*time.Millisecond), a2ahttp.WithStreaming(streaming))
		for v, url := range versions(e, "echo") {
			name := fmt.Sprintf("%s/stream=%v", v, streaming)
			r := c.Send(t.Context(), url, a2ahttp.Message{Text: "hi", Parts: []a2ahttp.Part{{Kind: "data", Data: map[string]any{"a": 1.0}}}})
			if !r.Success || r.State != "completed" || r.ResponseText != "echo: hi" || r.Version != v || r.TaskID == "" {
				t.Fatalf("%s: %+v", name, r)
			}
			if len(r.Parts) != 2 || r.Parts[1].Kind != "data" {
				t.Fatalf("%s: parts %+v", name, r.Parts)
			}
			// Polling a task that takes a while.
			r = c.Send(t.Context(), strings.Replace(url, "/echo/", "/slow/", 1), a2ahttp.Message{Text: "s"})
			if !r.Success || r.ResponseText != "done: s" {
				t.Fatalf("%s slow: %+v", name, r)
			}
			// An agent answering with a direct message: only a blocking
			// send gets one, and the client streams or sends without
			// blocking, so it sees a completed task.
			r = c.Send(t.Context(), strings.Replace(url, "/echo/", "/direct/", 1), a2ahttp.Message{Text: "?"})
			if !r.Success || r.ResponseText != "hello from direct" {
				t.Fatalf("%s direct: %+v", name, r)
			}
			// Multi-turn.
			askURL := strings.Replace(url, "/echo/", "/ask/", 1)
			r = c.Send(t.Context(), askURL, a2ahttp.Message{Text: "hi"})
			if r.Success || r.Code != a2ahttp.CodeInputRequired || r.Error != "What is your name?" || r.State != "input-required" {
				t.Fatalf("%s ask: %+v", name, r)
			}
			r = c.Send(t.Context(), askURL, a2ahttp.Message{Text: "Lin", TaskID: r.TaskID, ContextID: r.ContextID})
			if !r.Success || r.ResponseText != "Hello, Lin!" {
				t.Fatalf("%s ask again: %+v", name, r)
			}
			// Failures.
			r = c.Send(t.Context(), strings.Replace(url, "/echo/", "/fail/", 1), a2ahttp.Message{Text: "x"})
			if r.Success || r.Code != a2ahttp.CodeTaskFailed || r.State != "failed" || !strings.Contains(r.Error, "DELIVERY_FAILED") {
				t.Fatalf("%s fail: %+v", name, r)
			}
			r = c.Send(t.Context(), strings.Replace(url, "/echo/", "/guarded/", 1), a2ahttp.Message{Text: "x"})
			if r.Code != a2ahttp.CodeTaskFailed || r.State != "rejected" {
				t.Fatalf("%s guarded: %+v", name, r)
			}
		}
	}
}

func TestClientTimeoutCancelsRemoteTask(t *testing.T) {
	e := newEnv(t, nil)
	for v, url := range versions(e, "wait") {
		c := a2ahttp.NewClient(a2ahttp.WithTimeout(300*time.Millisecond), a2ahttp.WithPollInterval(20*time.Millisecond))
		r := c.Send(t.Context(), url, a2ahttp.Message{Text: "x"})
		if r.Code != a2ahttp.CodeTimeout || !strings.HasPrefix(r.Error, "Timed out after ") || r.TaskID == "" {
			t.Fatalf("%s: %+v", v, r)
		}
		waitfor.Eventually(t, 5*time.Second, func() error {
			task, err := c.GetTask(t.Context(), url, r.TaskID)
			if err != nil {
				return err
			}
			if task.Status.State != "canceled" {
				return fmt.Errorf("state %s", task.Status.State)
			}
			return nil
		})
	}
}

// countingHandler counts card fetches.
type countingHandler struct {
	h     http.Handler
	cards atomic.Int64
}

func (c *countingHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if strings.Contains(r.URL.Path, "/.well-known/") {
		c.cards.Add(1)
	}
	c.h.ServeHTTP(w, r)
}

func TestClientCardCache(t *testing.T) {
	e := newEnv(t, nil)
	ch := &countingHandler{h: e.gw}
	srv := httptest.NewServer(ch)
	defer srv.Close()
	var mu sync.Mutex
	now := time.Unix(1000, 0)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	c := a2ahttp.NewClient(a2ahttp.WithClientClock(clock))
	url := srv.URL + "/a2a/echo/"
	for range 3 {
		if r := c.Send(t.Context(), url, a2ahttp.Message{Text: "x"}); !r.Success {
			t.Fatal(r)
		}
	}
	if n := ch.cards.Load(); n != 1 {
		t.Fatalf("%d card fetches, want 1", n)
	}
	mu.Lock()
	now = now.Add(2 * time.Minute)
	mu.Unlock()
	c.Send(t.Context(), url, a2ahttp.Message{Text: "x"})
	if n := ch.cards.Load(); n != 1 {
		t.Fatalf("after 2 min: %d card fetches, want 1", n)
	}
	mu.Lock()
	now = now.Add(4 * time.Minute)
	mu.Unlock()
	c.Send(t.Context(), url, a2ahttp.Message{Text: "x"})
	if n := ch.cards.Load(); n != 2 {
		t.Fatalf("after 6 min: %d card fetches, want 2", n)
	}
}

func TestClientCardDiscovery(t *testing.T) {
	e := newEnv(t, nil)
	endpoint := e.srv.URL + "/a2a/echo/"
	cards := map[string]string{
		// Only the pre-0.3 path, and no preferredTransport (a2a-go's client refuses this card).
		"/legacy/.well-known/agent.json":         `{"name":"legacy","version":"1","url":"` + endpoint + `","capabilities":{},"skills":[]}`,
		"/nameless/.well-known/agent-card.json":  `{"version":"1.0.0","url":"` + endpoint + `"}`,
		"/grpc-only/.well-known/agent-card.json": `{"name":"g","version":"1","url":"x","preferredTransport":"GRPC"}`,
		"/broken/.well-known/agent-card.json":    `{"name":`,
	}
	cs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/down/.well-known/agent-card.json" {
			http.Error(w, "boom", http.StatusInternalServerError)
			return
		}
		body, ok := cards[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(body))
	}))
	defer cs.Close()
	c := a2ahttp.NewClient(a2ahttp.WithPollInterval(20 * time.Millisecond))
	r := c.Send(t.Context(), cs.URL+"/legacy", a2ahttp.Message{Text: "x"})
	if !r.Success || r.Version != a2ahttp.Version03 || r.ResponseText != "echo: x" {
		t.Fatalf("legacy: %+v", r)
	}
	for path, code := range map[string]string{
		"/nameless": a2ahttp.CodeValidation, "/grpc-only": a2ahttp.CodeValidation, "/broken": a2ahttp.CodeValidation,
		"/down": a2ahttp.CodeExternalService, "/missing": a2ahttp.CodeExternalService,
	} {
		r := c.Send(t.Context(), cs.URL+path, a2ahttp.Message{Text: "x"})
		if r.Success || r.Code != code {
			t.Errorf("%s: %+v, want %s", path, r, code)
		}
		var ie *a2ahttp.InvokeError
		if _, err := c.Card(t.Context(), cs.URL+path); !errors.As(err, &ie) || ie.Code() != code {
			t.Errorf("%s: Card error %v", path, err)
		}
	}
	if c.Discover(t.Context(), cs.URL+"/down") != nil {
		t.Error("Discover of a broken agent is not nil")
	}
	// Nothing listening.
	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close()
	if r := c.Send(t.Context(), dead.URL, a2ahttp.Message{Text: "x"}); r.Code != a2ahttp.CodeExternalService {
		t.Errorf("dead host: %+v", r)
	}
}

func TestClientAuth(t *testing.T) {
	e := newEnv(t, func(c *a2ahttp.Config) { c.TokenHashes = []string{a2ahttp.HashToken("tk")} })
	url := e.srv.URL + "/a2a/echo/"
	r := a2ahttp.NewClient().Send(t.Context(), url, a2ahttp.Message{Text: "x"})
	if r.Code != a2ahttp.CodeSubmitFailed || !strings.Contains(r.Error, "401") {
		t.Fatalf("without token: %+v", r)
	}
	r = a2ahttp.NewClient(a2ahttp.WithBearerToken("tk")).Send(t.Context(), url, a2ahttp.Message{Text: "x"})
	if !r.Success {
		t.Fatalf("with token: %+v", r)
	}
}

func TestRemoteAgent(t *testing.T) {
	e := newEnv(t, nil)
	c := a2ahttp.NewClient()
	ra, err := a2ahttp.NewRemoteAgent(t.Context(), c, "", e.srv.URL+"/a2a/tools/")
	if err != nil {
		t.Fatal(err)
	}
	card := ra.Card()
	if err := card.Validate(); err != nil {
		t.Fatal(err)
	}
	if card.ID != "tools" || card.Version != "1.0.0" || len(card.Capabilities) != 3 || card.Capabilities[0].ID != "tools.search" {
		t.Fatalf("card %+v", card)
	}
	f := envelope.NewFactory()
	send := func(ra *a2ahttp.RemoteAgent, payload any) (*a2ahttp.Answer, error) {
		env, err := f.New("caller", "remote", envelope.TypeRequest, payload)
		if err != nil {
			t.Fatal(err)
		}
		res, err := ra.Handler()(t.Context(), env)
		if err != nil {
			return nil, err
		}
		raw, _ := json.Marshal(res)
		return a2ahttp.DecodeAnswer(raw)
	}
	echo, err := a2ahttp.NewRemoteAgent(t.Context(), c, "web-echo", e.srv.URL+"/a2a/echo/")
	if err != nil {
		t.Fatal(err)
	}
	ans, err := send(echo, a2ahttp.Request{Text: "hi", Parts: []a2ahttp.Part{{Kind: "text", Text: "hi"}, {Kind: "file", Name: "f", URI: "https://x/f"}}})
	if err != nil || ans.State != "completed" || ans.Text != "echo: hi" || len(ans.Parts) != 1 || ans.Parts[0].URI != "https://x/f" {
		t.Fatalf("echo: %+v %v", ans, err)
	}
	if ans, err = send(echo, "plain string"); err != nil || ans.Text != "echo: plain string" {
		t.Fatalf("string payload: %+v %v", ans, err)
	}
	// Multi-turn through the mesh: the same taskId continues the remote task.
	ask, _ := a2ahttp.NewRemoteAgent(t.Context(), c, "web-ask", e.srv.URL+"/a2a/ask/")
	ans, err = send(ask, a2ahttp.Request{Text: "hi", TaskID: "gw-task-1"})
	if err != nil || ans.State != "input-required" || ans.Text != "What is your name?" {
		t.Fatalf("ask: %+v %v", ans, err)
	}
	ans, err = send(ask, a2ahttp.Request{Text: "Kim", TaskID: "gw-task-1"})
	if err != nil || ans.State != "completed" || ans.Text != "Hello, Kim!" {
		t.Fatalf("ask again: %+v %v", ans, err)
	}
	fail, _ := a2ahttp.NewRemoteAgent(t.Context(), c, "web-fail", e.srv.URL+"/a2a/fail/")
	if ans, err = send(fail, a2ahttp.Request{Text: "x"}); err != nil || ans.State != "failed" {
		t.Fatalf("fail: %+v %v", ans, err)
	}
	// The agent's server goes away: an error with a code.
	e.srv.Close()
	c.ClearCardCache()
	_, err = send(echo, a2ahttp.Request{Text: "x"})
	var coded interface{ Code() string }
	if !errors.As(err, &coded) || coded.Code() != a2ahttp.CodeExternalService {
		t.Fatalf("server gone: %v", err)
	}
}

// TestClientErrorBodyInert: a remote server's error message, quoted in the
// error of a card fetch that found no card, carries no control character
// to the user's terminal: a JSON "\u001b[..." (valid UTF-8) used to put a
// live escape sequence on stderr. Line breaks become spaces, the rest is
// escaped, visibly; an over-long message is still left out.
func TestClientErrorBodyInert(t *testing.T) {
	bodies := map[string]string{
		"/esc":    `{"error":"\u001b[2J\u001b]0;pwned\u0007gone\r\nfor good\u009b31m\u202eevil"}`,
		"/text":   "plain \x1b[31mred\x1b[0m text",
		"/long":   `{"message":"` + strings.Repeat(`\u001b`, 60) + `"}`,
		"/benign": `{"error":{"message":"nothing here, café"}}`,
	}
	cs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		agent, _, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(bodies["/"+agent]))
	}))
	defer cs.Close()
	c := a2ahttp.NewClient()
	want := map[string]string{
		"/esc":    `: \x1b[2J\x1b]0;pwned\x07gone  for good\u009b31m\u202eevil`,
		"/text":   `: plain \x1b[31mred\x1b[0m text`,
		"/long":   `.well-known/agent.json)`,
		"/benign": `: nothing here, café`,
	}
	for path, tail := range want {
		_, err := c.Card(t.Context(), cs.URL+path)
		if err == nil {
			t.Fatalf("%s: no error", path)
		}
		msg := err.Error()
		for _, r := range msg {
			if unicode.IsControl(r) || r == '\u202e' {
				t.Errorf("%s: error carries control character %U: %q", path, r, msg)
				break
			}
		}
		if !strings.HasSuffix(msg, tail) {
			t.Errorf("%s: error %q, want it to end %q", path, msg, tail)
		}
	}
}

// A caller that stops waiting (its context canceled: a canceled task, a
// requester that gave up) has the remote task canceled too. The client
// polls (no streaming); the test cancels at its first poll, when it knows
// the task.
func TestClientCancelCancelsRemoteTask(t *testing.T) {
	e := newEnv(t, nil)
	polled := make(chan struct{}, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			if bytes.Contains(body, []byte(`"tasks/get"`)) || bytes.Contains(body, []byte(`"GetTask"`)) {
				select {
				case polled <- struct{}{}:
				default:
				}
			}
		}
		e.gw.ServeHTTP(w, r)
	}))
	defer srv.Close()
	for v, url := range map[string]string{
		a2ahttp.Version10: srv.URL + "/a2a/wait/",
		a2ahttp.Version03: srv.URL + "/a2a/wait/.well-known/agent.json",
	} {
		select {
		case <-polled: // the last round's
		default:
		}
		c := a2ahttp.NewClient(a2ahttp.WithPollInterval(20*time.Millisecond), a2ahttp.WithStreaming(false))
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan *a2ahttp.Result, 1)
		go func() { done <- c.Send(ctx, url, a2ahttp.Message{Text: "x"}) }()
		<-polled
		cancel()
		r := <-done
		if r.Code != a2ahttp.CodeTaskFailed || !strings.HasPrefix(r.Error, "Canceled by the caller") || r.TaskID == "" {
			t.Fatalf("%s: %+v", v, r)
		}
		waitfor.Eventually(t, 5*time.Second, func() error {
			task, err := c.GetTask(t.Context(), url, r.TaskID)
			if err != nil {
				return err
			}
			if task.Status.State != "canceled" {
				return fmt.Errorf("state %s", task.Status.State)
			}
			return nil
		})
	}
}
