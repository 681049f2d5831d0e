package crdt_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/nova-node/nova-node/internal/leakcheck"
	"github.com/nova-node/nova-node/internal/waitfor"
	"sync"
	"testing"
	"time"

	"github.com/fxamacker/cbor/v2"
	"github.com/libp2p/go-libp2p"
	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/nova-node/nova-node/crdt"
	"github.com/nova-node/nova-node/crdt/delta"
)

type memStore struct {
	mu   sync.Mutex
	docs map[string][]byte
	logs map[string][][]byte
}

func (s *memStore) LoadDoc(n string) ([]byte, [][]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.docs[n], s.logs[n], nil
}
func (s *memStore) AppendDelta(n string, b []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.logs == nil {
		s.logs = map[string][][]byte{}
	}
	if _, ok := s.docs[n]; !ok {
		s.docs[n] = nil
	}
	s.logs[n] = append(s.logs[n], append([]byte(nil), b...))
	return nil
}

func (s *memStore) AppendDeltas(n string, bs [][]byte) error {
	for _, b := range bs {
		if err := s.AppendDelta(n, b); err != nil {
			return err
		}
	}
	return nil
}

// size is the bytes stored for a document: snapshot plus log.
func (s *memStore) size(n string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	total := len(s.docs[n])
	for _, d := range s.logs[n] {
		total += len(d)
	}
	return total
}
func (s *memStore) SaveDoc(n string, b []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.docs[n] = append([]byte(nil), b...)
	delete(s.logs, n)
	return nil
}
func (s *memStore) DeleteDoc(n string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.docs, n)
	delete(s.logs, n)
	return nil
}

func (s *memStore) DocNames() ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for n := range s.docs {
		out = append(out, n)
	}
	return out, nil
}

type replica struct {
	h     host.Host
	m     *crdt.Manager
	store *memStore
	stop  func()
}

