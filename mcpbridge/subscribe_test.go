package mcpbridge_test

import (
	"context"
	"encoding/json"
	"fmt"
	gonet "net"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/nova-node/nova-node/agentcard"
	"github.com/nova-node/nova-node/mcpbridge"
	"github.com/nova-node/nova-node/sandbox"
	"github.com/nova-node/nova-node/tiers"
)

// A face session subscribes to at most MaxSubscriptions resources; an
// update reported by the registry (as a Go program does for its own
// resources) reaches the sessions subscribed to it.
func TestFaceSubscriptionsBounded(t *testing.T) {
	h := newHost(t)
	var as atomic.Value
	as.Store("home@" + h.ID().String())
	b, _, reg := labBridgeRegistry(t, h, &as)
	for i := range mcpbridge.MaxSubscriptions + 1 {
		uri := fmt.Sprintf("home://r%d", i)
		if err := reg.RegisterResource(mcpbridge.Resource{Agent: "home", URI: uri, Name: uri},
			func(context.Context) ([]byte, error) { return []byte("x"), nil }); err != nil {
			t.Fatal(err)
		}
	}
	srv := httptest.NewServer(b.HTTPHandler())
	t.Cleanup(srv.Close)
	updated := make(chan string, 4)
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, &mcp.ClientOptions{
		ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) { updated <- req.Params.URI },
	})
	cs, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: srv.URL}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	for i := range mcpbridge.MaxSubscriptions {
		if err := cs.Subscribe(t.Context(), &mcp.SubscribeParams{URI: fmt.Sprintf("home://r%d", i)}); err != nil {
			t.Fatalf("subscription %d: %v", i, err)
		}
	}
	// Subscribing twice to the same URI holds one subscription.
	if err := cs.Subscribe(t.Context(), &mcp.SubscribeParams{URI: "home://r0"}); err != nil {
		t.Fatal(err)
	}
	last := fmt.Sprintf("home://r%d", mcpbridge.MaxSubscriptions)
	err = cs.Subscribe(t.Context(), &mcp.SubscribeParams{URI: last})
	if mcpbridge.CodeOf(err) != mcpbridge.CodeTooManySubscriptions {
		t.Fatalf("subscription past the bound: %v, want %s", err, mcpbridge.CodeTooManySubscriptions)
	}
	if err := cs.Unsubscribe(t.Context(), &mcp.UnsubscribeParams{URI: "home://r1"}); err != nil {
		t.Fatal(err)
	}
	if err := cs.Subscribe(t.Context(), &mcp.SubscribeParams{URI: last}); err != nil {
		t.Fatalf("subscription after an unsubscribe: %v", err)
	}
	reg.ResourceUpdated("home://r1") // unsubscribed: not sent
	reg.ResourceUpdated(last)
	if got := <-updated; got != last {
		t.Fatalf("update of %q, want %q", got, last)
	}
}

// A peer's session subscribes to a resource only for a caller allowed to
// call its agent, and at most MaxSubscriptions at once.
func TestPeerSubscriptionsChecked(t *testing.T) {
	hb, ha := newHost(t), newHost(t)
	var as atomic.Value
	as.Store("")
	_, cards, reg := labBridgeRegistry(t, hb, &as)
	for _, c := range []agentcard.Card{card("outsider", ""), card("insider", "lab")} {
		c.Host, c.Origin, c.Revision = ha.ID().String(), agentcard.OriginRemote, 1
		if _, err := cards.MergeRemote(c); err != nil {
			t.Fatal(err)
		}
	}
	for i := range mcpbridge.MaxSubscriptions {
		uri := fmt.Sprintf("lab://r%d", i)
		if err := reg.RegisterResource(mcpbridge.Resource{Agent: "labtools", URI: uri, Name: uri},
			func(context.Context) ([]byte, error) { return []byte("x"), nil }); err != nil {
			t.Fatal(err)
		}
	}
	if err := ha.Connect(t.Context(), peer.AddrInfo{ID: hb.ID(), Addrs: hb.Addrs()}); err != nil {
		t.Fatal(err)
	}
	s, err := ha.NewStream(t.Context(), hb.ID(), mcpbridge.ProtocolID)
	if err != nil {
		t.Fatal(err)
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "raw", Version: "1"}, nil)
	// 2025-11-25, as nodes speak to each other: resources/subscribe with
	// the caller in _meta.
	cs, err := c.Connect(t.Context(), &mcp.IOTransport{Reader: s, Writer: s}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	as2 := func(agent string) mcp.Meta { return mcp.Meta{mcpbridge.MetaCaller: agent + "@" + ha.ID().String()} }
	err = cs.Subscribe(t.Context(), &mcp.SubscribeParams{Meta: as2("outsider"), URI: "lab://notes"})
	if mcpbridge.CodeOf(err) != sandbox.CodeSandboxViolation {
		t.Fatalf("outsider subscribes to lab://notes: %v, want %s", err, sandbox.CodeSandboxViolation)
	}
	if err := cs.Subscribe(t.Context(), &mcp.SubscribeParams{Meta: as2("insider"), URI: "lab://notes"}); err != nil {
		t.Fatalf("insider subscribes to lab://notes: %v", err)
	}
	for i := range mcpbridge.MaxSubscriptions - 1 {
		if err := cs.Subscribe(t.Context(), &mcp.SubscribeParams{Meta: as2("insider"), URI: fmt.Sprintf("lab://r%d", i)}); err != nil {
			t.Fatalf("subscription %d: %v", i, err)
		}
	}
	err = cs.Subscribe(t.Context(), &mcp.SubscribeParams{Meta: as2("insider"), URI: fmt.Sprintf("lab://r%d", mcpbridge.MaxSubscriptions-1)})
	if mcpbridge.CodeOf(err) != mcpbridge.CodeTooManySubscriptions {
		t.Fatalf("subscription past the bound: %v, want %s", err, mcpbridge.CodeTooManySubscriptions)
	}
}

