package protocol

import (
	"context"
	"crypto/rand"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/nova-node/nova-node/agentcard"
	"github.com/nova-node/nova-node/envelope"
	"github.com/nova-node/nova-node/internal/frame"
	"github.com/nova-node/nova-node/tiers"
)

// startRouter registers agents on a new registry for h and starts a
// Router there, closed when the test ends.
func startRouter(t *testing.T, h host.Host, agents []string, opts ...Option) (*Router, *agentcard.Registry) {
	t.Helper()
	reg := agentcard.NewRegistry(h.ID())
	for _, a := range agents {
		if _, err := reg.Register(agentcard.Card{ID: a, Name: a, Version: "1.0.0", Tier: tiers.L3, Capabilities: []agentcard.Capability{}}); err != nil {
			t.Fatal(err)
		}
	}
	r, err := New(h, reg, opts...)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r, reg
}

func connectHosts(t *testing.T, a, b host.Host) {
	t.Helper()
	if err := a.Connect(t.Context(), peer.AddrInfo{ID: b.ID(), Addrs: b.Addrs()}); err != nil {
		t.Fatal(err)
	}
}

// A sender restarted after a crash, while the receiver still has envelopes
// of the channel queued behind a slow agent, numbers new envelopes past
// what the receiver has queued, not only past what it has handled: the
// receiver would take them for duplicates of its queue and drop them, and
// acknowledge them once it handled the old ones.
func TestRestartedSenderNumbersPastTheReceiversQueue(t *testing.T) {
	key, _, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	f := envelope.NewFactory()
	ha1, hb := loopbackHost(t, libp2p.Identity(key)), loopbackHost(t)
	ra1, regA1 := startRouter(t, ha1, []string{"a0"}, WithStore(NewMemStore()), WithFactory(f))
	rb, _ := startRouter(t, hb, []string{"a1"}, WithFactory(f))
	from, to := "a0@"+ha1.ID().String(), "a1@"+hb.ID().String()

	gate := make(chan struct{})
	var openGate sync.Once
	// Registered after the routers' cleanups, so run before them: a failed
	// test must not leave rb's Close waiting for a handler held at the gate.
	t.Cleanup(func() { openGate.Do(func() { close(gate) }) })
	var mu sync.Mutex
	var seen []string
	rb.Handle("a1", func(_ context.Context, env *envelope.Envelope) (any, error) {
		<-gate
		mu.Lock()
		seen = append(seen, string(env.Payload))
		mu.Unlock()
		return nil, nil
	})
	connectHosts(t, ha1, hb)
	if !rvWait(t, 10*time.Second, func() bool { _, ok := regA1.Get(to); return ok }) {
		t.Fatal("the sender never learned the receiver's card")
	}
	post := func(r *Router, payload string) {
		t.Helper()
		env, _ := f.New("a0", "a1", envelope.TypeNotification, []byte(payload))
		if _, err := r.Post(t.Context(), env); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{`"old1"`, `"old2"`, `"old3"`, `"old4"`} {
		post(ra1, p)
	}
	queued := func() uint64 {
		rb.mu.Lock()
		defer rb.mu.Unlock()
		for _, ic := range rb.inChans {
			ic.mu.Lock()
			defer ic.mu.Unlock()
			return ic.queued
		}
		return 0
	}
	if !rvWait(t, 10*time.Second, func() bool { return queued() == 4 }) {
		t.Fatalf("the receiver queued %d of 4", queued())
	}
	chID := ra1.Channels()[0].ID

	// The crash: the connection goes, and the outbox holds only envelope 1
	// (2-4 were sent within the last second, never written).
	first, _ := f.New(from, to, envelope.TypeNotification, []byte(`"old1"`))
	first.Metadata = &envelope.Metadata{Tier: uint8(tiers.L3)}
	raw, err := envelope.EncodeCBOR(first)
	if err != nil {
		t.Fatal(err)
	}
	ha1.Close()
	ra1.Close()
	store := NewMemStore()
	if err := store.SaveOutbox([]OutboxOp{{Channel: chID, From: from, To: to, Put: []OutboxItem{{Seq: 1, Env: raw}}}}); err != nil {
		t.Fatal(err)
	}
	ha2 := loopbackHost(t, libp2p.Identity(key))
	ra2, regA2 := startRouter(t, ha2, []string{"a0"}, WithStore(store), WithFactory(f))
	connectHosts(t, ha2, hb)
	if !rvWait(t, 10*time.Second, func() bool {
		cs := ra2.Channels()
		return len(cs) == 1 && cs[0].State == "open"
	}) {
		t.Fatalf("the restored channel did not reopen: %+v", ra2.Channels())
	}
	// The channel reopens from the outbox without the receiver's card; a
	// Post needs it (to resolve "a1"), and it comes with the receiver's hello.
	if !rvWait(t, 10*time.Second, func() bool { _, ok := regA2.Get(to); return ok }) {
		t.Fatal("the restarted sender never learned the receiver's card")
	}
	for _, p := range []string{`"new1"`, `"new2"`, `"new3"`} {
		post(ra2, p)
	}
	openGate.Do(func() { close(gate) })
	want := []string{`"old1"`, `"old2"`, `"old3"`, `"old4"`, `"new1"`, `"new2"`, `"new3"`}
	ok := rvWait(t, 10*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(seen) >= len(want)
	})
	mu.Lock()
	got := slices.Clone(seen)
	mu.Unlock()
	if !ok || !slices.Equal(got, want) {
		t.Fatalf("the receiver's agent saw %v, want %v", got, want)
	}
	if !rvWait(t, 5*time.Second, func() bool { return ra2.Channels()[0].Pending == 0 }) {
		t.Fatalf("the sender still has %d pending", ra2.Channels()[0].Pending)
	}
}

