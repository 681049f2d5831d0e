package connhealth

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/event"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"
	"go.uber.org/zap"

	"github.com/nova-node/nova-node/protocol"
)

// memStore is a Store in memory; a failing UpdateAddrs leaves it as it
// was.
type memStore struct{ m map[string][]byte }

func newMemStore() *memStore { return &memStore{m: map[string][]byte{}} }

func (s *memStore) ForEachAddrs(fn func(k, v []byte) error) error { return memTx(s.m).ForEach(fn) }

func (s *memStore) UpdateAddrs(fn func(BookTx) error) error {
	tx := memTx(maps.Clone(s.m))
	if err := fn(tx); err != nil {
		return err
	}
	s.m = tx
	return nil
}

type memTx map[string][]byte

func (t memTx) Put(k, v []byte) error {
	if len(k) == 0 {
		return errors.New("empty key")
	}
	t[string(k)] = slices.Clone(v)
	return nil
}

func (t memTx) Delete(k []byte) error { delete(t, string(k)); return nil }

func (t memTx) ForEach(fn func(k, v []byte) error) error {
	for _, k := range slices.Sorted(maps.Keys(t)) {
		if err := fn([]byte(k), t[k]); err != nil {
			return err
		}
	}
	return nil
}

func testPeer(t *testing.T) peer.ID {
	t.Helper()
	_, pub, err := crypto.GenerateEd25519Key(nil)
	if err != nil {
		t.Fatal(err)
	}
	p, err := peer.IDFromPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// bookFixture is a fresh store and a host that listens nowhere, closed
// when the test ends.
func bookFixture(t *testing.T) (*memStore, host.Host) {
	t.Helper()
	h, err := libp2p.New(libp2p.NoListenAddrs)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return newMemStore(), h
}

func putEntry(t *testing.T, s *memStore, k []byte, v []byte) {
	t.Helper()
	s.m[string(k)] = v
}

// TestAddrBookLoadSkipsBadAndStaleEntries: entries that do not decode, name
// no valid peer or address, or were last seen past bookMaxAge are not
// loaded; addresses past bookMaxAddrs are cut; good ones reach the
// peerstore.
func TestAddrBookLoadSkipsBadAndStaleEntries(t *testing.T) {
	s, h := bookFixture(t)
	now := time.Now()
	good, stale, noAddrs, many := testPeer(t), testPeer(t), testPeer(t), testPeer(t)
	entry := func(seen time.Time, addrs ...string) []byte {
		v, _ := json.Marshal(bookEntry{Addrs: addrs, Seen: seen.Unix()})
		return v
	}
	putEntry(t, s, []byte(good), entry(now.Add(-time.Hour), "/ip4/127.0.0.1/tcp/4001", "not an address"))
	putEntry(t, s, []byte(stale), entry(now.Add(-bookMaxAge-time.Hour), "/ip4/127.0.0.1/tcp/4002"))
	putEntry(t, s, []byte(noAddrs), entry(now, "garbage"))
	var lots []string
	for i := range 40 {
		lots = append(lots, fmt.Sprintf("/ip4/127.0.0.1/tcp/%d", 5000+i))
	}
	putEntry(t, s, []byte(many), entry(now, lots...))
	putEntry(t, s, []byte("not a peer id"), entry(now, "/ip4/127.0.0.1/tcp/4003"))
	putEntry(t, s, []byte(testPeer(t)), []byte("{not json"))
	putEntry(t, s, []byte(h.ID()), entry(now, "/ip4/127.0.0.1/tcp/4004")) // itself

	n, err := loadAddrBook(h, s, now)
	if err != nil {
		t.Fatal(err)
	}
	if n != 2 {
		t.Fatalf("loaded %d peers, want 2 (good, many)", n)
	}
	want, _ := ma.NewMultiaddr("/ip4/127.0.0.1/tcp/4001")
	if got := h.Peerstore().Addrs(good); len(got) != 1 || !got[0].Equal(want) {
		t.Fatalf("good peer's addresses: %v", got)
	}
	if got := h.Peerstore().Addrs(stale); len(got) != 0 {
		t.Fatalf("stale entry loaded: %v", got)
	}
	if got := h.Peerstore().Addrs(many); len(got) != bookMaxAddrs {
		t.Fatalf("%d addresses loaded for one peer, want the cap %d", len(got), bookMaxAddrs)
	}
}

// TestAddrBookKeepsTheMostRecentPeers: past bookMaxPeers, a flush forgets
// the least recently seen peers.
func TestAddrBookKeepsTheMostRecentPeers(t *testing.T) {
	s, h := bookFixture(t)
	old := time.Now().Add(-time.Hour)
	var oldest []peer.ID
	for i := range bookMaxPeers {
		p := testPeer(t)
		if i < 3 {
			oldest = append(oldest, p)
		}
		v, _ := json.Marshal(bookEntry{Addrs: []string{"/ip4/127.0.0.1/tcp/4001"}, Seen: old.Unix() + int64(i)})
		putEntry(t, s, []byte(p), v)
	}
	b := newAddrBook(h, s, zap.NewNop().Sugar())
	fresh := []peer.ID{testPeer(t), testPeer(t), testPeer(t)}
	a, _ := ma.NewMultiaddr("/ip4/127.0.0.1/tcp/4005")
	for _, p := range fresh {
		b.dirty[p] = []ma.Multiaddr{a}
	}
	b.flush()
	keys := map[string]bool{}
	for k := range s.m {
		keys[k] = true
	}
	if len(keys) != bookMaxPeers {
		t.Fatalf("%d peers kept, want %d", len(keys), bookMaxPeers)
	}
	for _, p := range fresh {
		if !keys[string(p)] {
			t.Fatalf("freshly seen peer %s not kept", p)
		}
	}
	for _, p := range oldest {
		if keys[string(p)] {
			t.Fatalf("least recently seen peer %s kept", p)
		}
	}
}

// TestAddrBookSavesWhatIdentifySays: the book saves where a nova peer can
// be dialled from its identify event (the address dialled first), not the
// peerstore's addresses: those loaded from the book at start, stale now,
// are not saved again (kept alive, they could push the live one past the
// cap). A peer that does not speak the A2A protocol takes no place in the
// book.
func TestAddrBookSavesWhatIdentifySays(t *testing.T) {
	s := newMemStore()
	listen := libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0")
	a, err := libp2p.New(listen)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	nova, err := libp2p.New(listen)
	if err != nil {
		t.Fatal(err)
	}
	defer nova.Close()
	nova.SetStreamHandler(protocol.IDA2A, func(st network.Stream) { _ = st.Reset() })
	other, err := libp2p.New(listen)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()

	var stale []string
	for i := range bookMaxAddrs {
		stale = append(stale, fmt.Sprintf("/ip4/127.0.0.1/tcp/%d", 1+i)) // nova's old, dead addresses
	}
	v, _ := json.Marshal(bookEntry{Addrs: stale, Seen: time.Now().Add(-time.Hour).Unix()})
	putEntry(t, s, []byte(nova.ID()), v)
	if _, err := loadAddrBook(a, s, time.Now()); err != nil {
		t.Fatal(err)
	}
	sub, err := a.EventBus().Subscribe(new(event.EvtPeerIdentificationCompleted))
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	book := newAddrBook(a, s, zap.NewNop().Sugar())
	for _, h := range []host.Host{nova, other} {
		if err := a.Connect(t.Context(), peer.AddrInfo{ID: h.ID(), Addrs: h.Addrs()}); err != nil {
			t.Fatal(err)
		}
	}
	for seen := 0; seen < 2; {
		select {
		case e := <-sub.Out():
			evt := e.(event.EvtPeerIdentificationCompleted)
			if evt.Peer == nova.ID() || evt.Peer == other.ID() {
				book.record(evt)
				seen++
			}
		case <-time.After(5 * time.Second):
			t.Fatal("no identify")
		}
	}
	book.flush()
	var saved bookEntry
	if _, ok := s.m[string(other.ID())]; ok {
		t.Error("a peer without the A2A protocol was saved")
	}
	if err := json.Unmarshal(s.m[string(nova.ID())], &saved); err != nil {
		t.Fatal(err)
	}
	live := nova.Addrs()[0].String()
	if len(saved.Addrs) == 0 || saved.Addrs[0] != live {
		t.Fatalf("saved %v, want the dialled address %s first", saved.Addrs, live)
	}
	for _, x := range saved.Addrs {
		if slices.Contains(stale, x) {
			t.Fatalf("stale address %s saved again: %v", x, saved.Addrs)
		}
	}
}