// updateMesh is node B, whose agent lab has the resources uris and a tool
// touch that reports as updated, in order, the URIs it is given; and node
// A, connected to it, whose face (as its agent alice) lists them.
func updateMesh(t *testing.T, uris ...string) *mcpbridge.Bridge {
	t.Helper()
	ha, hb := newHost(t), newHost(t)
	bridge := func(h host.Host, local string, remote agentcard.Card, reg *mcpbridge.Registry) *mcpbridge.Bridge {
		cards := agentcard.NewRegistry(h.ID())
		if _, err := cards.Register(card(local, "")); err != nil {
			t.Fatal(err)
		}
		if _, err := cards.MergeRemote(remote); err != nil {
			t.Fatal(err)
		}
		pol := &mcpbridge.Policy{Cards: cards, Tiers: tiers.DefaultRules()}
		as := local + "@" + h.ID().String()
		b, err := mcpbridge.New(mcpbridge.Config{Host: h, Registry: reg, Policy: pol, As: func() string { return as }})
		if err != nil {
			t.Fatal(err)
		}
		b.Start()
		t.Cleanup(func() { b.Close() })
		return b
	}
	regB := mcpbridge.NewRegistry()
	for _, uri := range uris {
		if err := regB.RegisterResource(mcpbridge.Resource{Agent: "lab", URI: uri, Name: uri},
			func(context.Context) ([]byte, error) { return []byte("x"), nil }); err != nil {
			t.Fatal(err)
		}
	}
	touch := func(_ context.Context, args json.RawMessage) (mcpbridge.Result, error) {
		var in struct{ URIs []string }
		if err := json.Unmarshal(args, &in); err != nil {
			return mcpbridge.Result{}, err
		}
		for _, u := range in.URIs {
			regB.ResourceUpdated(u)
		}
		return mcpbridge.Result{Content: json.RawMessage(`"touched"`)}, nil
	}
	if err := regB.RegisterTool(mcpbridge.Tool{Agent: "lab", Name: "touch"}, touch); err != nil {
		t.Fatal(err)
	}
	alice, lab := card("alice", ""), card("lab", "")
	alice.Host, alice.Origin, alice.Revision = ha.ID().String(), agentcard.OriginRemote, 1
	lab.Host, lab.Origin, lab.Revision, lab.Protocols = hb.ID().String(), agentcard.OriginRemote, 1, []string{mcpbridge.ProtocolID}
	bridge(hb, "lab", alice, regB)
	a := bridge(ha, "alice", lab, mcpbridge.NewRegistry())
	if err := ha.Connect(t.Context(), peer.AddrInfo{ID: hb.ID(), Addrs: hb.Addrs()}); err != nil {
		t.Fatal(err)
	}
	return a
}

// valve is a face connection whose writes wait while it is paused: a
// client that stops reading, as far as the face can tell.
type valve struct {
	gonet.Conn
	mu   sync.Mutex
	shut chan struct{} // closed on resume; nil while writes go through
}

func (v *valve) Write(p []byte) (int, error) {
	v.mu.Lock()
	c := v.shut
	v.mu.Unlock()
	if c != nil {
		<-c
	}
	return v.Conn.Write(p)
}

func (v *valve) pause() {
	v.mu.Lock()
	v.shut = make(chan struct{})
	v.mu.Unlock()
}