// repliesOf collects the frames the target writes back on s.
func (s *rvStream) replies() <-chan *inMsg {
	out := make(chan *inMsg, 1024)
	go func() { // ends with the stream (its host closes when the test ends)
		defer close(out)
		fr := frame.NewReader(s.st, 0)
		for {
			b, err := fr.Next()
			if err != nil {
				return
			}
			if m, err := decodeMsg(b); err == nil {
				select {
				case out <- m:
				default: // the test reads only what it waits for
				}
			}
		}
	}()
	return out
}

// openedOn waits for the opened (or refusing nack) frame of channel ch.
func openedOn(t *testing.T, replies <-chan *inMsg, ch string) *inMsg {
	t.Helper()
	deadline := time.After(5 * time.Second)
	for {
		select {
		case m, ok := <-replies:
			if !ok {
				t.Fatalf("the stream ended before channel %s was answered", ch)
			}
			if m.Ch == ch && (m.Kind == kindOpened || m.Kind == kindNack && m.Seq == 0) {
				return m
			}
		case <-deadline:
			t.Fatalf("channel %s not answered within 5 s", ch)
		}
	}
}

// A peer at maxInChannelsPerPeer whose channels are idle on streams that
// ended (a peer restarted, or redialling after giving up) gets new
// channels: the idle ones are evicted, keeping their watermarks, so one
// reopened later still recognises its duplicates. Channels on a live
// stream are not evicted, and past the bound the open is refused.
func TestIdleChannelsEvictedAtTheBound(t *testing.T) {
	tg := rvNewTarget(t)
	tg.r.Handle("a0", func(context.Context, *envelope.Envelope) (any, error) { return nil, nil })
	m := rvNewMallory(t, tg)
	s1 := m.stream(tg, "m")
	r1 := s1.replies()
	for i := range maxInChannelsPerPeer {
		s1.write(&wireMsg{Kind: kindOpen, Ch: fmt.Sprintf("c%05d", i), From: m.addr("m"), To: "a0"})
	}
	env, _ := envelope.NewFactory().New(m.addr("m"), "a0", envelope.TypeNotification, nil)
	s1.write(&wireMsg{Kind: kindEnvelope, Ch: "c00000", Seq: 1, Env: env})
	s1.flush()
	first := func() *inChannel {
		tg.r.mu.Lock()
		defer tg.r.mu.Unlock()
		return tg.r.inChans[m.h.ID().String()+"/c00000"]
	}
	if !rvWait(t, 10*time.Second, func() bool {
		ic := first()
		if ic == nil {
			return false
		}
		ic.mu.Lock()
		defer ic.mu.Unlock()
		return ic.watermark == 1 && !ic.dirty // handled, and its watermark persisted
	}) {
		t.Fatal("the first channel's envelope was not handled and persisted")
	}
	s1.write(&wireMsg{Kind: kindOpen, Ch: "extra", From: m.addr("m"), To: "a0"})
	s1.flush()
	if got := openedOn(t, r1, "extra"); got.Kind != kindNack {
		t.Fatalf("open past the bound on a live stream: kind %d, want a nack", got.Kind)
	}

	_ = s1.st.Reset() // the peer goes away: its channels' stream ends
	if !rvWait(t, 5*time.Second, func() bool { ic := first(); return ic != nil && ic.out != nil && ic.out.ended.Load() }) {
		t.Fatal("the target did not see the stream end")
	}
	s2 := m.stream(tg, "m")
	r2 := s2.replies()
	// Scans are at most once a second per peer: the refused open above made one.
	var got *inMsg
	rvWait(t, 5*time.Second, func() bool {
		s2.write(&wireMsg{Kind: kindOpen, Ch: "extra", From: m.addr("m"), To: "a0"})
		s2.flush()
		got = openedOn(t, r2, "extra")
		return got.Kind == kindOpened
	})
	if got.Kind != kindOpened {
		t.Fatalf("open after the peer's channels went idle: kind %d (%s), want opened", got.Kind, got.Msg)
	}
	tg.r.mu.Lock()
	held := len(tg.r.inByPeer[m.h.ID()].chans)
	tg.r.mu.Unlock()
	if held > maxInChannelsPerPeer || held == maxInChannelsPerPeer && first() != nil {
		t.Fatalf("%d channels held for the peer, the first not evicted", held)
	}
	s2.write(&wireMsg{Kind: kindOpen, Ch: "c00000", From: m.addr("m"), To: "a0"})
	s2.flush()
	if got := openedOn(t, r2, "c00000"); got.Kind != kindOpened || got.W != 1 {
		t.Fatalf("reopening an evicted channel: kind %d, watermark %d, want opened at 1", got.Kind, got.W)
	}
}

