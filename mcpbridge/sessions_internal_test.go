package mcpbridge

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/nova-node/nova-node/agentcard"
	"github.com/nova-node/nova-node/tiers"
)

// fakeClock is a clock the test moves.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// sessionBridge serves a bridge with one tool (home.say) on an HTTP face
// bounded to max sessions, on 127.0.0.1.
func sessionBridge(t *testing.T, max int, clk *fakeClock) (*Bridge, *httptest.Server) {
	t.Helper()
	h, err := libp2p.New(libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	cards := agentcard.NewRegistry(h.ID())
	if _, err := cards.Register(agentcard.Card{ID: "home", Name: "home", Version: "1.0.0", Tier: tiers.L0, Capabilities: []agentcard.Capability{}}); err != nil {
		t.Fatal(err)
	}
	reg := NewRegistry()
	if err := reg.RegisterTool(Tool{Agent: "home", Name: "say"}, func(context.Context, json.RawMessage) (Result, error) {
		return Result{Content: json.RawMessage(`"said"`)}, nil
	}); err != nil {
		t.Fatal(err)
	}
	b, err := New(Config{Host: h, Registry: reg, Policy: &Policy{Cards: cards, Tiers: tiers.DefaultRules()},
		As: func() string { return "home@" + h.ID().String() }, MaxHTTPSessions: max})
	if err != nil {
		t.Fatal(err)
	}
	b.Start()
	t.Cleanup(func() { b.Close() })
	srv := httptest.NewServer(b.httpHandler(clk.now))
	t.Cleanup(srv.Close)
	return b, srv
}

// rawInitialize opens a session the way a client that never uses it
// would: one initialize POST. It returns the status, the session id and
// the body.
func rawInitialize(t *testing.T, url string) (int, string, string) {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"flood","version":"1"}}}`
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Mcp-Session-Id"), string(b)
}

func callSay(t *testing.T, cs *mcp.ClientSession) error {
	t.Helper()
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "home.say"})
	if err == nil && res.IsError {
		t.Fatalf("home.say failed: %+v", res.Content)
	}
	return err
}

// TestHTTPSessionsBounded opens sessions on the HTTP face until its bound:
// past it, a new session is refused with HTTP 503 and TOO_MANY_SESSIONS
// while every held session was used within the minute, and takes the
// place of the session idle longest once one has been idle a minute. An
// honest client that keeps using its session keeps it throughout.
func TestHTTPSessionsBounded(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1_800_000_000, 0)}
	b, srv := sessionBridge(t, 4, clk)

	honest, err := mcp.NewClient(&mcp.Implementation{Name: "honest", Version: "1"}, nil).
		Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: srv.URL}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-06-18"}) // a stateful session, which the bound counts
	if err != nil {
		t.Fatal(err)
	}
	defer honest.Close()
	if err := callSay(t, honest); err != nil {
		t.Fatal(err)
	}

	var flood []string
	for range 3 {
		code, id, body := rawInitialize(t, srv.URL)
		if code != http.StatusOK || id == "" {
			t.Fatalf("session below the bound: HTTP %d, id %q: %s", code, id, body)
		}
		flood = append(flood, id)
	}
	code, id, body := rawInitialize(t, srv.URL)
	if code != http.StatusServiceUnavailable || id != "" || !strings.Contains(body, CodeTooManySessions) {
		t.Fatalf("session past the bound: HTTP %d, id %q: %s; want 503 with %s", code, id, body, CodeTooManySessions)
	}
	var rpc struct {
		Error struct {
			Code    int64           `json:"code"`
			Message string          `json:"message"`
			Data    json.RawMessage `json:"data"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(body), &rpc); err != nil || rpc.Error.Code != -32000 || !strings.Contains(rpc.Error.Message, "DELETE") {
		t.Fatalf("refusal is not a JSON-RPC error saying what to do: %s (%v)", body, err)
	}
	if err := callSay(t, honest); err != nil {
		t.Fatalf("honest session after the refusal: %v", err)
	}

	// A minute on, the flood's sessions are idle and the honest one is
	// used again: new sessions replace the flood's, oldest first.
	clk.advance(sessionEvictIdle)
	if err := callSay(t, honest); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if code, id, body := rawInitialize(t, srv.URL); code != http.StatusOK || id == "" {
			t.Fatalf("session replacing an idle one: HTTP %d: %s", code, body)
		}
	}
	if err := callSay(t, honest); err != nil {
		t.Fatalf("honest session after the replacements: %v", err)
	}
	n := 0
	open := map[string]bool{}
	for ss := range b.agg.Sessions() {
		n++
		open[ss.ID()] = true
	}
	if n > 4 {
		t.Errorf("%d sessions held; bound 4", n)
	}
	for _, id := range flood {
		if open[id] {
			t.Errorf("idle session %s was not replaced", id)
		}
	}
}

// sessionHeapBound is the documented bound (docs/security.md, "Bounds") on
// the heap DefaultMaxHTTPSessions idle sessions of the HTTP face take.
const sessionHeapBound = 8 << 20

// 1,000 clients each open a session on the HTTP face and leave it idle:
// it holds DefaultMaxHTTPSessions of them, refuses the rest, and the
// sessions take at most sessionHeapBound of heap. Skipped with -short;
// run with go test -run TestHTTPSessionsMemoryBounded ./mcpbridge/
func TestHTTPSessionsMemoryBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("memory bound: 1,000 sessions")
	}
	clk := &fakeClock{t: time.Unix(1_800_000_000, 0)}
	b, srv := sessionBridge(t, 0, clk) // the default bound
	heap := func() int64 {
		runtime.GC()
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return int64(ms.HeapAlloc)
	}
	before := heap()
	refused := 0
	for range 1000 {
		if code, _, _ := rawInitialize(t, srv.URL); code == http.StatusServiceUnavailable {
			refused++
		}
	}
	n := 0
	for range b.agg.Sessions() {
		n++
	}
	used := heap() - before
	t.Logf("1000 sessions opened: %d held, %d refused; heap +%.1f MiB", n, refused, float64(used)/(1<<20))
	if n != DefaultMaxHTTPSessions || refused != 1000-DefaultMaxHTTPSessions {
		t.Errorf("%d sessions held, %d refused; want %d held", n, refused, DefaultMaxHTTPSessions)
	}
	if used > sessionHeapBound {
		t.Errorf("the sessions take %d MiB of heap; documented bound %d MiB", used>>20, sessionHeapBound>>20)
	}
}