func (v *valve) resume() {
	v.mu.Lock()
	if v.shut != nil {
		close(v.shut)
		v.shut = nil
	}
	v.mu.Unlock()
}

// faceConn is a client session on b's byte-stream face, through a valve.
func faceConn(t *testing.T, b *mcpbridge.Bridge, opts *mcp.ClientOptions) (*mcp.ClientSession, *valve) {
	t.Helper()
	c, s := gonet.Pipe()
	v := &valve{Conn: s}
	done := make(chan struct{})
	go func() { defer close(done); _ = b.ServeConn(t.Context(), v) }()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, opts).Connect(t.Context(),
		&mcp.IOTransport{Reader: c, Writer: c}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v.resume(); _ = cs.Close(); _ = c.Close(); <-done })
	return cs, v
}

// An update that a remote resource's server reports before the result of
// the call that made it never reaches a face session that subscribed
// after seeing that result, even when the face is slow to send it (here:
// another client of the face stops reading while the update is on its
// way); an update made after the subscription does.
func TestUpdateBeforeSubscribeNotDelivered(t *testing.T) {
	const doc, other, mark = "lab://doc", "lab://other", "lab://mark"
	a := updateMesh(t, doc, other, mark)
	slow, v := faceConn(t, a, nil)
	updated := make(chan string, 16)
	cs, _ := faceConn(t, a, &mcp.ClientOptions{ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
		updated <- req.Params.URI
	}})
	subscribe := func(cs *mcp.ClientSession, uri string) {
		t.Helper()
		if err := cs.Subscribe(t.Context(), &mcp.SubscribeParams{URI: uri}); err != nil {
			t.Fatalf("subscribe to %s: %v", uri, err)
		}
	}
	touch := func(uris ...string) {
		t.Helper()
		r, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "lab_touch", Arguments: map[string]any{"uris": uris}})
		if err != nil || r.IsError {
			t.Fatalf("touch %q: %v %+v", uris, err, r)
		}
	}
	// The slow client keeps the face subscribed upstream to doc.
	subscribe(slow, other)
	subscribe(slow, doc)
	subscribe(cs, mark)
	v.pause()
	touch(other, doc) // the face is stuck sending other to the slow client
	subscribe(cs, doc)
	v.resume()
	touch(doc, mark)
	var docs int
	for uri := ""; uri != mark; {
		select {
		case uri = <-updated:
			if uri == doc {
				docs++
			}
		case <-time.After(15 * time.Second):
			t.Fatalf("no update of %s", mark)
		}
	}
	if docs != 1 {
		t.Fatalf("%d updates of %s before %s, want 1: the one made after subscribing", docs, doc, mark)
	}
}

// Registry.ResourceUpdated, which a backend's update calls on the
// goroutine that reads the backend's answers, never waits for a
// subscription being made or ended: the answer to it may be the next
// thing that goroutine reads. (Bounded by a timeout rather than run in a
// synctest bubble, where a goroutine waiting on a mutex is not durably
// blocked: a regression would hang there instead of failing.)
func TestUpdateDuringSubscribe(t *testing.T) {
	reg := mcpbridge.NewRegistry()
	if err := reg.RegisterResource(mcpbridge.Resource{Agent: "lab", URI: "lab://doc", Name: "doc"},
		func(context.Context) ([]byte, error) { return []byte("x"), nil }); err != nil {
		t.Fatal(err)
	}
	var updates atomic.Int32
	reg.OnResourceUpdated(func(string) { updates.Add(1) })
	var readers sync.WaitGroup
	reg.SetSubscriber("lab://doc", func(ctx context.Context, uri string, on bool) error {
		read := make(chan struct{}) // the backend's reader takes an update before the answer
		readers.Go(func() { defer close(read); reg.ResourceUpdated(uri) })
		select {
		case <-read:
			return nil
		case <-ctx.Done():
			return fmt.Errorf("the update waited for the (un)subscription: %w", ctx.Err())
		}
	})
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	err := reg.SubscribeResource(ctx, "lab://doc")
	readers.Wait()
	if err != nil {
		t.Fatal(err)
	}
	err = reg.UnsubscribeResource(ctx, "lab://doc")
	readers.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if n := updates.Load(); n != 0 {
		t.Errorf("%d updates reported while being (un)subscribed, want 0", n)
	}
	reg.SetSubscriber("lab://doc", nil)
	if err := reg.SubscribeResource(ctx, "lab://doc"); err != nil {
		t.Fatal(err)
	}
	reg.ResourceUpdated("lab://doc")
	if n := updates.Load(); n != 1 {
		t.Errorf("%d updates reported to a subscriber, want 1", n)
	}
}