// A hello that brings a new card past MaxRemoteCardsPerHost still updates
// the cards already held that come after it (it stopped at the refused
// card), and says so with one security event.
func TestHelloPastTheCardBoundRefreshesHeldCards(t *testing.T) {
	var mu sync.Mutex
	var refused int
	tg := rvNewTarget(t, WithEventSink(sinkFunc(func(e Event) {
		if e.Type == EvtSecurityRaised && e.Code == agentcard.CodeTooManyCards {
			mu.Lock()
			refused++
			mu.Unlock()
		}
	})))
	m := rvNewMallory(t, tg)
	cards := func(rev uint64, desc string, ids ...string) [][]byte {
		var out [][]byte
		for _, id := range ids {
			c := agentcard.Card{ID: id, Name: id, Description: desc, Revision: rev, Version: "1.0.0", Tier: tiers.L3, Protocols: []string{"a2a/1.0"},
				Capabilities: []agentcard.Capability{}, Host: m.h.ID().String()}
			b, err := agentcard.Seal(c, m.key)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, b)
		}
		return out
	}
	var held []string
	for i := range agentcard.MaxRemoteCardsPerHost {
		held = append(held, fmt.Sprintf("b%03d", i))
	}
	s := m.stream(tg) // no cards yet
	s.drain()
	s.write(&wireMsg{Kind: kindHello, Cards: cards(1, "first", held...)})
	s.flush()
	if !rvWait(t, 5*time.Second, func() bool { return len(tg.reg.Remote()) == len(held) }) {
		t.Fatalf("%d cards held, want %d", len(tg.reg.Remote()), len(held))
	}
	s.write(&wireMsg{Kind: kindHello, Cards: cards(2, "second", append([]string{"a-new"}, held...)...)})
	s.flush()
	last := held[len(held)-1] + "@" + m.h.ID().String()
	if !rvWait(t, 5*time.Second, func() bool { c, ok := tg.reg.Get(last); return ok && c.Description == "second" }) {
		c, _ := tg.reg.Get(last)
		t.Fatalf("held card %s not refreshed by a hello past the bound: description %q", last, c.Description)
	}
	if _, ok := tg.reg.Get("a-new@" + m.h.ID().String()); ok {
		t.Fatal("the card past the bound was taken")
	}
	mu.Lock()
	defer mu.Unlock()
	if refused != 1 {
		t.Fatalf("%d TOO_MANY_CARDS security events for one hello, want 1", refused)
	}
}