func newReplica(t testing.TB, key crypto.PrivKey, store *memStore, opts ...crdt.Option) *replica {
	t.Helper()
	if key == nil {
		key, _, _ = crypto.GenerateEd25519Key(rand.Reader)
	}
	if store == nil {
		store = &memStore{docs: map[string][]byte{}}
	}
	h, err := libp2p.New(libp2p.Identity(key), libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ps, err := pubsub.NewGossipSub(ctx, h, pubsub.WithMessageSignaturePolicy(pubsub.StrictSign), pubsub.WithFloodPublish(true))
	if err != nil {
		t.Fatal(err)
	}
	m, err := crdt.New(h, ps, "test", store, append([]crdt.Option{crdt.WithCatchupInterval(200 * time.Millisecond)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	r := &replica{h: h, m: m, store: store}
	var once sync.Once
	r.stop = func() {
		once.Do(func() {
			m.Close()
			cancel()
			h.Close()
		})
	}
	t.Cleanup(r.stop)
	return r
}

func connect(t testing.TB, a, b *replica) {
	t.Helper()
	if err := a.h.Connect(context.Background(), peer.AddrInfo{ID: b.h.ID(), Addrs: b.h.Addrs()}); err != nil {
		t.Fatal(err)
	}
}

func open(t testing.TB, r *replica, name string) *crdt.Doc {
	t.Helper()
	d, err := r.m.Open(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func converged(docs ...*crdt.Doc) error {
	first := docs[0].JSON()
	for i, d := range docs[1:] {
		if j := d.JSON(); !bytes.Equal(j, first) {
			return fmt.Errorf("replica %d: %s\nreplica 0: %s", i+1, j, first)
		}
	}
	return nil
}

// TestConcurrentWritersConverge: three replicas write concurrently (values,
// a set, a counter) and end with the same document, nothing lost.
func TestConcurrentWritersConverge(t *testing.T) {
	rs := []*replica{newReplica(t, nil, nil), newReplica(t, nil, nil), newReplica(t, nil, nil)}
	connect(t, rs[0], rs[1])
	connect(t, rs[1], rs[2])
	connect(t, rs[0], rs[2])
	var docs []*crdt.Doc
	for _, r := range rs {
		docs = append(docs, open(t, r, "shared"))
	}
	waitfor.Eventually(t, 10*time.Second, func() error {
		for i, r := range rs {
			if n := len(docs[i].Info().Clock); n < 0 || docs[i].Info().Peers < 2 {
				return fmt.Errorf("replica %d sees %d topic peers", i, docs[i].Info().Peers)
			}
			_ = r
		}
		return nil
	})
	var wg sync.WaitGroup
	for i, d := range docs {
		wg.Go(func() {
			ctx := context.Background()
			agent := fmt.Sprintf("w%d@%s", i, rs[i].h.ID())
			for k := 0; k < 20; k++ {
				if err := d.Set(ctx, agent, fmt.Sprintf("/r%d/k%d", i, k), json.RawMessage(fmt.Sprint(k))); err != nil {
					t.Error(err)
				}
				if err := d.Incr(ctx, agent, "/count", 1); err != nil {
					t.Error(err)
				}
				if err := d.SetAdd(ctx, agent, "/members", json.RawMessage(fmt.Sprintf(`"%d-%d"`, i, k))); err != nil {
					t.Error(err)
				}
				if err := d.Set(ctx, agent, "/last", json.RawMessage(fmt.Sprintf(`"%d"`, i))); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	waitfor.Eventually(t, 15*time.Second, func() error { return converged(docs...) })
	if v, _ := docs[0].Get("/count"); string(v) != "60" {
		t.Fatalf("counter %s, want 60", v)
	}
	var members []string
	v, _ := docs[2].Get("/members")
	json.Unmarshal(v, &members)
	if len(members) != 60 {
		t.Fatalf("%d set members, want 60: a concurrent add was lost", len(members))
	}
	for i := range rs {
		for k := 0; k < 20; k++ {
			if v, ok := docs[(i+1)%3].Get(fmt.Sprintf("/r%d/k%d", i, k)); !ok || string(v) != fmt.Sprint(k) {
				t.Fatalf("/r%d/k%d = %s on another replica", i, k, v)
			}
		}
	}
	// Concurrent writes to /last are all kept in the causal history.
	if vals := docs[0].Values("/last"); len(vals) < 1 {
		t.Fatal("no value for /last")
	}
}

// TestLateJoinerIsCurrentAfterCatchUp: a replica that opens the document
// after 200 writes has them all without waiting for new traffic.
func TestLateJoinerIsCurrentAfterCatchUp(t *testing.T) {
	a := newReplica(t, nil, nil)
	da := open(t, a, "notes")
	for k := 0; k < 200; k++ {
		if err := da.Set(context.Background(), "w@"+a.h.ID().String(), fmt.Sprintf("/k%d", k), json.RawMessage(`true`)); err != nil {
			t.Fatal(err)
		}
	}
	b := newReplica(t, nil, nil)
	connect(t, b, a)
	start := time.Now()
	db := open(t, b, "notes")
	waitfor.Eventually(t, 5*time.Second, func() error { return converged(da, db) })
	t.Logf("late joiner current after %s", time.Since(start))
}

// TestGarbageIsSkippedAndCounted: undecodable updates published on the
// topic are rejected and counted (CRDT_DESERIALIZATION_FAILED) while valid
// updates keep flowing.
func TestGarbageIsSkippedAndCounted(t *testing.T) {
	a, b := newReplica(t, nil, nil), newReplica(t, nil, nil)
	connect(t, a, b)
	da, db := open(t, a, "g"), open(t, b, "g")
	// A third, raw peer publishes garbage on the document's topic.
	h, _ := libp2p.New(libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"))
	defer h.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ps, _ := pubsub.NewGossipSub(ctx, h, pubsub.WithFloodPublish(true))
	topic, _ := ps.Join(crdt.Topic("test", "g"))
	h.Connect(ctx, peer.AddrInfo{ID: b.h.ID(), Addrs: b.h.Addrs()})
	waitfor.Eventually(t, 5*time.Second, func() error {
		if len(topic.ListPeers()) == 0 || db.Info().Peers < 1 {
			return fmt.Errorf("topic not ready")
		}
		return nil
	})
	for i := 0; i < 5; i++ {
		topic.Publish(ctx, []byte(fmt.Sprintf("garbage %d \xff\x00", i)))
	}
	for k := 0; k < 10; k++ {
		da.Set(context.Background(), "w@"+a.h.ID().String(), fmt.Sprintf("/k%d", k), json.RawMessage(`1`))
	}
	waitfor.Eventually(t, 5*time.Second, func() error {
		if b.m.Rejected() < 5 {
			return fmt.Errorf("%d rejected", b.m.Rejected())
		}
		return converged(da, db)
	})
}

// TestRestartKeepsState: a replica closed and restarted with the same key
// and store has its document as it was, and keeps converging.
func TestRestartKeepsState(t *testing.T) {
	key, _, _ := crypto.GenerateEd25519Key(rand.Reader)
	store := &memStore{docs: map[string][]byte{}}
	a := newReplica(t, key, store)
	da := open(t, a, "persist")
	for k := 0; k < 30; k++ {
		da.Incr(context.Background(), "w@"+a.h.ID().String(), "/n", 2)
	}
	before := da.JSON()
	a.stop()
	a2 := newReplica(t, key, store)
	da2 := open(t, a2, "persist")
	if !bytes.Equal(da2.JSON(), before) {
		t.Fatalf("after restart %s, before %s", da2.JSON(), before)
	}
	if err := da2.Incr(context.Background(), "w@"+a2.h.ID().String(), "/n", 1); err != nil {
		t.Fatal(err)
	}
	if v, _ := da2.Get("/n"); string(v) != "61" {
		t.Fatalf("counter %s, want 61", v)
	}
}

func TestNoGoroutineOutlivesTheManager(t *testing.T) {
	r := newReplica(t, nil, nil)
	open(t, r, "x")
	r.stop()
	if leak := leakcheck.Wait("nova-node/crdt.", 5*time.Second); leak != "" {
		t.Fatalf("leaked:\n%s", leak)
	}
}

// TestStoredLogIsSignedUpdates: the store holds each write as its signed
// update (so a restarted node can serve catch-ups any receiver verifies),
// at a bounded cost per write: 1,000 writes of small values cost under
// 1 KB each, and every stored entry verifies.
func TestStoredLogIsSignedUpdates(t *testing.T) {
	r := newReplica(t, nil, nil)
	d := open(t, r, "churn")
	ctx := context.Background()
	agent := "w@" + r.h.ID().String()
	for i := 0; i < 1000; i++ {
		if err := d.Set(ctx, agent, fmt.Sprintf("/k%d", i%100), json.RawMessage(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	size := r.store.size("churn")
	t.Logf("stored: %d bytes for 1,000 writes", size)
	if size > 1000*1024 {
		t.Fatalf("%d bytes stored for 1,000 small writes", size)
	}
	_, logged, _ := r.store.LoadDoc("churn")
	if len(logged) != 1000 {
		t.Fatalf("%d entries logged, want 1,000", len(logged))
	}
	for i, b := range logged {
		if u, err := crdt.DecodeUpdate(b); err != nil || u.Author != r.h.ID().String() {
			t.Fatalf("stored entry %d: %v", i, err)
		}
	}
}

// TestLegacyDocumentRepairedOrRefused: a document stored unsigned (an
// older version's snapshot and delta log, here with a clock claiming this
// replica's dots up to 2^64-1, which wedged it) is refused with
// CRDT_LEGACY_DOCUMENT, the store untouched, when no local agent may write
// it; with one, its content is written again as one signed update, the
// clock left behind, and the next writes succeed.
func TestLegacyDocumentRepairedOrRefused(t *testing.T) {
	key, _, _ := crypto.GenerateEd25519Key(rand.Reader)
	self, _ := peer.IDFromPrivateKey(key)
	legacy := func() *memStore {
		old, _ := delta.New("someone")
		if _, err := old.Apply(old.Set("/goal", json.RawMessage(`"ship"`))); err != nil {
			t.Fatal(err)
		}
		// A wedge: a delta claiming this replica's dots up to 2^64-1.
		const top = ^uint64(0)
		logged, err := cbor.Marshal([]any{1, 2, []string{self.String()}, []uint64{0, 1, top}, []uint64{0, top, top}, 1,
			[]any{[]any{"/n", []any{[]any{0, top, 1, "1"}}, []any{}, []any{}}}})
		if err != nil {
			t.Fatal(err)
		}
		if x, err := delta.DecodeDelta(logged); err != nil || x.Context().Max(self.String()) != top {
			t.Fatalf("the wedging delta: %v", err)
		}
		state, _ := delta.EncodeDoc(old)
		return &memStore{docs: map[string][]byte{"old": state}, logs: map[string][][]byte{"old": {logged}}}
	}
	st := legacy()
	r := newReplica(t, key, st)
	_, err := r.m.Open(context.Background(), "old")
	var le *crdt.LegacyError
	if !errors.As(err, &le) || le.Code() != crdt.CodeLegacyDocument {
		t.Fatalf("opening an unsigned document without a repair agent: %v", err)
	}
	if _, logged, _ := st.LoadDoc("old"); len(logged) != 1 {
		t.Fatal("the refused document's store was changed")
	}
	r.stop()

	st = legacy()
	r = newReplica(t, key, st, crdt.WithLegacyRepair(func(string) (string, bool) { return "w@" + self.String(), true }))
	d := open(t, r, "old")
	if got := string(d.JSON()); got != `{"goal":"ship","n":1}` {
		t.Fatalf("repaired: %s", got)
	}
	if err := d.Set(context.Background(), "w@"+self.String(), "/goal", json.RawMessage(`"shipped"`)); err != nil {
		t.Fatalf("a write after the repair: %v", err)
	}
	state, logged, _ := st.LoadDoc("old")
	if _, err := delta.DecodeDoc(state); err == nil {
		t.Fatal("the store still holds an unsigned state")
	}
	for _, b := range logged {
		if _, err := crdt.DecodeUpdate(b); err != nil {
			t.Fatalf("a logged entry after the repair: %v", err)
		}
	}
}

// TestEquivocationDoesNotSplitReplicas: a replica signs two histories of
// the same dots and shows each to a different node while they are apart.
// Once connected, both nodes hold both histories (catch-up compares the
// hashes held, not only clocks), end with the same document, report the
// equivocation, and go on writing.
func TestEquivocationDoesNotSplitReplicas(t *testing.T) {
	var mu sync.Mutex
	events := map[peer.ID][]crdt.SecurityEvent{}
	record := func(self *peer.ID) crdt.Option {
		return crdt.WithSecurityEvents(func(e crdt.SecurityEvent) {
			mu.Lock()
			defer mu.Unlock()
			events[*self] = append(events[*self], e)
		})
	}
	var idX, idY peer.ID
	rx := newReplica(t, nil, nil, record(&idX))
	ry := newReplica(t, nil, nil, record(&idY))
	idX, idY = rx.h.ID(), ry.h.ID()
	dx, dy := open(t, rx, "fork"), open(t, ry, "fork")

	key, _, _ := crypto.GenerateEd25519Key(rand.Reader)
	ah, err := libp2p.New(libp2p.Identity(key), libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"))
	if err != nil {
		t.Fatal(err)
	}
	defer ah.Close()
	aps, err := pubsub.NewGossipSub(t.Context(), ah, pubsub.WithMessageSignaturePolicy(pubsub.StrictSign), pubsub.WithFloodPublish(true))
	if err != nil {
		t.Fatal(err)
	}
	topic, err := aps.Join(crdt.Topic("test", "fork"))
	if err != nil {
		t.Fatal(err)
	}
	sub, _ := topic.Subscribe()
	defer sub.Cancel()
	me := ah.ID().String()
	history := func(v string) []byte {
		d, _ := delta.New(me)
		x, err := d.Set("/b", json.RawMessage(v))
		if err != nil {
			t.Fatal(err)
		}
		u, err := crdt.SignUpdate(key, crdt.UpdateFields{Doc: "fork", Agent: "m@" + me, Clock: delta.VersionVector{me: 1}, Time: 1}, x)
		if err != nil {
			t.Fatal(err)
		}
		return u.Raw
	}
	show := func(r *replica, d *crdt.Doc, v string) {
		if err := ah.Connect(t.Context(), peer.AddrInfo{ID: r.h.ID(), Addrs: r.h.Addrs()}); err != nil {
			t.Fatal(err)
		}
		waitfor.Eventually(t, 10*time.Second, func() error {
			if len(topic.ListPeers()) == 0 {
				return fmt.Errorf("no topic peer")
			}
			return nil
		})
		if err := topic.Publish(t.Context(), history(v)); err != nil {
			t.Fatal(err)
		}
		waitfor.Eventually(t, 10*time.Second, func() error {
			if got, _ := d.Get("/b"); string(got) != v {
				return fmt.Errorf("/b is %s", got)
			}
			return nil
		})
		ah.Network().ClosePeer(r.h.ID())
		waitfor.Eventually(t, 10*time.Second, func() error {
			if len(topic.ListPeers()) != 0 {
				return fmt.Errorf("still a topic peer")
			}
			return nil
		})
	}
	show(rx, dx, `"A"`)
	show(ry, dy, `"B"`)

	connect(t, rx, ry)
	waitfor.Eventually(t, 10*time.Second, func() error {
		if err := converged(dx, dy); err != nil {
			return err
		}
		for _, d := range []*crdt.Doc{dx, dy} {
			if i := d.Info(); i.Updates != 2 || len(i.Equivocating) != 1 || i.Equivocating[0] != me {
				return fmt.Errorf("%s holds %d updates, equivocating %v", d.Name(), i.Updates, i.Equivocating)
			}
		}
		return nil
	})
	mu.Lock()
	for _, id := range []peer.ID{idX, idY} {
		if len(events[id]) == 0 || events[id][0].Code != crdt.CodeEquivocation || events[id][0].Replica != me {
			t.Fatalf("node %s: events %+v, want %s naming the replica", id, events[id], crdt.CodeEquivocation)
		}
	}
	mu.Unlock()
	if err := dx.Set(context.Background(), "w@"+idX.String(), "/after", json.RawMessage(`1`)); err != nil {
		t.Fatal(err)
	}
	waitfor.Eventually(t, 10*time.Second, func() error { return converged(dx, dy) })
}