type sinkFunc func(Event)

func (f sinkFunc) Emit(e Event) { f(e) }

// A channel handler that makes a Request gets its answer without waiting
// out the request timeout, both when the answer is queued behind an
// envelope that waits for the slot the handler holds (one slot here), and
// when it comes on the very channel whose handler waits for it (an agent
// asking back the agent that messaged it): answers are handed over ahead
// of a busy channel's queue.
func TestRequestInHandlerIsAnswered(t *testing.T) {
	for _, tc := range []struct{ name, starter string }{
		{"answer behind a notification needing the slot", "b"},
		{"answer on the channel whose handler waits", "c"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := envelope.NewFactory()
			ha, hc := loopbackHost(t), loopbackHost(t)
			ra, regA := startRouter(t, ha, []string{"a"}, WithFactory(f), WithRequestTimeout(5*time.Second))
			ra.chSem = make(chan struct{}, 1) // one slot; set before any delivery
			rc, regC := startRouter(t, hc, []string{"b", "c"}, WithFactory(f))
			a, c := "a@"+ha.ID().String(), "c@"+hc.ID().String()
			type result struct {
				err  error
				took time.Duration
			}
			done := make(chan result, 1)
			pinged := make(chan struct{}, 1)
			ra.Handle("a", func(ctx context.Context, env *envelope.Envelope) (any, error) {
				switch string(env.Payload) {
				case `"start"`:
					req, _ := f.New("a", c, envelope.TypeRequest, []byte(`"q"`))
					t0 := time.Now()
					_, _, err := ra.Request(ctx, req)
					done <- result{err, time.Since(t0)}
				case `"ping"`:
					pinged <- struct{}{}
				}
				return nil, nil
			})
			rc.Handle("c", func(context.Context, *envelope.Envelope) (any, error) {
				n, _ := f.New("c", a, envelope.TypeNotification, []byte(`"ping"`))
				if _, err := rc.Post(context.Background(), n); err != nil {
					return nil, err
				}
				return "answer", nil
			})
			rc.Handle("b", func(context.Context, *envelope.Envelope) (any, error) { return nil, nil })
			connectHosts(t, ha, hc)
			if !rvWait(t, 10*time.Second, func() bool {
				_, okA := regA.Get(c)
				_, okC := regC.Get(a)
				return okA && okC
			}) {
				t.Fatal("the nodes never learned each other's cards")
			}
			start, _ := f.New(tc.starter, a, envelope.TypeNotification, []byte(`"start"`))
			if _, err := rc.Post(t.Context(), start); err != nil {
				t.Fatal(err)
			}
			select {
			case res := <-done:
				if res.err != nil || res.took > 2*time.Second {
					t.Fatalf("the handler's request: %v after %s", res.err, res.took)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the handler's request never returned")
			}
			select {
			case <-pinged:
			case <-time.After(5 * time.Second):
				t.Fatal("the notification sent before the answer never reached its agent")
			}
		})
	}
}
